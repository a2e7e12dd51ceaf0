"""Expand a sweep into its points, each with a stable id, and write a point's environment file.

:func:`expand` is deterministic: the same spec and overrides give the same points, in the same
order, with the same ids, on any machine (random parts draw from ``random.Random(seed)``). That
is what lets a killed ``hpcjobs sweep`` be re-run and find its ledger still matching.

Order: the parts of a sweep combine like nested for-loops (the first part is the outermost loop),
then the command-line overrides (innermost). A value listed twice in one grid list is an error
(:mod:`hpcjobs.sweep.points.values`); points that still come out identical (same parameters, same types,
e.g. from two ``union`` items) are kept once, at their first position; ``Point.index`` numbers the
survivors 0..N-1.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcjobs.config.sweep import (
    RandomParam,
    SweepSpec,
    WandbParam,
    check_param_name,
    check_value,
    env_names,
)
from hpcjobs.config.sweep_size import range_count
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.shellvalue import UnencodableValueError, shell_word
from hpcjobs.sweep.points.values import check_no_repeats
from hpcjobs.units import is_ascii_digits

if TYPE_CHECKING:
    from hpcjobs.config.yamlio import YamlDocument

Params = dict[str, Any]

#: Length of a point id (hex digits of the SHA-256 of the canonical parameters).
POINT_ID_LENGTH = 12


@dataclass(frozen=True, slots=True)
class Point:
    """One point of an expanded sweep.

    Attributes:
        index: Position in the expanded sweep, 0..N-1 (after duplicates are dropped).
        point_id: Stable id: the first 12 hex digits of the SHA-256 of ``params_json``. Identical
            parameters (names, values and types: ``1`` and ``1.0`` differ) give identical ids.
        params: Parameter name → value, in the order the sweep defines them. Treat as read-only.
        params_json: The canonical JSON of ``params``: sorted keys, no spaces, floats in ``repr``
            form, non-ASCII kept (what the id hashes, what the ledger stores).
        spelled: ``(name, text)`` of float parameters whose source text (``0.00005``) differs from
            ``repr`` (``5e-05``): the job gets the text (:mod:`hpcjobs.sweep.points.values`).
    """

    index: int
    point_id: str
    params: Params
    params_json: str
    spelled: tuple[tuple[str, str], ...] = ()


def canonical_json(params: Mapping[str, Any]) -> str:
    """The canonical JSON text of a point's parameters (sorted keys, compact, floats as ``repr``)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _CanonicalEncoder:
    """:func:`canonical_json` for many points at once, caching the text of keys and of repeated text values.

    Gives exactly ``canonical_json(params)``: ``json`` writes ints with ``int.__repr__`` and finite
    floats with ``float.__repr__``; only text values need real encoding (and are cached).
    """

    def __init__(self) -> None:
        self._enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        self._text: dict[str, str] = {}
        self._plans: dict[tuple[str, ...], list[tuple[str, str]]] = {}

    def __call__(self, params: Mapping[str, Any]) -> str:
        names = tuple(params)
        plan = self._plans.get(names)
        if plan is None:
            ordered = sorted(names)
            plan = self._plans[names] = [(k, ("{" if i == 0 else ",") + self._enc(k) + ":")
                                         for i, k in enumerate(ordered)]
        if not plan:
            return "{}"
        parts = []
        text = self._text
        for k, prefix in plan:
            v = params[k]
            cls = v.__class__
            if cls is str:
                t = text.get(v)
                if t is None:
                    t = text[v] = self._enc(v)
            elif cls is float:
                t = float.__repr__(v)
            elif cls is int:
                t = int.__repr__(v)
            elif cls is bool:
                t = "true" if v else "false"
            elif v is None:
                t = "null"
            else:
                t = self._enc(v)
            parts.append(prefix + t)
        parts.append("}")
        return "".join(parts)


def point_id(params: Mapping[str, Any]) -> str:
    """The stable id of a point with these parameters (see :class:`Point`)."""
    return hashlib.sha256(canonical_json(params).encode("utf-8")).hexdigest()[:POINT_ID_LENGTH]


# ------------------------------------------------------------------------------ Hydra-style overrides

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


# ------------------------------------------------------------------------------------------- sampling

def _quantize(x: float, q: float) -> float | int:
    r = round(x / q) * q
    return int(r) if isinstance(q, int) else r


