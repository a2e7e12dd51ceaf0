"""A sweep's points expanded on demand: streamed in order, never all held at once unless asked.

:class:`SweepPoints` is what :func:`hpcjobs.sweep.prepare.prepare_sweep` keeps of a sweep: the spec,
the command-line grid and the float spellings, from which the points are produced again whenever
they are needed, in the same order with the same ids (:mod:`hpcjobs.sweep.points.expand` explains why the
expansion is deterministic). A million-point sweep is then never a million Python dicts in memory:
the ledger is filled from :meth:`SweepPoints.ledger_rows` and each chunk's ``.env`` file from
:meth:`SweepPoints.env_arms`, one point at a time.

Every check that needs no point (names, repeated grid values, the size limit, unknown names in
``exclude``/``filter``) is made when the object is built; a ``filter`` that fails on a point fails
when that point is reached (:meth:`SweepPoints.check` reaches them all).

A sweep that is only a grid (the file's ``grid:`` and the command-line grid, no name in both, no
``exclude``/``filter``) has no duplicate points (every grid list is free of repeats), so its count is
the product of the list lengths and its rows are built from per-value pieces of JSON and ``export``
lines, without a dict per point.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from hpcjobs.config.sweep import SweepSpec, env_names, flatten_wandb
from hpcjobs.config.sweep_filter import FilterError, compile_filter
from hpcjobs.config.sweep_size import check_sweep_size
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.shellvalue import UnencodableValueError, shell_word
from hpcjobs.sweep.points.overrides import override_spellings, parse_overrides
from hpcjobs.sweep.points.point import CanonicalEncoder, Point, env_value
from hpcjobs.sweep.points.sampling import guarded, native_sampler, wandb_grid_values, wandb_sampler
from hpcjobs.sweep.points.values import _value_key, check_no_repeats, source_spellings, spelled_params
from hpcjobs.units import is_ascii_digits

if TYPE_CHECKING:
    from hpcjobs.config.yamlio import YamlDocument

Params = dict[str, Any]
#: ``(index, point_id, params_json)``: what the ledger stores of a point.
LedgerRow = tuple[int, str, str]
_Factor = Callable[[], Iterable[Params]]

#: Cached ``export`` lines kept at most (a random search has no repeated values to reuse).
_LINE_CACHE_MAX = 100_000
#: Indexing a sweep of at most this many points keeps them all (repeated indexing is then cheap); a
#: larger one is read up to the point asked for each time.
_HOLD_MAX = 100_000


# ------------------------------------------------------------------------------------------ the plan

def _match_key(value: Any) -> tuple[str, Any]:
    """Equality that keeps booleans apart from numbers (``True`` is not ``1``) but ``4 == 4.0``."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    return ("s", value) if isinstance(value, str) else ("z", None)


def _excluder(rules: list[dict[str, Any]], known: set[str], where: str = "sweep") -> Callable[[Params], bool] | None:
    compiled: list[list[tuple[str, set[tuple[str, Any]]]]] = []
    for i, rule in enumerate(rules):
        for name in rule:
            if name not in known:
                raise ConfigError(ConfigProblem(
                    f"exclude rule {i} names {name!r}, which the sweep does not define "
                    f"(parameters: {', '.join(sorted(known)) or 'none'})", key=f"{where}.exclude.{i}"))
        compiled.append([(n, {_match_key(x) for x in (v if isinstance(v, list) else [v])}) for n, v in rule.items()])
    if not compiled:
        return None

    def excluded(p: Params) -> bool:
        return any(all(n in p and _match_key(p[n]) in allowed for n, allowed in rule) for rule in compiled)
    return excluded


def _draws(samplers: Mapping[str, Callable[[random.Random], Any]], seed: int, samples: int) -> _Factor:
    """Random draws, the same sequence on every iteration (a fresh ``Random(seed)`` each time)."""
    def draw() -> Iterator[Params]:
        rng = random.Random(seed)
        items = list(samplers.items())
        for _ in range(samples):
            yield {name: fn(rng) for name, fn in items}
    return draw


def _dims(lists: Mapping[str, Sequence[Any]], cap: int | None = None) -> _Factor:
    names = list(lists)

    def grid() -> Iterator[Params]:
        combos = itertools.product(*lists.values())
        for combo in (itertools.islice(combos, cap) if cap else combos):
            yield dict(zip(names, combo, strict=True))
    return grid


