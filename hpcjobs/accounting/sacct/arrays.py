"""numpy-level pieces of the ``sacct --parsable2`` column parsers (:mod:`hpcjobs.accounting.sacct.columns`).

Integer columns travel as ``(values, missing)`` pairs of numpy arrays (values 0 where missing), so that
coalescing and spreading per-distinct-value results over the rows are plain numpy gathers and ``where``s
instead of Arrow kernels with validity bitmaps. The hpcjobs tag in Comment is found with Arrow's regex
kernels, once per distinct tagged comment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hpcjobs import states as st
from hpcjobs.schedulers.slurm import formats as fs

#: An integer column: int64 values (0 where missing) and the missing mask.
Ints = tuple[np.ndarray, np.ndarray]
#: :data:`hpcjobs.states._TAG_RE` for Arrow's RE2 (a search, like ``re.search``; ``\d`` is ASCII there,
#: which is why comments that are not ASCII go through the scalar parser). The token, last, is not kept:
#: its first 8 digits decide whether there is a match (RE2 is much quicker with fewer groups).
_TOKEN_GROUP = "(?P<token>[0-9a-f]{8,32})"
_TAG_PATTERN = (st._TAG_RE.pattern.removesuffix(_TOKEN_GROUP) + "[0-9a-f]{8}"
                if st._TAG_RE.pattern.endswith(_TOKEN_GROUP) else st._TAG_RE.pattern)
_TAG_MARK = "hpcjobs:"


def present(arr: pa.Array) -> np.ndarray | None:
    """Per row, whether ``arr`` (not a dictionary: pass its indices) has a value; ``None`` when all do.

    Args:
        arr: A flat Arrow array.

    Returns:
        A bool array, or ``None`` when nothing is missing.
    """
    if not arr.null_count:
        return None
    bitmap = arr.buffers()[0]
    if bitmap is None:
        return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), count=arr.offset + len(arr), bitorder="little")
    return bits[arr.offset:].view(np.bool_)


def _flat(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def ints(arr: pa.Array | pa.ChunkedArray) -> Ints:
    """An integer Arrow column as ``(values, missing)``.

    Args:
        arr: Any array that casts to int64.

    Returns:
        int64 values (0 where missing; read-only when nothing is missing) and the missing mask.
    """
    a = _flat(pc.cast(arr, pa.int64()))
    n = len(a)
    data = a.buffers()[1]
    values = (np.frombuffer(data, np.int64, count=n, offset=a.offset * 8) if data is not None and n
              else np.zeros(n, np.int64))
    valid = present(a)
    if valid is None:
        return values, np.zeros(n, bool)
    return np.where(valid, values, 0), ~valid


def int_series(values: Ints) -> pd.Series:
    """``(values, missing)`` as an ``Int64`` Series, without a copy."""
    return pd.Series(pd.arrays.IntegerArray(*values), copy=False)


def codes(enc: pa.DictionaryArray, missing: int, dtype: type[np.integer[Any]] = np.intp) -> np.ndarray:
    """The indices of a dictionary array, ``missing`` where null.

    Args:
        enc: A dictionary array.
        missing: The code for null rows.
        dtype: The codes' type (wide enough for the dictionary and ``missing``); ``intp`` suits numpy gathers.

    Returns:
        One code per row.
    """
    idx = enc.indices
    n = len(idx)
    if not n:
        return np.zeros(0, dtype)
    raw_type = np.dtype(idx.type.to_pandas_dtype())
    raw = np.frombuffer(idx.buffers()[1], raw_type, count=n, offset=idx.offset * raw_type.itemsize).astype(dtype)
    valid = present(idx)
    out: np.ndarray = raw if valid is None else np.where(valid, raw, dtype(missing))
    return out


def code_type(k: int) -> type[np.integer[Any]]:
    """The smallest signed integer type for codes ``-1..k`` (pandas keeps categorical codes so)."""
    return np.int8 if k < 127 else np.int16 if k < 32767 else np.int32 if k < 2**31 - 1 else np.int64


def table(values: Sequence[Any]) -> Ints:
    """Per-distinct-value integers (``None`` for unknown) as a lookup table for :class:`Spread`."""
    return ints(pa.array(values, type=pa.int64()))


class Spread:
    """A per-value table and the rows' codes into it, spread over the rows when (and where) asked.

    Attributes:
        lookup: The per-value table.
        idx: One code (``intp``) per row.
    """

    def __init__(self, lookup: Ints, idx: np.ndarray) -> None:
        self.lookup, self.idx = lookup, idx

    def at(self, rows: np.ndarray | None) -> Ints:
        """The values of rows ``rows`` (all rows for ``None``)."""
        idx = self.idx if rows is None else self.idx.take(rows)
        return self.lookup[0].take(idx), self.lookup[1].take(idx)


class Count:
    """An integer column where 0 means not known (a count of a pending or interim row), read where asked."""

    def __init__(self, arr: pa.Array | pa.ChunkedArray) -> None:
        a = _flat(pc.cast(arr, pa.int64()))
        n = len(a)
        data = a.buffers()[1]
        self.values = (np.frombuffer(data, np.int64, count=n, offset=a.offset * 8) if data is not None and n
                       else np.zeros(n, np.int64))
        self.valid = present(a)

    def at(self, rows: np.ndarray | None) -> Ints:
        """The values of rows ``rows`` (all rows for ``None``)."""
        values = self.values if rows is None else self.values.take(rows)
        missing = values == 0
        if self.valid is not None:
            missing |= ~(self.valid if rows is None else self.valid.take(rows))
            values = np.where(missing, 0, values)
        return values, missing


def first(*candidates: Ints | Spread | Count | None) -> Ints | None:
    """Per row the first candidate that has a value (``pc.coalesce``); ``None`` when none is given.

    A candidate after the first is only looked at in the rows still missing: spread over just those when
    they are few.
    """
    given = [c for c in candidates if c is not None]
    if not given:
        return None

    def at(source: Ints | Spread | Count, rows: np.ndarray | None) -> Ints:
        if isinstance(source, tuple):
            return source if rows is None else (source[0].take(rows), source[1].take(rows))
        return source.at(rows)

    values, missing = at(given[0], None)
    for more in given[1:]:
        left = int(np.count_nonzero(missing))
        if not left:
            break
        if left * 8 < len(missing):
            rows = np.flatnonzero(missing)
            values, missing = values.copy(), missing.copy()
            values[rows], missing[rows] = at(more, rows)
        else:
            more_values, more_missing = at(more, None)
            values, missing = np.where(missing, more_values, values), missing & more_missing
    return values, missing


def first_rows(row_codes: np.ndarray, k: int) -> np.ndarray:
    """The row where each code ``0..k-1`` first appears (``len(row_codes)`` for codes that do not).

    Args:
        row_codes: One code per row, -1 for none.
        k: The number of codes.

    Returns:
        int64 rows, one per code.
    """
    n = len(row_codes)
    found = np.full(k, n, np.int64)
    if k <= 16:  # a few codes: a pass each is cheaper than a scatter
        for c in range(k):
            row = int(np.argmax(row_codes == c)) if n else 0
            if n and row_codes[row] == c:
                found[c] = row
    else:
        used = row_codes >= 0
        np.minimum.at(found, row_codes[used], np.flatnonzero(used))
    return found


def categories_by_first_row(row_codes: np.ndarray, names: list[Any]) -> pd.Series:
    """A categorical of ``names[row_codes]`` (-1: missing) with the categories in order of first appearance.

    That is the order ``dictionary_encode`` gives the same values spelled out row by row; names no row
    has are left out, and a blank name is missing, as in :func:`hpcjobs.accounting.sacct.columns._category_series`.

    Args:
        row_codes: One code per row into ``names``, -1 for missing.
        names: The values the codes stand for.

    Returns:
        The categorical Series.
    """
    k = len(names)
    found = first_rows(row_codes, k)
    kept = [int(i) for i in np.argsort(found, kind="stable") if found[i] < len(row_codes) and names[i] != ""]
    if kept != list(range(k)):  # renumber
        new = np.full(k + 1, -1, code_type(k))  # old code → new one; the last slot takes -1 to -1
        new[kept] = np.arange(len(kept))
        row_codes = new[row_codes]
    cats = [names[i] for i in kept]
    return pd.Series(pd.Categorical.from_codes(row_codes, categories=cats, validate=False), copy=False)


def job_tags(comment: pa.Array | pa.ChunkedArray) -> tuple[pd.Series, pd.Series] | None:
    """Sweep id (categorical) and chunk (``Int64``) of the hpcjobs tag in each comment.

    The rows holding ``hpcjobs:`` are found by a substring search; their distinct comments are searched
    with :data:`hpcjobs.states._TAG_RE` by Arrow (comments that are not ASCII by
    :func:`hpcjobs.states.parse_job_tag`), and the results spread back over the rows.

    Args:
        comment: Comment, as strings (or a dictionary array).

    Returns:
        The two columns, the sweep categories in order of first appearance; ``None`` when a chunk does not
        parse as an int64 (the caller then takes the scalar parser for every comment).
    """
    if pa.types.is_dictionary(comment.type):
        enc_all = _flat(comment)
        comment = enc_all.dictionary.take(enc_all.indices)
    n = len(comment)
    has = pc.match_substring(comment, _TAG_MARK)
    rows = np.asarray(pc.indices_nonzero(has)).astype(np.intp)
    enc = _flat(pc.filter(comment, has)).dictionary_encode()
    values = enc.dictionary
    match = pc.extract_regex(values, _TAG_PATTERN)
    found = dict(zip([f.name for f in match.type], match.flatten(), strict=True))
    sweeps, chunks = found["sweep"], found["chunk"]
    try:
        chunk_values = pc.cast(chunks, pa.int64())
    except pa.ArrowInvalid:  # overflows int64
        return None
    odd = np.flatnonzero(~np.asarray(pc.string_is_ascii(values)))
    if len(odd):  # Unicode digits are digits to re's \d: the scalar parser for these
        tags = [st.parse_job_tag(v) for v in values.take(pa.array(odd)).to_pylist()]
        is_odd = np.zeros(len(values), bool)
        is_odd[odd] = True
        where = pa.array(is_odd)
        patch = np.full(len(values), -1, np.int64)
        patch[odd] = np.arange(len(odd))
        spread = pa.array(patch, mask=patch < 0)
        scalar_sweeps = pa.array([t.sweep_id if t else None for t in tags], pa.string()).take(spread)
        scalar_chunks = pa.array([t.chunk if t else None for t in tags], pa.int64()).take(spread)
        sweeps = pc.if_else(where, scalar_sweeps, sweeps)
        chunk_values = pc.if_else(where, scalar_chunks, chunk_values)
    sweep_enc = sweeps.dictionary_encode()
    value_sweep = codes(sweep_enc, -1)
    value_chunk = ints(chunk_values)
    value_idx = codes(enc, -1)
    row_sweep = np.full(n, -1, code_type(len(sweep_enc.dictionary)))
    row_sweep[rows] = value_sweep[value_idx]
    chunk_vals, chunk_missing = np.zeros(n, np.int64), np.ones(n, bool)
    chunk_vals[rows], chunk_missing[rows] = Spread(value_chunk, value_idx).at(None)
    cats = sweep_enc.dictionary.to_pylist()
    sweep_series = pd.Series(pd.Categorical.from_codes(row_sweep, categories=cats, validate=False), copy=False)
    return sweep_series, int_series((chunk_vals, chunk_missing))


def _distinct(enc: pa.DictionaryArray) -> list[str | None]:
    """The dictionary's values, blank as ``None``."""
    return [v if v != "" else None for v in enc.dictionary.to_pylist()]