def _num(value: float | None, default: float = 0.0) -> float:
    """A bound the model validated as present (``default`` only for W&B's optional mu/sigma/q)."""
    return default if value is None else value


def _uniform_int(lo: int, hi: int) -> Callable[[random.Random], int]:
    span = hi - lo + 1
    return lambda rng: lo + min(int(rng.random() * span), span - 1)


def _pick(values: Sequence[Any]) -> Callable[[random.Random], Any]:
    n = len(values)
    return lambda rng: values[min(int(rng.random() * n), n - 1)]


def _native_sampler(p: RandomParam) -> Callable[[random.Random], Any]:
    """A draw for one native random parameter.

    Every draw is built on ``Random.random()`` alone (plus ``normalvariate``, itself built on it),
    whose sequence for a seed has not changed across Python versions, so a sweep expands to the
    same points wherever it is resumed.
    """
    lo, hi = _num(p.min), _num(p.max)
    if p.distribution == "uniform":
        width = hi - lo
        return lambda rng: lo + width * rng.random()
    if p.distribution == "log_uniform":
        a, b = math.log(lo), math.log(hi)
        return lambda rng: math.exp(a + (b - a) * rng.random())
    if p.distribution == "int_uniform":
        return _uniform_int(int(lo), int(hi))
    if p.distribution == "choice":
        return _pick(list(p.values or []))
    mu, sigma = _num(p.mu), _num(p.sigma, 1.0)
    return lambda rng: rng.normalvariate(mu, sigma)


def _wandb_sampler(p: WandbParam) -> Callable[[random.Random], Any]:
    """A draw following W&B's documented distributions (sweep configuration reference)."""
    kind = p.kind()
    lo, hi = _num(p.min), _num(p.max)
    q: float = p.q if p.q is not None else 1
    mu, sigma = _num(p.mu), _num(p.sigma, 1.0)
    if kind == "constant":
        value = p.value
        return lambda rng: value
    if kind == "categorical":
        values = list(p.values or [])
        if p.probabilities is not None:
            weights = list(p.probabilities)
            return lambda rng: rng.choices(values, weights=weights)[0]
        return _pick(values)
    if kind == "int_uniform":
        return _uniform_int(int(lo), int(hi))
    if kind == "uniform":
        return lambda rng: rng.uniform(lo, hi)
    if kind == "q_uniform":
        return lambda rng: _quantize(rng.uniform(lo, hi), q)
    if kind in ("log_uniform", "q_log_uniform"):  # min/max are exponents
        if kind == "q_log_uniform":
            return lambda rng: _quantize(math.exp(rng.uniform(lo, hi)), q)
        return lambda rng: math.exp(rng.uniform(lo, hi))
    if kind in ("log_uniform_values", "q_log_uniform_values"):
        a, b = math.log(lo), math.log(hi)
        if kind[0] == "q":
            return lambda rng: _quantize(math.exp(rng.uniform(a, b)), q)
        return lambda rng: math.exp(rng.uniform(a, b))
    if kind == "inv_log_uniform":  # log(1/X) uniform in [min, max]
        return lambda rng: math.exp(-rng.uniform(lo, hi))
    if kind == "inv_log_uniform_values":  # log(1/X) uniform in [log(1/max), log(1/min)]
        a, b = math.log(1 / hi), math.log(1 / lo)
        return lambda rng: math.exp(-rng.uniform(a, b))
    if kind == "normal":
        return lambda rng: rng.normalvariate(mu, sigma)
    if kind == "q_normal":
        return lambda rng: _quantize(rng.normalvariate(mu, sigma), q)
    if kind == "log_normal":
        return lambda rng: math.exp(rng.normalvariate(mu, sigma))
    return lambda rng: _quantize(math.exp(rng.normalvariate(mu, sigma)), q)  # q_log_normal


def _wandb_grid_values(p: WandbParam) -> list[Any]:
    kind = p.kind()
    if kind == "constant":
        return [p.value]
    if kind == "categorical":
        return list(p.values or [])
    if kind == "int_uniform":
        return list(range(int(_num(p.min)), int(_num(p.max)) + 1))
    q: float = p.q if p.q is not None else 1  # q_uniform: W&B enumerates arange(min, max, q), max excluded
    lo, hi = _num(p.min), _num(p.max)
    return [lo + i * q for i in range(range_count(lo, hi, q))]


# ------------------------------------------------------------------------------------------ expansion