def _wandb_key(where: str, name: str) -> str:
    """The key path of a W&B parameter: ``optimizer.lr`` is ``<where>.parameters.optimizer.parameters.lr``."""
    return f"{where}.parameters." + ".parameters.".join(name.split("."))


def _has_repeats(values: Sequence[Any]) -> bool:
    return len({_value_key(v) for v in values}) != len(values)


class _Plan:
    """The parameters of one (sub-)sweep: checked when built, produced lazily on each iteration."""

    def __init__(self, spec: SweepSpec, overrides: Mapping[str, Sequence[Any]] | None, where: str = "sweep") -> None:
        #: Each factor of the product: grid dimensions one by one (so that no factor is itself a product).
        self.factors: list[list[Params] | _Factor] = []
        #: ``(name, values)`` per factor while every factor is a grid dimension (else ``None``).
        self.dims: list[tuple[str, Sequence[Any]]] | None = []
        self.grid_lists: dict[str, Sequence[Any]] | None = None
        if spec.is_wandb:
            flat = flatten_wandb(spec.parameters or {})
            if spec.method == "grid":
                for n, p in flat.items():
                    if p.values is not None:
                        check_no_repeats(p.values, f"{where}.parameters.{n}.values")
                self.factors.append(_dims({n: wandb_grid_values(p) for n, p in flat.items()}, spec.run_cap or None))
                self.dims = None
            else:
                self.dims = None
                count = spec.samples if spec.samples is not None else spec.run_cap
                self.factors.append(_draws({n: guarded(wandb_sampler(p), name=n, key=_wandb_key(where, n))
                                            for n, p in flat.items()}, spec.seed or 0, count or 0))
        else:
            if spec.grid:
                for n, values in spec.grid.items():
                    check_no_repeats(values, f"{where}.grid.{n}")
                    self.factors.append([{n: v} for v in values])
                    self.dims.append((n, values))
            if spec.zip or spec.points or spec.random or spec.union:
                self.dims = None
            for group in spec.zip or []:
                names = list(group)
                self.factors.append([dict(zip(names, row, strict=True)) for row in zip(*group.values(), strict=True)])
            if spec.points:
                self.factors.append([dict(p) for p in spec.points])
            if spec.random:
                self.factors.append(_draws({n: guarded(native_sampler(p), name=n, key=f"{where}.random.parameters.{n}")
                                            for n, p in spec.random.parameters.items()},
                                           spec.random.seed, spec.random.samples))
            if spec.union:
                subs = [_Plan(sub, None, f"{where}.union.{i}") for i, sub in enumerate(spec.union)]
                self.factors.append(lambda: itertools.chain.from_iterable(subs))
        known = set(spec.param_names())
        if overrides:
            self.factors.extend([{n: v} for v in values] for n, values in overrides.items())
            if self.dims is not None:
                self.dims.extend(overrides.items())
            known |= set(overrides)
        self.excluded = _excluder(spec.exclude, known, where)
        self.flt = None
        if spec.filter:
            self.flt = compile_filter(spec.filter)
            unknown = sorted(self.flt.names - known)
            if unknown:
                raise ConfigError(ConfigProblem(
                    f"filter names {', '.join(map(repr, unknown))}, which the sweep does not define "
                    f"(parameters: {', '.join(sorted(known)) or 'none'})", key=f"{where}.filter"))
        self.where = where
        grid_names = list((spec.grid or {}) if not spec.is_wandb else {})
        plain = (not spec.is_wandb and not spec.zip and not spec.points and not spec.random and not spec.union
                 and not spec.exclude and not spec.filter)
        repeats = any(_has_repeats(values) for values in (overrides or {}).values())  # a parsed grid is checked
        if plain and not repeats and not set(grid_names) & set(overrides or {}):  # only grid lists, each name once
            self.grid_lists = {**(spec.grid or {}), **(overrides or {})}

    def _product(self) -> Iterator[Params]:
        factors = self.factors
        if not factors:
            yield {}
            return
        if len(factors) == 1:
            only = factors[0]
            for p in (only if isinstance(only, list) else only()):
                yield dict(p)
            return
        if self.dims is not None:  # grid dimensions only: a name each (a repeated name keeps its place, last value)
            names = [n for n, _ in self.dims]
            for combo in itertools.product(*(values for _, values in self.dims)):
                yield dict(zip(names, combo, strict=True))
            return
        lists = [f if isinstance(f, list) else list(f()) for f in factors]
        for combo in itertools.product(*lists):
            merged: Params = {}
            for part in combo:
                merged.update(part)
            yield merged

    def __iter__(self) -> Iterator[Params]:
        excluded, flt = self.excluded, self.flt
        for p in self._product():
            if excluded is not None and excluded(p):
                continue
            if flt is not None:
                try:
                    if not flt(p):
                        continue
                except FilterError as exc:
                    raise ConfigError(ConfigProblem(str(exc), key=f"{self.where}.filter")) from None
            yield p


