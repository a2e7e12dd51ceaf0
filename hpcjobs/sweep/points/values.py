"""Small truths about sweep values: grid lists without repeats, and numbers as the YAML wrote them.

**Repeats.** A value listed twice in a ``grid`` list (native grid, W&B grid ``values`` or a
command-line ``seed=1,2,1``) would give the same points twice; they used to be dropped silently
(a 250-point sweep became 240). It is an error naming the file and line of the repeat. To run
the same values several times, sweep a parameter for it (``replicate: [0, 1, 2]``): each
replicate is then its own point, with its own id and run folder.

**Spelling.** A float reaches the job as the experiment file (or command line) wrote it:
``lr: 0.00005`` exports ``lr=0.00005``, not Python's ``5e-05``. The text is taken from the source
at the position the YAML parser recorded and kept only when it reads back as the same number;
values drawn at random (or computed, like ``range()`` steps) use ``repr``. The command line's
spellings are read by :func:`hpcjobs.sweep.points.overrides.override_spellings`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hpcjobs.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from hpcjobs.config.yamlio import YamlDocument

_NUMBER = r"[-+]?(?:\.?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?)"
#: A number as YAML or a command line may spell it (``0.00005``, ``1e-4``, ``1_000.5``).
NUMBER_RE = re.compile(_NUMBER)


def _value_key(value: Any) -> str:
    """Identity of a value as a point sees it (type and value: ``1`` and ``1.0`` differ, as in point ids)."""
    return f"{type(value).__name__}:{json.dumps(value, sort_keys=True)}"


def check_no_repeats(values: Sequence[Any], key: str) -> None:
    """Refuse a grid list that names a value twice.

    Args:
        values: The list.
        key: Its dotted key path (``sweep.grid.seed``), or an ``override '...'`` label; the item's
            index is appended for a key path, so the problem is located at the repeat's line.

    Raises:
        ConfigError: The first repeated value, with both positions.
    """
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        k = _value_key(v)
        if k in seen:
            located = f"{key}.{i}" if key.startswith("sweep") else key
            raise ConfigError(ConfigProblem(
                f"{json.dumps(v)} is listed twice (items {seen[k]} and {i}), so its points would repeat; remove one, "
                "or to run the same values several times add a parameter such as `replicate: [0, 1, 2]`",
                key=located))
        seen[k] = i


def _data_at(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def source_spellings(doc: YamlDocument | None, text: str | None) -> dict[float, str]:
    """Float values of the ``sweep:`` section → their text in the source, where it differs from ``repr``.

    Only spellings that read back as exactly the same float are kept.
    """
    if doc is None or not text:
        return {}
    lines = text.splitlines()
    out: dict[float, str] = {}
    for path, (line, col) in doc.positions.items():
        if not path or path[0] != "sweep" or path in doc.overridden:
            continue
        value = _data_at(doc.data, path)
        if not isinstance(value, float) or value in out or not 0 < line <= len(lines):
            continue
        rest = lines[line - 1][col - 1:]
        if isinstance(path[-1], str):  # a mapping key: the value follows `key:`
            m = re.match(r"""(?:"[^"]*"|'[^']*'|[^:\s]+)\s*:\s+(""" + _NUMBER + r")(?=\s|[,}\]#]|$)", rest)
        else:  # a sequence item: the value is at the position
            m = re.match(r"(" + _NUMBER + r")(?=\s|[,}\]#]|$)", rest)
        if m and reads_as(m.group(1), value):
            out[value] = m.group(1)
    return out


def reads_as(text: str, value: float) -> bool:
    """Whether ``text`` reads as the float ``value`` and is spelled otherwise than ``repr(value)``."""
    try:
        return float(text.replace("_", "")) == value and text != repr(value)
    except ValueError:
        return False


def spelled_params(params: Mapping[str, Any], spellings: Mapping[float, str]) -> tuple[tuple[str, str], ...]:
    """``(name, text)`` for each float parameter whose source spelling differs from ``repr``."""
    if not spellings:
        return ()
    return tuple((k, spellings[v]) for k, v in params.items() if v.__class__ is float and v in spellings)


__all__ = ["NUMBER_RE", "check_no_repeats", "reads_as", "source_spellings", "spelled_params"]
