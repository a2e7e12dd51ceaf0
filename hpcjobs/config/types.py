"""Field types shared by the experiment and site schemas.

Each type parses what people write (``16G``, ``2h``) into one canonical
value (bytes, seconds) and publishes a JSON Schema that says what it accepts.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from hpcjobs.units import MEMORY_EXAMPLES, WALLTIME_EXAMPLES, parse_memory, parse_walltime


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


def _memory(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(f"a bare number is ambiguous; expected {MEMORY_EXAMPLES}")
    return parse_memory(value)


def _walltime(value: Any) -> int:
    return parse_walltime(value)


#: Memory in bytes, written as ``16G``, ``512M``, ``1.5T``.
Memory = Annotated[
    int,
    BeforeValidator(_memory),
    WithJsonSchema({"type": "string", "pattern": r"^\d+(\.\d+)?\s*[KMGTPkmgtp]?(i?[Bb])?$",
                    "description": f"memory: {MEMORY_EXAMPLES}"}),
]

#: Wall time in seconds, written as ``HH:MM:SS``, ``D-HH:MM:SS``, ``90m``, ``2h``.
Walltime = Annotated[
    int,
    BeforeValidator(_walltime),
    WithJsonSchema({"type": ["string", "integer"], "description": f"wall time: {WALLTIME_EXAMPLES}"}),
]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+@-]*$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits and _ . + - @ (starting with a letter or digit)"
        )
    return value


def _env_name(value: str) -> str:
    if not _ENV_RE.match(value):
        raise ValueError(f"{value!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def _one_line(value: str) -> str:
    if _CONTROL_RE.search(value):
        raise ValueError("must be a single line without control characters (newline, tab, ...)")
    return value


def _directive_path(value: str) -> str:
    _one_line(value)
    if any(c.isspace() for c in value) or any(c in value for c in "'\"`$;&|<>\\"):
        raise ValueError(
            f"{value!r}: paths written into scheduler directives cannot contain spaces, quotes or shell "
            "characters ($ ` ; & | < > \\)"
        )
    return value


#: Job, partition, queue, account, QoS, site and GPU-type names.
Name = Annotated[str, AfterValidator(_name)]
#: An environment variable name.
EnvName = Annotated[str, AfterValidator(_env_name)]
#: Text that must stay on one line (directives, module names).
OneLine = Annotated[str, AfterValidator(_one_line)]
#: A path that goes into a scheduler directive line.
DirectivePath = Annotated[str, AfterValidator(_directive_path)]
#: An environment variable value (numbers and booleans are accepted and kept as text).
def _env_value(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("environment values cannot contain NUL characters")
    return value


EnvValue = Annotated[str, BeforeValidator(_env_value)]