# ------------------------------------------------------------------------------------------ the points

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


class SweepPoints(Sequence["Point"]):
    """The points of a sweep, produced on demand in their deterministic order.

    Iterating yields :class:`hpcjobs.sweep.points.point.Point` objects (duplicates dropped, indices
    0..N-1), exactly what :func:`hpcjobs.sweep.points.expand.expand` returns. Indexing or slicing a sweep of
    up to :data:`_HOLD_MAX` points builds and keeps the whole list once; a larger one is read up to
    the points asked for (``points[:20]`` of a million-point sweep reads 20).

    Args:
        spec: The validated ``sweep:`` section (``None``: one point without parameters).
        grid: The parsed command-line grid (:func:`hpcjobs.sweep.points.overrides.parse_overrides`).
        spellings: Float value → its source text (:mod:`hpcjobs.sweep.points.values`).
        doc: The experiment document, to place problems at their file:line.

    Raises:
        ConfigError: Everything that can be refused without building a point (names, repeated
            grid values, the size limit, unknown names in ``exclude``/``filter``), located.
    """

    def __init__(self, spec: SweepSpec | None, grid: Mapping[str, Sequence[Any]] | None = None, *,
                 spellings: Mapping[float, str] | None = None, doc: YamlDocument | None = None) -> None:
        self.spec = spec or SweepSpec()
        self.grid = dict(grid or {})
        self.spellings = dict(spellings or {})
        self.doc = doc
        try:
            self.names = list(dict.fromkeys([*self.spec.param_names(), *self.grid]))
            self.env = env_names(self.names)
            check_sweep_size(self.spec, self.grid or None)  # before a single point is built
            self._plan = _Plan(self.spec, self.grid or None)
        except ConfigError as exc:
            raise _located(exc, doc) from None
        self._count: int | None = None
        self._digest: str | None = None
        self._list: tuple[Point, ...] | None = None
        if self._plan.grid_lists is not None:
            n = 1
            for values in self._plan.grid_lists.values():
                n *= len(values)
            self._count = n

    # ------------------------------------------------------------------------------- Sequence

    def __len__(self) -> int:
        if self._count is None:
            self.check()
        assert self._count is not None
        return self._count

    @overload
    def __getitem__(self, i: int) -> Point: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Point]: ...

    def __getitem__(self, i: int | slice) -> Point | Sequence[Point]:
        if self._list is None and len(self) <= _HOLD_MAX:
            self._list = tuple(self)
        if self._list is not None:
            return self._list[i]
        n = len(self)  # a large sweep: read up to the point(s) asked for, keep nothing
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            return tuple(itertools.islice(iter(self), start, max(start, stop), step)) if step > 0 else tuple(
                self[j] for j in range(start, stop, step))
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("sweep point index out of range")
        return next(itertools.islice(iter(self), j, None))

    def __iter__(self) -> Iterator[Point]:
        if self._list is not None:
            yield from self._list
            return
        spellings = self.spellings
        for index, pid, params, text in self._unique():
            yield Point(index, pid, params, text, spelled_params(params, spellings))

    def __repr__(self) -> str:
        return f"SweepPoints({self._count if self._count is not None else '?'} points)"

    # ------------------------------------------------------------------------------- streams

    @property
    def is_plain_grid(self) -> bool:
        """Only grid lists (file and command line, each name once): no duplicates, no filter."""
        return self._plan.grid_lists is not None

    def _unique(self) -> Iterator[tuple[int, str, Params, str]]:
        """``(index, point_id, params, params_json)`` of every point, duplicates dropped, ids checked."""
        to_json = CanonicalEncoder()
        sha256 = hashlib.sha256
        seen: dict[int, int] = {}  # first 48 bits of the hash (the id) -> the next 64: a duplicate has both
        index = 0
        try:
            for params in self._plan:
                text = to_json(params)
                h = sha256(text.encode("utf-8")).digest()
                key, rest = int.from_bytes(h[:6], "big"), int.from_bytes(h[6:14], "big")
                other = seen.get(key)
                if other is not None:
                    if other != rest:  # a 48-bit collision between different parameters: never silently merge
                        raise ConfigError(ConfigProblem(
                            f"point id collision: {h[:6].hex()} is the id of {text} and of an earlier point",
                            key="sweep"))
                    continue
                seen[key] = rest
                yield index, h[:6].hex(), params, text
                index += 1
        except ConfigError as exc:
            raise _located(exc, self.doc) from None
        self._count = index

    def check(self) -> int:
        """Go through every point once (a ``filter`` that fails on one fails here); return the count."""
        if self._count is not None and (self.is_plain_grid or self._list is not None):
            return self._count
        digest = hashlib.sha256()
        n = 0
        for _, pid, _, _ in self._unique():
            digest.update(pid.encode("ascii"))
            n += 1
        self._count, self._digest = n, digest.hexdigest()
        return n

    def ledger_rows(self) -> Iterator[LedgerRow]:
        """``(index, point_id, params_json)`` of every point, in order (what the ledger stores).

        A plain grid's ids are not checked for 48-bit collisions here (the ledger's unique index
        refuses one); other sweeps are (:meth:`__iter__`'s rules).
        """
        if self._list is not None:
            return ((p.index, p.point_id, p.params_json) for p in self._list)
        if self.is_plain_grid:
            return self._grid_ledger_rows()
        return ((i, pid, text) for i, pid, _, text in self._unique())

    def digest(self) -> str:
        """SHA-256 of the point ids in order: equal digests mean the same points in the same order."""
        if self._digest is None:
            d = hashlib.sha256()
            for _, pid, _ in self.ledger_rows():
                d.update(pid.encode("ascii"))
            self._digest = d.hexdigest()
        return self._digest

    def _grid_pieces(self) -> tuple[list[list[str]], list[int]]:
        """Per grid list, the JSON piece of each value (``,"name":value``) and the order of names in the JSON."""
        assert self._plan.grid_lists is not None
        lists = self._plan.grid_lists
        names = list(lists)
        order = sorted(range(len(names)), key=lambda i: names[i])
        enc = CanonicalEncoder()
        pieces = []
        for i, (name, values) in enumerate(lists.items()):
            lead = "{" if order and order[0] == i else ","
            pieces.append([lead + enc({name: v})[1:-1] for v in values])
        return pieces, order

    def _grid_ledger_rows(self) -> Iterator[LedgerRow]:
        pieces, order = self._grid_pieces()
        sha256 = hashlib.sha256
        if not pieces:
            yield 0, sha256(b"{}").hexdigest()[:12], "{}"
            return
        pick = operator.itemgetter(*order) if len(order) > 1 else None
        for index, combo in enumerate(itertools.product(*pieces)):
            text = "".join(pick(combo) if pick else combo) + "}"
            yield index, sha256(text.encode("utf-8")).hexdigest()[:12], text

    # ------------------------------------------------------------------------------- env files

    def env_bodies(self, wanted: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """``(point_id, case arm body)`` of the points in ``wanted``, in expansion order.

        The body is :func:`hpcjobs.sweep.points.point.point_env_lines` of the point, each line indented by
        four spaces and ended by a newline (what :func:`hpcjobs.sweep.chunk_files.env_file_text`
        writes), built from cached per-value lines (a grid's values repeat across its points).

        Raises:
            ConfigError: A value that cannot reach a job (NUL).
        """
        if self._list is None and self.is_plain_grid:
            yield from self._grid_env_bodies(wanted)
            return
        lines = _LineCache(self.env)
        for p in (self._list if self._list is not None else self):
            if p.point_id in wanted:
                body = lines.point_lines(p.index, p.point_id, p.params, p.params_json, dict(p.spelled))
                yield p.point_id, "".join(f"    {ln}\n" for ln in body)

    def _grid_env_bodies(self, wanted: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        assert self._plan.grid_lists is not None
        lists = self._plan.grid_lists
        spellings = self.spellings
        try:
            exports = [["    " + _export(self.env[name], v, spellings.get(v) if v.__class__ is float else None) + "\n"
                        for v in values] for name, values in lists.items()]
        except UnencodableValueError as exc:
            raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None
        pieces, order = self._grid_pieces()
        pick = operator.itemgetter(*order) if len(order) > 1 else None
        sha256 = hashlib.sha256
        dims = [list(zip(p, e, strict=True)) for p, e in zip(pieces, exports, strict=True)]
        # JSON of printable ASCII without a quote is single-quoted as it is (what shell_word does with it)
        plain = all(_QUOTABLE.fullmatch(piece) for p in pieces for piece in p)
        for index, combo in enumerate(itertools.product(*dims)):
            parts = [c[0] for c in combo]
            text = ("".join(pick(parts) if pick else parts) + "}") if parts else "{}"
            pid = sha256(text.encode("utf-8")).hexdigest()[:12]
            if pid in wanted:
                word = f"'{text}'" if plain else _json_word(text)
                yield pid, (f"{''.join([c[1] for c in combo])}    export HPCJOBS_POINT_ID={pid}\n"
                            f"    export HPCJOBS_POINT_INDEX={index}\n    export HPCJOBS_PARAMS_JSON={word}\n")


#: Printable ASCII without ``'``: :func:`hpcjobs.render.shellvalue.shell_word` single-quotes such a text unchanged.
_QUOTABLE = re.compile(r"[ -&(-~]*")


def _json_word(text: str) -> str:
    try:
        return shell_word(text)
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None


def _export(env: str, value: Any, spelled: str | None) -> str:
    return f"export {env}={shell_word(spelled or env_value(value))}"


def _id_lines(index: int, pid: str, text: str) -> tuple[str, str, str]:
    try:
        word = shell_word(text)
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None
    return (f"export HPCJOBS_POINT_ID={shell_word(pid)}", f"export HPCJOBS_POINT_INDEX={index}",
            f"export HPCJOBS_PARAMS_JSON={word}")


class _LineCache:
    """``export`` lines of parameter values, cached by name, type and value (floats by their text)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.cache: dict[tuple[str, type, Any, str | None], str] = {}

    def point_lines(self, index: int, pid: str, params: Mapping[str, Any], text: str,
                    spelled: Mapping[str, str]) -> list[str]:
        out = []
        cache = self.cache
        for k, v in params.items():
            cls = v.__class__
            s = spelled.get(k)
            key = (k, cls, float.__repr__(v) if cls is float else v, s)
            line = cache.get(key)
            if line is None:
                env = self.env.get(k)
                if env is None:
                    self.env.update(env_names([*self.env, k]))
                    env = self.env[k]
                try:
                    line = _export(env, v, s)
                except UnencodableValueError as exc:
                    raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None
                if len(cache) >= _LINE_CACHE_MAX:
                    cache.clear()
                cache[key] = line
            out.append(line)
        out.extend(_id_lines(index, pid, text))
        return out


def sweep_points(spec: SweepSpec | None, overrides: Sequence[str] | Mapping[str, Sequence[Any]] = (), *,
                 doc: YamlDocument | None = None, source_text: str | None = None) -> SweepPoints:
    """The points of a sweep, to be streamed (:func:`hpcjobs.sweep.points.expand.expand` takes the same arguments).

    Raises:
        ConfigError: As :class:`SweepPoints`, and malformed overrides.
    """

    try:
        spellings = source_spellings(doc, source_text)
        grid: dict[str, Sequence[Any]] = {}
        if isinstance(overrides, Mapping):
            grid.update(overrides)
        elif overrides:
            spellings = {**override_spellings(overrides), **spellings}
            grid.update(parse_overrides(overrides))
    except ConfigError as exc:
        raise _located(exc, doc) from None
    return SweepPoints(spec, grid, spellings=spellings, doc=doc)


__all__ = ["LedgerRow", "SweepPoints", "sweep_points"]
