"""Column parsers for ``sacct --parsable2`` text: pyarrow string columns → schema-typed pandas Series.

Used by :func:`hpcjobs.accounting.sources.slurm.read_sacct_parsable2`. pyarrow compute kernels and numpy
byte views parse the high-cardinality columns (ids, times, durations, MaxRSS); the low-cardinality
ones (State, ExitCode, Timelimit, ReqMem, TRES) are parsed once per distinct value with the
hand-tested scalar parsers of :mod:`hpcjobs.schedulers.slurm.formats` and spread back with numpy gathers
(:mod:`hpcjobs.accounting.sacct.arrays`: TRES and ReqMem once per combination of the three that occurs);
the hpcjobs tag in Comment is searched by Arrow's regex kernel once per distinct tagged comment.

Each column group (:data:`COLUMN_GROUPS`) maps the lower-cased field columns to finished Series;
the groups are independent, so the caller may run them on threads (the kernels release the GIL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hpcjobs import states as st
from hpcjobs.accounting.sacct import arrays as nx
from hpcjobs.accounting.sacct import usage as gpu_usage
from hpcjobs.accounting.sacct.scan import Columns
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.slurm import formats as fs

_SACCT_TIME_FMT = "%Y-%m-%dT%H:%M:%S"
_INT64 = pa.int64()
_STATE_CODES = {name: i for i, name in enumerate(st.ALL_STATES)}

# ---------------------------------------------------------------------------
# Arrow helpers


def _str_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(pd.arrays.ArrowStringArray(arr), copy=False)


def _int_series(arr: pa.Array | pa.ChunkedArray | np.ndarray, mask: np.ndarray | None = None) -> pd.Series:
    if isinstance(arr, np.ndarray):
        values = arr.astype(np.int64, copy=False)
        mask = np.zeros(len(values), bool) if mask is None else mask
    else:
        values, mask = nx.ints(arr)
    return pd.Series(pd.arrays.IntegerArray(values, mask), copy=False)


def _array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _dictionary(arr: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """``arr`` dictionary-encoded (as it is when the reader already did it)."""
    a = _array(arr)
    return a if pa.types.is_dictionary(a.type) else a.dictionary_encode()


def _strings(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``arr`` as plain strings (a dictionary column decoded)."""
    a = _array(arr)
    return a.dictionary.take(a.indices) if pa.types.is_dictionary(a.type) else a


