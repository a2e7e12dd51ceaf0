"""Field types shared by the experiment and site schemas.

Each type parses what people write (``16G``, ``2h``) into one canonical
value (bytes, seconds) and publishes a JSON Schema that says what it accepts.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    WrapValidator,
    field_validator,
)

from hpcjobs.units import MEMORY_EXAMPLES, WALLTIME_EXAMPLES, parse_memory, parse_walltime

#: What a number field's shape is: ``"number"``, or ``("list"|"dict", shape)`` for a container of them.
NumberShape = typing.Union[str, tuple[str, "NumberShape"], None]  # noqa: UP007 (a recursive alias needs Union)


def number_shape(annotation: Any) -> NumberShape:
    """Where ``annotation`` takes numbers but no boolean: ``"number"`` (an int or float field), ``("list", shape)``
    or ``("dict", shape)`` for a container of such fields, ``None`` where a boolean is a valid value
    (``bool``, ``Any``, text, models, literals, or a union with any of them) or where the type parses its
    input itself (:data:`Memory`, :data:`Walltime`: their parsers refuse a boolean with their own message).

    pydantic reads ``true`` as 1 and ``false`` as 0 for an ``int`` (and 1.0/0.0 for a ``float``), so a YAML
    ``per_node: true`` would silently become 1: :class:`StrictModel` refuses a boolean wherever this
    says ``"number"``.
    """
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        if any(isinstance(m, (BeforeValidator, PlainValidator, WrapValidator)) for m in metadata):
            return None  # a type that parses its own input (Memory, Walltime) and says what it expects
        return number_shape(inner)
    if origin in (typing.Union, types.UnionType):
        shapes = {number_shape(a) for a in typing.get_args(annotation) if a is not type(None)}
        return shapes.pop() if len(shapes) == 1 else None
    if origin in (list, tuple, set, frozenset):
        items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        inner = number_shape(items[0]) if len(items) == 1 else None
        return None if inner is None else ("list", inner)
    if origin is dict:
        key_value = typing.get_args(annotation)
        inner = number_shape(key_value[1]) if len(key_value) == 2 else None
        return None if inner is None else ("dict", inner)
    return "number" if annotation is int or annotation is float else None


def boolean_where_number(shape: NumberShape, value: Any) -> tuple[bool, tuple[str, ...]] | None:
    """The first boolean in ``value`` that a field of ``shape`` would read as a number, and where it is
    (``()``: the value itself; ``("2",)``: item 2 of a list, or key ``2`` of a mapping); ``None`` if none."""
    if shape == "number":
        return (value, ()) if isinstance(value, bool) else None
    if not isinstance(shape, tuple):
        return None
    kind, inner = shape
    if kind == "list" and isinstance(value, (list, tuple)):
        items: typing.Iterable[tuple[Any, Any]] = enumerate(value)
    elif kind == "dict" and isinstance(value, dict):
        items = value.items()
    else:
        return None
    for key, item in items:
        found = boolean_where_number(inner, item)
        if found is not None:
            return found[0], (str(key), *found[1])
    return None


@functools.cache
def _field_number_shape(model: type[BaseModel], field: str) -> NumberShape:
    info = model.model_fields.get(field)
    return None if info is None else number_shape(info.annotation)


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment, and a number
    field refuses a boolean (pydantic would read ``true`` as 1; see :func:`number_shape`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, (bool, list, tuple, dict)) or info.field_name is None:
            return value
        found = boolean_where_number(_field_number_shape(cls, info.field_name), value)
        if found is not None:
            flag, path = found
            where = f" at {'.'.join((info.field_name, *path))}" if path else ""
            raise ValueError(f"expected a number, got the boolean {str(flag).lower()}{where} (YAML reads true/false, "
                             "yes/no and on/off as booleans)")
        return value
        shapes = cls.__dict__.get("_number_shapes")
        if shapes is None:
            shapes = {name: number_shape(f.annotation) for name, f in cls.model_fields.items()}
            cls._number_shapes = shapes
        shape = shapes.get(info.field_name)
        where = None if shape is None else boolean_where_number(shape, value)
        if where is not None:
            got = value if where == "" else "a boolean"
            raise ValueError(f"expected a number, got {str(got).lower() if where == '' else got}{where} (YAML reads "
                             "true/false, yes/no and on/off as booleans)")
        return value


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

#: Names are matched whole (``fullmatch``): with ``re.match``, a pattern ending in ``$`` also accepts a
#: trailing newline, and ``gpu_type: "v100\n"`` would split a directive line in two.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@-]*")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

#: Longest job, partition, account, QoS, site or GPU-type name. A sweep folder is named
#: ``<name>-<8 hex>`` and must fit a file name (255 bytes on Linux filesystems); schedulers keep
#: far shorter names anyway.
MAX_NAME_LENGTH = 128

#: Variables the job's environment, parameters and secrets may not set, and why. The bash ones
#: are from the bash manual ("Bash Variables", "Shell Variables"); the loader ones from ld.so(8).
#: ``ENV`` stays allowed: POSIX shells read it only when interactive, and it is a common
#: application setting (``ENV=production``).
_READ_ONLY = "is read-only in bash: assigning it fails and stops the job"
RESERVED_ENV_REASONS: dict[str, str] = {
    "BASHOPTS": _READ_ONLY, "BASH_VERSINFO": _READ_ONLY, "EUID": _READ_ONLY, "PPID": _READ_ONLY,
    "SHELLOPTS": _READ_ONLY, "UID": _READ_ONLY,
    "IFS": "splits every unquoted expansion in the job's shell",
    "PS4": "is expanded (command substitutions included) on every traced line",
    "BASH_ENV": "names a file every non-interactive bash the job starts runs first",
    "BASH_XTRACEFD": "redirects the shell's trace output",
    "CDPATH": "changes where `cd` goes",
    "GLOBIGNORE": "changes what file patterns match",
    "SHELL": "is the shell tools start for commands",
    "PATH": "decides which programs run; a literal value hides the system's and the modules' commands "
            "(extend it in `setup:`: export PATH=\"$HOME/bin:$PATH\")",
    "HOME": "is the home directory `~` means",
    "PWD": "is kept by the shell", "OLDPWD": "is kept by the shell",
    "LD_PRELOAD": "makes the dynamic loader load a library into every program",
    "LD_AUDIT": "makes the dynamic loader load a library into every program",
    "LD_LIBRARY_PATH": "is set by modules for the libraries programs load (extend it in `setup:`)",
}
RESERVED_ENV_NAMES: frozenset[str] = frozenset(RESERVED_ENV_REASONS)
#: Prefix of the variables hpcjobs sets in every job (job name, site, sweep, point, run folder).
RESERVED_ENV_PREFIX = "HPCJOBS_"


def _name(value: str) -> str:
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"names are at most {MAX_NAME_LENGTH} characters (this one has {len(value)})")
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits and _ . + - @ (starting with a letter or digit)"
        )
    return value


def _env_name(value: str) -> str:
    if not _ENV_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def reserved_env_reason(name: str) -> str | None:
    """Why the job may not set ``name`` (``None`` when it may)."""
    if name in RESERVED_ENV_REASONS:
        return f"{name} cannot be set here: it {RESERVED_ENV_REASONS[name]}"
    if name.startswith(RESERVED_ENV_PREFIX):
        return f"{name}: variables starting with {RESERVED_ENV_PREFIX} are set by hpcjobs"
    return None


def _export_name(value: str) -> str:
    _env_name(value)
    reason = reserved_env_reason(value)
    if reason:
        raise ValueError(reason)
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
Name = Annotated[str, AfterValidator(_name), WithJsonSchema(
    {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.+@-]*$", "maxLength": MAX_NAME_LENGTH})]
#: An environment variable name.
EnvName = Annotated[str, AfterValidator(_env_name), WithJsonSchema(
    {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"})]
#: A variable the job exports: an environment variable name that is not reserved (:data:`RESERVED_ENV_NAMES`).
ExportName = Annotated[str, AfterValidator(_export_name), WithJsonSchema(
    {"type": "string", "pattern": f"^(?!{RESERVED_ENV_PREFIX})[A-Za-z_][A-Za-z0-9_]*$",
     "not": {"enum": sorted(RESERVED_ENV_REASONS)}})]
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