class Combos:
    """The combinations of values of a few dictionary fields that occur together in a row.

    Per-value tables of each field are taken to one table over the combinations, where they are combined
    (coalesced, multiplied) as small arrays; one gather by :attr:`key` spreads the result over the rows.
    The combinations are all of them (a dense grid) when there are few, else those the rows have.

    Attributes:
        key: One combination code (``intp``) per row.
        field_idx: Per field, its value code (``len(dictionary)`` for null) in each combination.
    """

    def __init__(self, encs: list[pa.DictionaryArray], n: int) -> None:
        sizes = [len(e.dictionary) + 1 for e in encs]
        idx = [codes(e, size - 1, code_type(size)) for e, size in zip(encs, sizes, strict=True)]
        total = int(np.prod(sizes, dtype=np.float64))
        if not idx:
            self.key, self.field_idx = np.zeros(n, np.intp), []
        elif len(idx) == 1 or total <= max(4096, n // 8):  # every combination, numbered as by np.ravel_multi_index
            key = idx[0].astype(np.intp)
            for more, size in zip(idx[1:], sizes[1:], strict=True):
                key *= size
                key += more
            self.key = key
            grid = np.unravel_index(np.arange(total, dtype=np.intp), sizes)
            self.field_idx = [np.asarray(g, np.intp) for g in grid]
        else:  # too many to list: number the combinations the rows have, field by field
            key = idx[0].astype(np.intp)
            for more, size in zip(idx[1:], sizes[1:], strict=True):
                key = pd.factorize(key.astype(np.int64) * size + more)[0].astype(np.intp)
            # factorize numbers in order of first appearance: a code's first row is where the running max grows
            grown = np.flatnonzero(np.diff(np.maximum.accumulate(key), prepend=-1) > 0)
            self.key = key
            self.field_idx = [i.take(grown).astype(np.intp) for i in idx]

    def spread(self, values: Ints) -> Spread:
        """A table over the combinations, to spread over the rows."""
        return Spread(values, self.key)

    def codes_at_rows(self, per_combo: np.ndarray) -> np.ndarray:
        """Per-combination codes spread over the rows."""
        out: np.ndarray = per_combo.take(self.key)
        return out


class _Field:
    """One dictionary field of :class:`Combos`, its per-value results taken to the combinations."""

    def __init__(self, combos: Combos, j: int, values: list[str | None]) -> None:
        self.combos, self.j, self.values = combos, j, values

    def ints(self, per_value: list[Any]) -> Ints:
        """Integers per value (one more: the null rows) → per combination."""
        values, missing = table(per_value)
        idx = self.combos.field_idx[self.j]
        return values.take(idx), missing.take(idx)

    def name_codes(self, per_value: list[str | None], names: dict[str, int]) -> np.ndarray:
        """Strings per value → codes into ``names`` (grown as needed) per combination, -1 for ``None``."""
        codes_ = [-1 if v is None else names.setdefault(v, len(names)) for v in per_value]
        out: np.ndarray = np.asarray(codes_, np.int32).take(self.combos.field_idx[self.j])
        return out


def resources(counts: dict[str, pa.Array | pa.ChunkedArray], enc: dict[str, pa.DictionaryArray],
              n: int) -> dict[str, pd.Series]:
    """CPUs, nodes, GPUs (count, type) and requested memory: allocated, else requested.

    Args:
        counts: ``alloccpus``/``ncpus``/``reqcpus``/``nnodes`` where read, as integers (0 means not known yet).
        enc: ``alloctres``/``reqtres``/``reqmem`` where read, dictionary-encoded.
        n: The number of rows.

    Returns:
        The columns by schema name.
    """
    out: dict[str, pd.Series] = {}
    fields = [f for f in ("alloctres", "reqtres", "reqmem") if f in enc]
    combos = Combos([enc[f] for f in fields], n)
    by_name = {f: _Field(combos, j, _distinct(enc[f])) for j, f in enumerate(fields)}
    tres = {f: [fs.summarize_tres(v) for v in by_name[f].values] + [fs.TresSummary()]
            for f in ("alloctres", "reqtres") if f in by_name}

    def summary(attr: str, fields: tuple[str, ...] = ("alloctres", "reqtres")) -> dict[str, Ints]:
        return {f: by_name[f].ints([getattr(x, attr) for x in found]) for f, found in tres.items() if f in fields}

    def count(field: str) -> Count | None:
        return Count(counts[field]) if field in counts else None

    def spread(values: Ints | None) -> Spread | None:
        return combos.spread(values) if values is not None else None

    tres_cpus = summary("cpus")
    if "ncpus" in counts:
        cpus = first(count("alloccpus"), spread(tres_cpus.get("alloctres")), count("ncpus"),
                     spread(tres_cpus.get("reqtres")), count("reqcpus"))
    else:  # allocated then requested TRES, taken together over the combinations
        cpus = first(count("alloccpus"), spread(first(*tres_cpus.values())), count("reqcpus"))
    nodes = first(count("nnodes"), spread(first(*summary("nodes").values())))
    # a TRES without gres/gpu is a job without GPUs (0); NA only where the TRES field itself is blank
    gpu_counts = {f: by_name[f].ints([x.gpus if x.gpus is not None else (0 if text else None)
                                      for x, text in zip(found, [*by_name[f].values, None], strict=True)])
                  for f, found in tres.items()}
    gpus = spread(first(*gpu_counts.values()))
    for name, column in (("cpus", cpus), ("nodes", nodes), ("gpus", gpus.at(None) if gpus else None)):
        if column is not None:
            out[name] = int_series(column)
    if tres:
        names: dict[str, int] = {}
        per_combo = [by_name[f].name_codes([x.gpu_type for x in found], names) for f, found in tres.items()]
        gpu_type = per_combo[0] if len(per_combo) == 1 else np.where(per_combo[0] >= 0, per_combo[0], per_combo[1])
        gpu_type = gpu_type.astype(code_type(len(names)))
        out["gpu_type"] = categories_by_first_row(combos.codes_at_rows(gpu_type), list(names))
    tres_mem = summary("mem_bytes", ("reqtres",)).get("reqtres")
    req_mem = None
    if "reqmem" in by_name:  # whole job since 21.08; before: per CPU (Mc) or per node (Mn)
        memory = [fs.parse_memory(v) for v in by_name["reqmem"].values] + [fs.parse_memory(None)]
        mem = by_name["reqmem"].ints([m.bytes for m in memory])
        per = by_name["reqmem"].ints([{"cpu": 1, "node": 2}.get(m.per or "", 0) for m in memory])[0]
        per_rows = combos.codes_at_rows(per) if per.any() else None
        if per_rows is not None and per_rows.any():
            def or_one(x: Ints | None) -> np.ndarray | int:
                return 1 if x is None else np.where(x[1], 1, x[0])

            mem_values, mem_missing = combos.spread(mem).at(None)
            mem_values = mem_values * np.where(per_rows == 1, or_one(cpus), np.where(per_rows == 2, or_one(nodes), 1))
            req_mem = first((mem_values, mem_missing), spread(tres_mem))
        else:  # no per-CPU/per-node amounts: coalesced over the combinations
            both = first(mem, tres_mem)
            assert both is not None
            req_mem = combos.spread(both).at(None)
    elif tres_mem is not None:
        req_mem = combos.spread(tres_mem).at(None)
    if req_mem is not None:
        out["req_mem_bytes"] = int_series(req_mem)
    return out
