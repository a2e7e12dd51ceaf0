"""Hydra-style sweep overrides from the command line (``lr=0.1,0.01 seed=range(3)``) read into a grid.

:func:`parse_overrides` turns the arguments into ``{name: [values]}`` (each value read as a YAML
scalar, ``range()`` and ``choice()`` understood); :func:`override_spellings` keeps the text of
the floats as typed, so the job gets ``0.00005`` rather than ``5e-05``
(:mod:`hpcjobs.sweep.points.values`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hpcjobs.config.sweep import check_param_name, check_value
from hpcjobs.config.sweep_size import range_count
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.sweep.points.values import NUMBER_RE, check_no_repeats, reads_as

_SWEEP_FN_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.S)
_MAX_RANGE = 1_000_000


def _split_unquoted(text: str, what: str) -> list[str]:
    """Split on commas outside quotes and brackets; quotes stay on the pieces."""
    parts, buf, quote, depth, i = [], [], "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                buf.append(text[i:i + 2])
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(buf))
            buf = []
            i += 1
            continue
        buf.append(c)
        i += 1
    if quote:
        raise ConfigError(ConfigProblem(f"unterminated {quote} quote", key=what))
    parts.append("".join(buf))
    return parts


def _scalar(piece: str, what: str) -> Any:
    """One override value: quoted → text, else read as a YAML scalar (``0.1``, ``true``, ``null``, ``adam``).

    Text arrives exactly as typed (only spaces and tabs around it are dropped): a value that
    YAML reads as text keeps its own spelling, and one holding ``#`` or a character that is not
    printable (line breaks, form feed, other controls) is taken as text without YAML, which would
    fold its lines, drop a ``# comment`` or refuse the character.
    """
    from hpcjobs.config.yamlio import parse_yaml

    s = piece.strip(" \t")
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        value: Any = re.sub(r"\\(.)", r"\1", s[1:-1], flags=re.S)
    elif s == "" or "#" in s or not s.isprintable():
        value = s
    else:
        try:
            value = parse_yaml(s, what).data
        except ConfigError as exc:
            raise ConfigError(ConfigProblem(f"cannot read value {s!r}: {exc.problems[0].message}", key=what)) from None
        if isinstance(value, (dict, list)):
            raise ConfigError(ConfigProblem(
                f"value {s!r} is not a scalar: sweep values are text, numbers, booleans or null "
                "(quote it to pass it as text)", key=what))
        if isinstance(value, str):
            value = s
    try:
        return check_value(value)
    except ValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key=what)) from None


def _range_values(args: list[Any], what: str) -> list[Any]:
    if not 1 <= len(args) <= 3 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
        raise ConfigError(ConfigProblem("range() takes 1 to 3 numbers: range([start,] stop[, step])", key=what))
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    try:
        count = range_count(start, stop, step)  # arithmetic: nothing is built before the count is known
    except ValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key=what)) from None
    if count > _MAX_RANGE:
        shown = f"{count:,}" if count < 10**30 else f"about 10^{len(str(count)) - 1}"
        raise ConfigError(ConfigProblem(f"range() gives {shown} values, more than the {_MAX_RANGE:,} allowed",
                                        key=what))
    if all(isinstance(a, int) for a in (start, stop, step)):
        return list(range(start, stop, step))
    return [start + i * step for i in range(count)]


def parse_overrides(args: Sequence[str]) -> dict[str, list[Any]]:
    """Read Hydra-style sweep overrides from the command line into a grid.

    ``["lr=0.1,0.01", "model.depth=2,4", "opt=adam"]`` → ``{"lr": [0.1, 0.01], "model.depth": [2, 4],
    "opt": ["adam"]}``. A value list splits on commas outside quotes; each item is read as a YAML
    scalar (``'0.1'`` in quotes stays text). ``range(start, stop[, step])`` (stop excluded, floats
    allowed) and ``choice(a, b, ...)`` are understood; a leading ``+``/``++`` on the key is ignored.
    The grid combines with the file's sweep as a product; a name the file's sweep also defines is
    replaced by the override's values (see :func:`hpcjobs.sweep.points.expand.expand`).

    Raises:
        ConfigError: A malformed override (no ``=``, bad name, a list value, ``~key`` deletion,
            an unsupported sweep function), or the same key twice.
    """
    grid: dict[str, list[Any]] = {}
    for arg in args:
        key, sep, raw = arg.partition("=")
        what = f"override {arg!r}"
        key = key.strip().lstrip("+")
        if not sep:
            raise ConfigError(ConfigProblem("expected KEY=VALUE[,VALUE...]", key=what))
        if key.startswith("~"):
            raise ConfigError(ConfigProblem("deleting a key (~key) is not supported in a sweep", key=what))
        try:
            check_param_name(key)
        except ValueError as exc:
            raise ConfigError(ConfigProblem(str(exc), key=what)) from None
        if key in grid:
            raise ConfigError(ConfigProblem(f"{key!r} is given twice", key=what))
        m = _SWEEP_FN_RE.match(raw)
        if m and m[1] in ("range", "choice"):
            items = [_scalar(p, what) for p in _split_unquoted(m[2], what)]
            values = _range_values(items, what) if m[1] == "range" else items
        elif m and m[1] in ("interval", "glob", "shuffle", "sort", "tag", "int", "float", "str", "bool"):
            raise ConfigError(ConfigProblem(f"Hydra's {m[1]}() is not supported; use a,b,c, range() or choice()",
                                            key=what))
        else:
            values = [_scalar(p, what) for p in _split_unquoted(raw, what)]
        if not values:
            raise ConfigError(ConfigProblem("the override gives no values", key=what))
        check_no_repeats(values, what)
        grid[key] = values
    return grid


def override_spellings(args: Sequence[str]) -> dict[float, str]:
    """Float values of command-line sweep arguments (``lr=0.00005,1e-4``) → their text as typed."""
    out: dict[float, str] = {}
    for arg in args:
        _key, sep, raw = arg.partition("=")
        if not sep or re.match(r"^\s*[A-Za-z_]\w*\s*\(", raw):
            continue
        try:
            pieces = _split_unquoted(raw, arg)
        except ConfigError:
            continue
        for piece in pieces:
            s = piece.strip(" \t")
            if not NUMBER_RE.fullmatch(s):
                continue
            try:
                value = _scalar(piece, arg)
            except ConfigError:
                continue
            if isinstance(value, float) and reads_as(s, value):
                out.setdefault(value, s)
    return out