def _field(arr: pa.Array | pa.ChunkedArray, name: str) -> pa.Array | pa.ChunkedArray:
    """Field ``name`` of a struct column (chunked or not)."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([c.field(name) for c in arr.chunks], type=arr.type.field(name).type)
    return arr.field(name)


def _category_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    enc = _dictionary(arr)
    cats = enc.dictionary.to_pylist()
    codes = nx.codes(enc, -1, nx.code_type(len(cats)))
    if "" in cats:  # blank means absent
        codes = np.where(codes == cats.index(""), -1, codes)
        codes = np.where(codes > cats.index(""), codes - 1, codes)
        cats.remove("")
    return pd.Series(pd.Categorical.from_codes(codes, categories=cats, validate=False), copy=False)


class _Bytes:
    """A string column as numpy bytes and offsets, for parsing fixed-position formats without Python loops."""

    def __init__(self, arr: pa.Array | pa.ChunkedArray) -> None:
        self.arr = _strings(arr).cast(pa.large_string())
        bufs = self.arr.buffers()
        n = len(self.arr)
        off = np.frombuffer(bufs[1], np.int64, count=n + 1, offset=self.arr.offset * 8)
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        # 16 zero bytes before and 32 after: gathers a few bytes around any string stay in range
        self.data = np.concatenate([np.zeros(16, np.uint8), data, np.zeros(32, np.uint8)])
        self.start, self.end = off[:-1] + 16, off[1:] + 16
        self.len = self.end - self.start
        self.valid = (self.arr.is_valid().to_numpy(zero_copy_only=False) if self.arr.null_count
                      else np.ones(n, bool))

    def at(self, pos: int) -> np.ndarray:
        """Byte at offset ``pos`` (|pos| < 32) from each string's start (negative: from its end).

        Positions past a string read the next string or the zero padding; callers check lengths.
        """
        return self.data[(self.start if pos >= 0 else self.end) + pos]

    def find(self, ch: str) -> np.ndarray:
        """Offset of the first ``ch`` in each string, -1 where there is none."""
        return self.find_all(ch)[0]

    def find_all(self, chars: str) -> list[np.ndarray]:
        """:meth:`find` for each character of ``chars``, in one pass over the bytes."""
        data = self.data[: len(self.data) - 32]
        special = np.zeros(len(data), bool)
        for c in chars:
            special |= data == ord(c)
        hits = np.flatnonzero(special)
        found = data[hits]
        n = len(self.len)
        # row of each hit: the byte offsets are sorted, so a repeat of row numbers maps bytes to rows
        rows_all = np.repeat(np.arange(n, dtype=np.int32), self.len)[hits - int(self.start[0] if n else 0)]
        result = []
        for c in chars:
            sel = found == ord(c)
            pos, rows = hits[sel], rows_all[sel]
            out = np.full(n, -1, np.int64)
            out[rows[::-1]] = pos[::-1] - self.start[rows[::-1]]  # reversed: the first hit wins
            result.append(out)
        return result

    def slice(self, b: np.ndarray | int, e: np.ndarray | int, keep: np.ndarray) -> pa.Array:
        """Substrings [b, e) of each string where ``keep``, null elsewhere."""
        n = len(self.len)
        b = np.broadcast_to(b, (n,))
        lengths = np.where(keep, np.broadcast_to(e, (n,)) - b, 0)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=off[1:])
        idx = np.repeat(self.start + b - off[:-1], lengths)
        idx += np.arange(off[-1], dtype=np.int64)
        validity = pa.py_buffer(np.packbits(keep, bitorder="little"))
        return pa.LargeStringArray.from_buffers(n, pa.py_buffer(off), pa.py_buffer(self.data[idx]), validity,
                                               int(n - np.count_nonzero(keep)))


def _int_or_null(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    """Digits → int64; blank and anything else → null."""
    if pa.types.is_integer(arr.type):
        return arr
    try:
        return pc.cast(arr, pa.int64())
    except pa.ArrowInvalid:
        digits = pc.match_substring_regex(arr, r"^\d+$")
        return pc.cast(pc.if_else(digits, arr, pa.scalar(None, arr.type)), pa.int64())


def _na_series(dtype: Any, n: int) -> pd.Series:
    """An all-missing column of ``dtype`` without building a Python list."""
    name = str(dtype)
    if name == "string":
        return _str_series(pa.nulls(n, pa.large_string()))
    if name == "Int64":
        return pd.Series(pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)), copy=False)
    if name == "Float64":
        return pd.Series(pd.arrays.FloatingArray(np.zeros(n, np.float64), np.ones(n, bool)), copy=False)
    if name == "category":
        cats = dtype.categories if isinstance(dtype, pd.CategoricalDtype) and dtype.categories is not None else []
        return pd.Series(pd.Categorical.from_codes(np.full(n, -1), categories=cats), copy=False)
    if name.startswith("datetime64"):
        return pd.Series(np.full(n, np.datetime64("NaT"), "datetime64[ns]")).dt.tz_localize("UTC")
    return pd.Series(np.full(n, np.timedelta64("NaT"), "timedelta64[ns]"))


def _assemble(out: dict[str, pd.Series], n: int) -> pd.DataFrame:
    """The schema's columns in order, from ``out`` (already in the schema's dtypes) or all-missing."""
    cols = {}
    for name, dtype in COLUMNS.items():
        col = out.get(name)
        if col is None:
            col = _na_series(dtype, n)
        elif str(col.dtype) != str(dtype):
            col = col.astype(dtype)
        cols[name] = col
    return pd.DataFrame(cols, copy=False)


def _parse_times(arr: pa.ChunkedArray, tz: str) -> pa.Array:
    """``YYYY-MM-DDTHH:MM:SS`` (or epoch seconds); Unknown/None/blank → null; as timestamp[ns, UTC]."""
    if pa.types.is_timestamp(arr.type):  # the reader parsed them
        return _localize(_array(arr).cast(pa.timestamp("ns")), tz)
    a = _array(arr)
    length = pc.binary_length(a)
    iso = pc.equal(length, 19)
    ns = pa.timestamp("ns")
    try:
        if pc.all(iso).as_py() and not a.null_count:
            ts = pc.cast(a, ns)
        elif a.offset == 0:  # the same strings with the others marked null: no copy
            validity = pc.fill_null(iso, False).buffers()[1]
            ts = pc.cast(pa.Array.from_buffers(a.type, len(a), [validity, *a.buffers()[1:]]), ns)
        else:
            ts = pc.cast(pc.if_else(iso, a, pa.scalar(None, a.type)), ns)
    except pa.ArrowInvalid:  # 19 characters but not a time: null it, value by value
        ts = pc.strptime(a, format=_SACCT_TIME_FMT, unit="s", error_is_null=True).cast(ns)
    odd = pc.and_(pc.is_null(ts), pc.invert(pc.is_in(length, value_set=pa.array([4, 7], pa.int32()))))
    if pc.any(odd).as_py():  # epoch seconds (SLURM_TIME_FORMAT=%s)
        epoch = pc.cast(_int_or_null(pc.if_else(odd, a, pa.scalar(None, a.type))), pa.timestamp("s"))
        ts = pc.coalesce(ts, epoch.cast(ns))
    return _localize(ts, tz)


def _localize(ts: pa.Array, tz: str) -> pa.Array:
    """Naive timestamp[ns] printed in ``tz`` → timestamp[ns, UTC]."""
    if tz != "UTC":
        return pc.assume_timezone(ts, tz, ambiguous="earliest", nonexistent="earliest").cast(
            pa.timestamp("ns", tz="UTC"))
    return ts.view(pa.timestamp("ns", tz="UTC"))


def _durations_ns(arr: pa.ChunkedArray) -> pa.Array:
    """``[D-]HH:MM:SS`` / ``MM:SS.mmm`` → duration[ns]; anything else (UNLIMITED, blank) → null."""
    if pa.types.is_duration(arr.type):  # the scanner parsed them
        return _array(arr)
    t = _Bytes(arr)
    L = t.len
    windows = np.lib.stride_tricks.sliding_window_view(t.data, 9)
    # the last 9 bytes of each string, one row gather, transposed so each position is contiguous:
    # tail[9 - k] is the k-th byte from the end
    tail = np.ascontiguousarray(windows[t.end - 9].T)
    d = tail.astype(np.int32) - 48

    def two(k: int) -> np.ndarray:  # two digits ending k bytes before the end
        return np.asarray(d[8 - k] * 10 + d[9 - k])

    def digits_at(*rows: int) -> np.ndarray:
        ok = np.ones(len(L), bool)
        for r in rows:
            ok &= (tail[r] - np.uint8(48)) <= 9
        return ok

    both = digits_at(1, 4, 7, 8)
    is_ms = t.valid & (L == 9) & (tail[5] == 46) & (tail[2] == 58) & both & digits_at(0, 3, 6)
    is_hms = (t.valid & (L >= 8) & (tail[6] == 58) & (tail[3] == 58) & ((L == 8) | (tail[0] == 45))
              & both & digits_at(2, 5))
    long = is_hms & (L > 8)
    days = np.zeros(len(L), np.int64)
    if long.any():
        try:
            days[long] = np.asarray(pc.cast(t.slice(0, L - 9, long).filter(pa.array(long)), pa.int64()))
        except pa.ArrowInvalid:
            is_hms &= ~long
    ns_ms = (two(8) * 60 + two(5)).astype(np.int64) * 1_000_000_000 + (d[6] * 100 + two(1)) * 1_000_000
    ns_hms = (days * 86400 + (two(7) * 3600 + two(4) * 60 + two(1))) * 1_000_000_000
    ok = is_ms | is_hms
    vals = np.where(is_ms, ns_ms, np.where(is_hms, ns_hms, 0))
    mask = ~ok
    rest = t.valid & ~ok
    if rest.any():  # other spellings ([MM:]SS, fractions elsewhere): the scalar parser, once per distinct value
        other = _spread(_encoded(t.arr.filter(pa.array(rest))), fs.parse_duration, pa.float64())
        vals[rest] = np.asarray(pc.fill_null(pc.cast(pc.round(pc.multiply(other, 1e9)), pa.int64()), 0))
        mask[rest] = other.is_null().to_numpy(zero_copy_only=False)
    return pa.array(vals, pa.int64(), mask=mask).cast(pa.duration("ns"))


_FACTOR_BY_BYTE = np.ones(256)
for _unit, _factor in fs.UNIT_FACTORS.items():
    if _unit:
        _FACTOR_BY_BYTE[ord(_unit)] = float(_factor)


def _memory_bytes(arr: pa.ChunkedArray) -> pa.Array:
    """``1294440K``/``16G``/``0``/``891.26M`` → bytes (int64); ``16?``/blank → null."""
    if pa.types.is_integer(arr.type):  # the scanner parsed them
        return _array(arr)
    t = _Bytes(arr)
    factor = np.where(t.valid, _FACTOR_BY_BYTE[t.at(-1)], 1.0)
    try:
        value = pc.cast(pc.utf8_rtrim(t.arr, characters="KMGTPE"), pa.float64())
    except pa.ArrowInvalid:  # junk such as "16?": the scalar parser, once per distinct value
        def in_bytes(v: str | None) -> int | None:
            found = fs.parse_memory(v).bytes
            return found if found is not None and abs(found) < 2**63 else None

        return _spread(_encoded(arr), in_bytes, pa.int64())
    amount = pc.round(pc.multiply(value, pa.array(factor)))
    fits = pc.less(pc.abs(amount), 2.0**63)  # past int64 (or nan/inf) is junk too
    return pc.cast(pc.if_else(fits, amount, pa.scalar(None, pa.float64())), pa.int64())


def _seconds_to_duration(arr: pa.ChunkedArray | pa.Array) -> pa.Array:
    if pa.types.is_integer(arr.type):
        return pc.cast(pc.multiply(pc.cast(arr, pa.int64()), 1_000_000_000), pa.duration("ns"))
    ns = pc.round(pc.multiply(pc.cast(arr, pa.float64()), 1e9))
    return pc.cast(pc.cast(ns, pa.int64()), pa.duration("ns"))




def _encoded(arr: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, list[Any]]:
    """Dictionary-encode: (indices with nulls pointing one past the end, distinct values; blank → ``None``)."""
    enc = _dictionary(arr)
    values = [v if v != "" else None for v in enc.dictionary.to_pylist()]
    return pa.array(nx.codes(enc, len(values), np.int64)), values


def _spread(encoded: tuple[pa.Array, list[Any]], fn: Callable[[Any], Any], typ: pa.DataType) -> pa.Array:
    """``fn`` applied once per distinct value (and once to ``None``), spread back over the rows."""
    idx, values = encoded
    return pa.array([fn(v) for v in values] + [fn(None)], type=typ).take(idx)


def _per_value(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """:func:`_encoded` with the codes in numpy (``intp``), for :func:`_spread_ints`."""
    enc = _dictionary(arr)
    values = [v if v != "" else None for v in enc.dictionary.to_pylist()]
    return nx.codes(enc, len(values)), values


def _spread_ints(encoded: tuple[np.ndarray, list[Any]], fn: Callable[[Any], Any], typ: pa.DataType = _INT64,
                 then: Callable[[pa.Array], pa.Array] | None = None) -> nx.Ints:
    """:func:`_spread` as numpy ``(values, missing)``: ``fn`` gives ``typ``, ``then`` (if given) makes that integers."""
    idx, values = encoded
    found = pa.array([fn(v) for v in values] + [fn(None)], type=typ)
    return nx.Spread(nx.ints(then(found) if then is not None else found), idx).at(None)


def _timedelta_series(values: np.ndarray, missing: np.ndarray) -> pd.Series:
    """Nanoseconds (NaT where ``missing``) as a ``timedelta64[ns]`` Series."""
    return pd.Series(np.where(missing, np.iinfo(np.int64).min, values).view("m8[ns]"), copy=False)


def _ids(col: Columns, tz: str) -> dict[str, pd.Series]:
    """JobID: ``123``, ``123_4``, ``123_[5-9%2]``, ``123+1``, each optionally ``.step``."""
    if pa.types.is_struct(col["jobid"].type):  # the scanner took them apart
        ids = col["jobid"]
        out = {name: _str_series(_field(ids, name)) for name in ("job_id", "step", "array_job_id", "array_task_spec")}
        out.update((name, _int_series(_field(ids, name))) for name in ("array_task_id", "het_offset"))
        return out
    jobid = _array(col["jobid"])
    fast = _ids_by_split(jobid) if not jobid.null_count else None
    return fast if fast is not None else _ids_by_bytes(jobid)


def _ids_by_split(jobid: pa.Array) -> dict[str, pd.Series] | None:
    """:func:`_ids` the quick way: split at the first dot; only ids that are not plain digits get the byte scan.

    ``None`` where that is not the same as :func:`_ids_by_bytes` (a step name with other than letters and
    digits, an empty one, a malformed job id): the caller then takes the byte scan for all rows.
    """
    n = len(jobid)
    parts = pc.split_pattern(jobid, ".", max_splits=1)
    offsets = np.asarray(parts.offsets)
    has_step = np.diff(offsets) == 2
    if has_step.any():
        step = parts.values.take(pa.array(offsets[:-1] + 1, mask=~has_step))
        if not pc.all(pc.ascii_is_alnum(step)).as_py():
            return None
        job = parts.values.take(pa.array(offsets[:-1]))
    else:
        step, job = pa.nulls(n, pa.string()), jobid
    out: dict[str, pd.Series] = {"job_id": _str_series(job), "step": _str_series(step)}
    special = np.flatnonzero(~np.asarray(pc.ascii_is_decimal(job)))  # not plain digits: arrays, het jobs, ...
    if not len(special):
        for name in ("array_job_id", "array_task_spec"):
            out[name] = _str_series(pa.nulls(n, pa.large_string()))
        for name in ("array_task_id", "het_offset"):
            out[name] = _int_series(np.zeros(n, np.int64), np.ones(n, bool))
        return out
    # array tasks <digits>_<digits> by a second split; the rest (pending ranges, het jobs) by the byte scan
    halves = pc.split_pattern(job.take(pa.array(special)), "_", max_splits=1)
    half_offsets = np.asarray(halves.offsets)
    two = np.diff(half_offsets) == 2
    base = halves.values.take(pa.array(half_offsets[:-1]))
    task = halves.values.take(pa.array(half_offsets[:-1] + 1, mask=~two))
    simple = two & np.asarray(pc.fill_null(pc.and_(pc.ascii_is_decimal(base), pc.ascii_is_decimal(task)), False))
    odd = special[~simple]
    try:
        rest = _ids_by_bytes(job.take(pa.array(odd))) if len(odd) else None
        simple_ids = np.asarray(pc.cast(task.filter(pa.array(simple)), pa.int64()))
    except (SchedulerOutputError, ValueError, pa.ArrowInvalid):  # the byte scan over all rows says what is wrong
        return None
    keep = pa.array(simple)
    simple_base = base.filter(keep).cast(pa.large_string())
    where = np.full(n, -1, np.int64)  # row → position in [simple rows..., odd rows...]
    where[special[simple]] = np.arange(len(simple_base))
    where[odd] = len(simple_base) + np.arange(len(odd))
    spread = pa.array(where, mask=where < 0)
    no_strings, no_ints = pa.nulls(len(simple_base), pa.large_string()), np.full(len(simple_base), -1, np.int64)
    for name, simple_part in (("array_job_id", simple_base), ("array_task_spec", no_strings)):
        pieces = [simple_part] + ([pa.array(rest[name].array)] if rest is not None else [])
        out[name] = _str_series(pa.concat_arrays(pieces).take(spread))
    for name, simple_ints in (("array_task_id", simple_ids), ("het_offset", no_ints)):
        values = np.concatenate([simple_ints] + ([rest[name].to_numpy(dtype=np.int64, na_value=-1)]
                                                 if rest is not None else []))
        mask = np.concatenate([simple_ints < 0] + ([rest[name].isna().to_numpy()] if rest is not None else []))
        full, full_mask = np.zeros(n, np.int64), np.ones(n, bool)
        full[special], full_mask[special] = values[where[special]], mask[where[special]]
        out[name] = _int_series(full, full_mask)
    return out


def _ids_by_bytes(jobid: pa.Array) -> dict[str, pd.Series]:
    """:func:`_ids` by scanning the bytes of every id."""
    out: dict[str, pd.Series] = {}
    jt = _Bytes(jobid)
    L = jt.len
    dot, us, plus, lb, rb = jt.find_all("._+[]")
    job_len = np.where(dot >= 0, dot, L)
    plus = np.where(plus < job_len, plus, -1)  # a '+' after the dot is a truncated step name
    us = np.where(us < job_len, us, -1)  # so is a '_'
    base_end = np.minimum.reduce([np.where(us >= 0, us, job_len), np.where(plus >= 0, plus, job_len), job_len])
    is_spec = (us >= 0) & (lb == us + 1) & (rb > lb)
    is_task = (us >= 0) & ~is_spec
    is_het = plus >= 0
    bad = ~jt.valid | (jt.at(0) - np.uint8(48) > 9) | (base_end < 1) | ((dot >= 0) & (dot + 1 >= L))
    bad |= is_het & (us >= 0) & (plus < us)  # the het offset comes after the array part (2+3_4 is not an id)
    bad |= is_spec & (rb > job_len)
    try:
        task = pc.cast(jt.slice(us + 1, np.where(is_het, plus, job_len), is_task & ~bad), pa.int64())
        het = pc.cast(jt.slice(plus + 1, job_len, is_het & ~bad), pa.int64())
    except pa.ArrowInvalid:
        bad |= True
    if bad.any():
        rows = [v for v in jt.arr.filter(pa.array(bad)).to_pylist() if v is None or not fs._JOB_ID_RE.match(v)]
        raise SchedulerOutputError(f"not a Slurm job id in sacct output: {(rows or ['?'])[0]!r}")
    is_step = dot >= 0
    any_dot = bool(is_step.any())
    job = jt.slice(0, job_len, jt.valid) if any_dot else jt.arr
    out["job_id"] = _str_series(job)
    out["array_job_id"] = _str_series(jt.slice(0, base_end, is_task | is_spec))
    out["array_task_id"] = _int_series(task)
    out["array_task_spec"] = _str_series(jt.slice(lb + 1, rb, is_spec))
    out["het_offset"] = _int_series(het)
    out["step"] = _str_series(jt.slice(dot + 1, L, is_step))
    return out


def _raw_ids_and_rss(col: Columns, tz: str) -> dict[str, pd.Series]:
    """JobIDRaw (without the step) and MaxRSS, a job row taking the max over its steps when it has none."""
    out: dict[str, pd.Series] = {}
    scanned = pa.types.is_struct(col["jobid"].type)
    if scanned:  # the scanner took the ids apart
        is_step = np.asarray(pc.is_valid(_field(col["jobid"], "step")))
        job_key: Any = _field(col["jobid"], "job_id")
    else:
        jobid = _array(col["jobid"])
        is_step = np.asarray(pc.fill_null(pc.greater_equal(pc.find_substring(jobid, "."), 0), False))
        job_key = jobid
    raw_struct = "jobidraw" in col and pa.types.is_struct(col["jobidraw"].type)
    if raw_struct:
        out["job_id_raw"] = _str_series(_field(col["jobidraw"], "job_id_raw"))
        job_key = _field(col["jobidraw"], "key")
    elif "jobidraw" in col:
        raw = _strings(col["jobidraw"])
        parts = pc.split_pattern(raw, ".", max_splits=1)  # the part before the first dot
        offsets = np.asarray(parts.offsets)
        if (np.diff(offsets) == 2).any():
            valid = raw.is_valid().to_numpy(zero_copy_only=False)
            raw = parts.values.take(pa.array(offsets[:-1], mask=~valid))
        out["job_id_raw"] = _str_series(raw)
        job_key = _int_or_null(raw)
    if is_step.any() and "jobidraw" not in col and not scanned:  # key by the job part of JobID
        jt = _Bytes(col["jobid"])
        dot = jt.find(".")
        job_key = jt.slice(0, np.where(dot >= 0, dot, jt.len), jt.valid)
    if "maxrss" in col:
        rss = _memory_bytes(col["maxrss"])
        used = gpu_usage.memory_used(rss, _int_or_null(col["ntasks"]) if "ntasks" in col else None)
        if is_step.any():
            out["max_rss_bytes"] = _int_series(*_fill_job_max(rss, job_key, is_step))
            out["mem_used_bytes"] = _int_series(*_fill_job_max(used, job_key, is_step))
        else:
            out["max_rss_bytes"] = _int_series(rss)
            out["mem_used_bytes"] = _int_series(used)
    gpu = gpu_usage.sacct_gpu_usage(col)
    if gpu is not None:
        util, gmem = gpu
        if is_step.any():  # a job row without its own figure (AdminComment) takes the max over its steps
            util, gmem = (pa.array(v, pa.int64(), mask=m)
                          for v, m in (_fill_job_max(util, job_key, is_step), _fill_job_max(gmem, job_key, is_step)))
        out["gpu_utilization"] = gpu_usage.util_series(util)
        out["gpu_mem_max_bytes"] = _int_series(gmem)
    return out


def _fill_job_max(values: pa.Array, key: pa.Array, is_step: np.ndarray) -> nx.Ints:
    """Job rows lacking a value get the max over their steps (rows with the same key), as ``(values, missing)``.

    sacct prints each job row followed by its steps; when the rows are in that order (checked),
    the max is one ``reduceat`` over the segments; otherwise a hash group-by does it.
    """
    job_rows = np.flatnonzero(~is_step)
    raw, missing = nx.ints(values)
    v = np.where(missing, -1, raw)
    if len(job_rows) and job_rows[0] == 0 and _steps_follow_their_job(key, is_step, job_rows):
        best = np.maximum.reduceat(np.where(is_step, v, -1), job_rows)
        filled = v.copy()
        job_values = v.take(job_rows)
        filled[job_rows] = np.where(job_values >= 0, job_values, best)
        unknown = filled < 0
        return np.maximum(filled, 0), unknown
    step_mask = pa.array(is_step)
    per_job = pa.table({"k": key, "v": values}).filter(step_mask).group_by("k").aggregate([("v", "max")])
    from_steps = per_job.column("v_max").take(pc.index_in(key, value_set=per_job.column("k")))
    return nx.ints(pc.if_else(step_mask, values, pc.coalesce(values, from_steps)))


def _steps_follow_their_job(key: pa.Array | pa.ChunkedArray, is_step: np.ndarray, job_rows: np.ndarray) -> bool:
    """Whether each step row has the key of the job row before it (where both have one)."""
    if pa.types.is_integer(key.type) and not key.null_count:  # then: the same key as the row before
        k = nx.ints(key)[0]
        return bool(((k[1:] == k[:-1]) | ~is_step[1:]).all())
    parent = job_rows[np.cumsum(~is_step) - 1]
    steps = np.flatnonzero(is_step)
    step_keys, parent_keys = key.take(pa.array(steps)), key.take(pa.array(parent[steps]))
    return pc.all(pc.equal(step_keys, parent_keys)).as_py() is not False


def _texts(col: Columns, tz: str) -> dict[str, pd.Series]:
    """Free text, categorical names, and the hpcjobs tag in Comment."""
    out: dict[str, pd.Series] = {}
    for field, name in (("jobname", "job_name"), ("nodelist", "node_list"), ("comment", "comment")):
        if field in col:
            out[name] = _str_series(col[field])
    for field, name in (("user", "user"), ("account", "account"), ("partition", "partition"),
                        ("qos", "qos"), ("cluster", "cluster")):
        if field in col:
            out[name] = _category_series(col[field])
    tagged = nx.job_tags(col["comment"]) if "comment" in col else None
    if tagged is not None:
        out["sweep_id"], out["chunk"] = tagged
    elif "comment" in col:  # a chunk past int64: the scalar parser (hpcjobs.states.parse_job_tag) says so
        enc = _encoded(col["comment"])
        tags = {v: tag for v in enc[1] if (tag := st.parse_job_tag(v)) is not None}
        out["sweep_id"] = _category_series(_spread(enc, lambda v: tags[v].sweep_id if v in tags else None,
                                                   pa.string()))
        out["chunk"] = _int_series(_spread(enc, lambda v: tags[v].chunk if v in tags else None, pa.int64()))
    return out


def _states(col: Columns, tz: str) -> dict[str, pd.Series]:
    """State (normalised and raw) and ExitCode, once per distinct value."""
    out: dict[str, pd.Series] = {}
    if "state" in col:
        out["state_raw"] = _str_series(_strings(col["state"]))
        codes, _ = _spread_ints(_per_value(col["state"]), lambda v: _STATE_CODES[fs.normalize_state(v)], pa.int8())
        out["state"] = pd.Series(pd.Categorical.from_codes(codes.astype(np.int8), dtype=COLUMNS["state"]))
    if "exitcode" in col:
        exit_codes = _per_value(col["exitcode"])
        out["exit_code"] = _int_series(*_spread_ints(exit_codes, lambda v: fs.parse_exit_code(v)[0]))
        out["exit_signal"] = _int_series(*_spread_ints(exit_codes, lambda v: fs.parse_exit_code(v)[1]))
    return out


def _times(col: Columns, tz: str) -> dict[str, pd.Series]:
    """Submit/Eligible/Start/End and the wait (start − eligible, or − submit when eligible is unknown)."""
    out: dict[str, pd.Series] = {}
    times = {}
    for field, name in (("submit", "submit_time"), ("eligible", "eligible_time"), ("start", "start_time"),
                        ("end", "end_time")):
        if field in col:
            times[name] = _parse_times(col[field], tz)
            out[name] = pd.Series(times[name].to_pandas(), copy=False)
    refs = [times[k] for k in ("eligible_time", "submit_time") if k in times]
    if "start_time" in times and refs:
        ref = pc.coalesce(*refs) if len(refs) > 1 else refs[0]
        out["wait"] = pd.Series(pc.subtract(times["start_time"], ref).to_pandas(), copy=False)
    return out


def _durations(col: Columns, tz: str) -> dict[str, pd.Series]:
    """Elapsed (ElapsedRaw seconds preferred), Timelimit (TimelimitRaw minutes preferred), TotalCPU."""
    out: dict[str, pd.Series] = {}
    if "elapsedraw" in col:
        out["elapsed"] = pd.Series(_seconds_to_duration(_int_or_null(col["elapsedraw"])).to_pandas())
    elif "elapsed" in col:
        out["elapsed"] = pd.Series(_durations_ns(col["elapsed"]).to_pandas())
    if "timelimitraw" in col:
        minutes = _int_or_null(col["timelimitraw"])
        out["time_limit"] = pd.Series(_seconds_to_duration(pc.multiply(minutes, 60)).to_pandas())
    elif "timelimit" in col:
        ns = _spread_ints(_per_value(col["timelimit"]), fs.parse_duration, pa.float64(),
                          then=lambda secs: _seconds_to_duration(secs).cast(_INT64))
        out["time_limit"] = _timedelta_series(*ns)
    if "totalcpu" in col:
        out["cpu_time"] = pd.Series(_durations_ns(col["totalcpu"]).to_pandas())
    return out


def _resources(col: Columns, tz: str) -> dict[str, pd.Series]:
    """CPUs, nodes, GPUs (count, type) and requested memory: allocated, else requested."""
    counts: dict[str, Any] = {f: _int_or_null(col[f]) for f in ("alloccpus", "ncpus", "reqcpus", "nnodes") if f in col}
    encoded: dict[str, Any] = {f: _dictionary(col[f]) for f in ("alloctres", "reqtres", "reqmem") if f in col}
    return nx.resources(counts, encoded, len(next(iter(col.values()))))


#: The column groups, each ``(columns, tz) -> {schema column: Series}``, independent of each other and
#: writing disjoint columns; costliest first as read by pyarrow (about 0.24, 0.15, 0.15, 0.05 s CPU per
#: million rows, the last three 0.02-0.03 s), so that two threads finish together. From the scanner's
#: columns each takes 0.01-0.04 s.
COLUMN_GROUPS: tuple[Callable[[Columns, str], dict[str, pd.Series]], ...] = (
    _ids, _raw_ids_and_rss, _durations, _texts, _resources, _states, _times,
)


def assemble_frame(out: dict[str, pd.Series], n: int) -> pd.DataFrame:
    """The schema's columns in order, from ``out`` (already in the schema's dtypes) or all-missing.

    Args:
        out: Finished columns by schema name.
        n: Number of rows.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.
    """
    if "mem_used_bytes" in out and "req_mem_bytes" in out:  # MaxRSS × NTasks can pass what the job could hold
        out["mem_used_bytes"] = gpu_usage.bounded(out["mem_used_bytes"], out["req_mem_bytes"], out["max_rss_bytes"])
    return _assemble(out, n)