def _located(exc: ConfigError, doc: YamlDocument | None) -> ConfigError:
    """``exc`` with its ``sweep...`` problems placed at their file:line in ``doc`` (others as they are)."""
    if doc is None:
        return exc
    problems = []
    for p in exc.problems:
        if p.file is None and p.key and (p.key == "sweep" or p.key.startswith("sweep.")):
            path = tuple(int(x) if is_ascii_digits(x) else x for x in p.key.split("."))
            placed = doc.problem(path, p.message, expected=p.expected, choices=p.choices)
            placed.key = p.key
            problems.append(placed)
        else:
            problems.append(p)
    return ConfigError(problems)


def expand(spec: SweepSpec | None, overrides: Sequence[str] | Mapping[str, Sequence[Any]] = (), *,
           doc: YamlDocument | None = None, source_text: str | None = None) -> list[Point]:
    """Expand a sweep (and command-line overrides) into its points, in a deterministic order.

    The number of points of the product is computed from the spec first and checked against the
    limit (see :mod:`hpcjobs.config.sweep_size`): nothing is built for a sweep over it.

    Args:
        spec: The validated ``sweep:`` section; ``None`` or empty gives one point without parameters.
        overrides: Hydra-style ``KEY=V1,V2`` strings (see :func:`parse_overrides`) or an already
            parsed grid. They combine with the sweep as a product (innermost loop); a name the
            sweep also defines takes the override's values instead. The top-level ``exclude`` and
            ``filter`` apply after the overrides.
        doc: The experiment document the spec came from: problems found while expanding name its
            file and the line of the ``sweep:`` key concerned (else they have no location).
        source_text: The text ``doc`` was parsed from: floats keep their spelling in the job's
            environment (:func:`hpcjobs.sweep.points.values.source_spellings`).

    Returns:
        The points, duplicates dropped (first occurrence kept), indexed 0..N-1.

    Raises:
        ConfigError: Bad overrides, a value listed twice in a grid list (located), a product over
            the points limit, ``exclude``/``filter`` naming an
            unknown parameter, a filter that fails on a point, or parameter names that collide as
            environment variables.
    """
    from hpcjobs.sweep.points.stream import sweep_points

    return list(sweep_points(spec, overrides, doc=doc, source_text=source_text))


# -------------------------------------------------------------------------------------- environment file

def env_value(value: Any) -> str:
    """A parameter value as environment text: ``true``/``false``, empty for null, ``repr`` for floats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def point_env_lines(point: Point) -> list[str]:
    """The ``export NAME=VALUE`` lines of a point, each one line of printable ASCII.

    One line per parameter (``NAME`` from :func:`env_name`, ``VALUE`` encoded by
    :func:`hpcjobs.render.shellvalue.shell_word`, so any text, ``$(...)``, backticks, quotes,
    ``#`` and every line-breaking character included, arrives as exactly its UTF-8 bytes), then
    ``HPCJOBS_POINT_ID``, ``HPCJOBS_POINT_INDEX`` and ``HPCJOBS_PARAMS_JSON`` (the canonical
    JSON of all parameters). A line never contains a line break, so callers may join, indent or
    split them freely.

    Raises:
        ConfigError: Parameter names that cannot be exported or that collide, or a value holding
            NUL (refused earlier by :func:`hpcjobs.config.sweep.check_value`; this is the last guard).
    """
    names = env_names(point.params)
    spelled = dict(point.spelled)
    try:
        lines = [f"export {names[k]}={shell_word(spelled.get(k) or env_value(v))}" for k, v in point.params.items()]
        lines.append(f"export HPCJOBS_POINT_ID={shell_word(point.point_id)}")
        lines.append(f"export HPCJOBS_POINT_INDEX={point.index}")
        lines.append(f"export HPCJOBS_PARAMS_JSON={shell_word(point.params_json)}")
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None
    return lines


def point_env_file_text(point: Point) -> str:
    """The text of a bash file that exports a point's parameters (the array task ``source`` s it).

    A comment line, then :func:`point_env_lines`.

    Raises:
        ConfigError: As :func:`point_env_lines`.
    """
    lines = [f"# hpcjobs sweep point {point.point_id} (index {point.index})", *point_env_lines(point)]
    return "\n".join(lines) + "\n"


def iter_env_files(points: Iterable[Point]) -> Iterable[tuple[Point, str]]:
    """``(point, point_env_file_text(point))`` for each point (a convenience for writers)."""
    for p in points:
        yield p, point_env_file_text(p)
