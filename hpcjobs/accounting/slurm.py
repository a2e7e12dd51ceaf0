"""Slurm accounting ingest: ``sacct --parsable2`` text and ``sacct --json`` → the accounting schema.

The text reader is vectorised: pyarrow reads the ``|``-separated text, pyarrow compute
kernels parse the high-cardinality columns (ids, times, durations, MaxRSS), and the
low-cardinality ones (State, ExitCode, Timelimit, ReqMem, TRES, Comment) are parsed once per
distinct value with the hand-tested scalar parsers of :mod:`hpcjobs.formats.slurm` and
spread back with ``take``. There is no per-line Python loop.

Conventions (see :mod:`hpcjobs.accounting.schema` for the columns):

* One row per job, array task, collapsed pending array range, het component and step.
  ``job_id`` is the job part of the id (``3_9`` for the step ``3_9.batch``), ``step`` the step.
* Times are printed by sacct in the time zone of the sacct process; :func:`query_sacct` runs it
  with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard``. ``Unknown``/``None`` → NaT. Epoch
  seconds (``SLURM_TIME_FORMAT=%s``) are read too.
* ``max_rss_bytes`` of a job row that has none (sacct leaves MaxRSS blank on job rows) is the
  maximum over its steps. That is the peak of the largest single task, a lower bound of the
  job's true peak when steps overlap, and the quantity comparable with a per-task request —
  the same choice ``seff`` makes.
* ``req_mem_bytes``: ReqMem for the whole job (21.08+), old ``Mc``/``Mn`` scaled by CPUs/nodes,
  else the ``mem=`` of ReqTRES. ``cpus``/``nodes``/``gpus``: allocated, else requested.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from hpcjobs import states as st
from hpcjobs.accounting.cache import WindowCache, window_key
from hpcjobs.accounting.schema import COLUMNS, conform, empty_frame
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.formats import slurm as fs
from hpcjobs.process import CommandResult, run_command

#: Fields asked of sacct for accounting; Comment last because it is free text.
SACCT_ACCOUNTING_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "State",
    "ExitCode", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Timelimit", "NNodes", "AllocCPUS",
    "ReqCPUS", "AllocTRES", "ReqTRES", "ReqMem", "MaxRSS", "TotalCPU", "NodeList", "Comment",
)

_SACCT_TIME_FMT = "%Y-%m-%dT%H:%M:%S"
_INT64 = pa.int64()
_THREADED_FROM_ROWS = 50_000  # below this, threads cost more than they save
_STATE_CODES = {name: i for i, name in enumerate(st.ALL_STATES)}


def sacct_accounting_argv(
    *,
    users: Sequence[str] | None = None,
    accounts: Sequence[str] | None = None,
    all_users: bool = False,
    job_ids: Sequence[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    states: Sequence[str] | None = None,
    steps: bool = True,
    duplicates: bool = False,
    fields: Sequence[str] = SACCT_ACCOUNTING_FIELDS,
) -> list[str]:
    """The sacct command for an accounting query.

    Args:
        users: ``--user`` list (sacct's default is the caller).
        accounts: ``--accounts`` list.
        all_users: ``--allusers`` (root or operator privileges needed to see others' jobs).
        job_ids: ``--jobs`` list.
        start: ``--starttime``: jobs active at or after it (timezone-aware times are sent in UTC).
        end: ``--endtime``: jobs active before it.
        states: ``--state`` list (with a state, sacct selects jobs in that state within the window).
        steps: Include step rows; ``False`` adds ``--allocations``.
        duplicates: ``--duplicates``: also earlier records of requeued jobs.
        fields: ``--format`` fields.

    Returns:
        The argv list.
    """
    argv = ["sacct", "--noheader", "--parsable2", "--format=" + ",".join(fields)]
    if all_users:
        argv.append("--allusers")
    if users:
        argv.append("--user=" + ",".join(users))
    if accounts:
        argv.append("--accounts=" + ",".join(accounts))
    if job_ids:
        argv.append("--jobs=" + ",".join(job_ids))
    if states:
        argv.append("--state=" + ",".join(states))
    if not steps:
        argv.append("--allocations")
    if duplicates:
        argv.append("--duplicates")
    if start is not None:
        argv.append("--starttime=" + _sacct_time(start))
    if end is not None:
        argv.append("--endtime=" + _sacct_time(end))
    return argv


def _sacct_time(t: datetime) -> str:
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.strftime(_SACCT_TIME_FMT)


# ---------------------------------------------------------------------------
# Arrow helpers


def _str_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(pd.arrays.ArrowStringArray(arr), copy=False)


def _int_series(arr: pa.Array | pa.ChunkedArray | np.ndarray, mask: np.ndarray | None = None) -> pd.Series:
    if isinstance(arr, np.ndarray):
        values = arr.astype(np.int64, copy=False)
        mask = np.zeros(len(values), bool) if mask is None else mask
    else:
        arr = pc.cast(arr, pa.int64())
        values = np.asarray(pc.fill_null(arr, 0).to_numpy(), dtype=np.int64)
        mask = pc.is_null(arr).to_numpy(zero_copy_only=False)
    return pd.Series(pd.arrays.IntegerArray(values, mask), copy=False)


def _category_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    enc = arr.combine_chunks().dictionary_encode() if isinstance(arr, pa.ChunkedArray) else arr.dictionary_encode()
    codes = pc.fill_null(enc.indices, -1).to_numpy()
    cats = enc.dictionary.to_pylist()
    if "" in cats:  # blank means absent
        codes = np.where(codes == cats.index(""), -1, codes)
        codes = np.where(codes > cats.index(""), codes - 1, codes)
        cats.remove("")
    return pd.Series(pd.Categorical.from_codes(codes, categories=cats, validate=False), copy=False)


class _Bytes:
    """A string column as numpy bytes and offsets, for parsing fixed-position formats without Python loops."""

    def __init__(self, arr: pa.Array | pa.ChunkedArray) -> None:
        a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        self.arr = a.cast(pa.large_string())
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
    a = arr.combine_chunks()
    length = pc.binary_length(a)
    iso = pc.equal(length, 19)
    try:
        all_iso = pc.all(iso).as_py() and not a.null_count
        ts = pc.cast(a if all_iso else pc.if_else(iso, a, pa.scalar(None, a.type)), pa.timestamp("s"))
    except pa.ArrowInvalid:  # 19 characters but not a time: null it, value by value
        ts = pc.strptime(a, format=_SACCT_TIME_FMT, unit="s", error_is_null=True)
    odd = pc.and_(pc.is_null(ts), pc.invert(pc.is_in(length, value_set=pa.array([4, 7], pa.int32()))))
    if pc.any(odd).as_py():  # epoch seconds (SLURM_TIME_FORMAT=%s)
        ts = pc.coalesce(ts, pc.cast(_int_or_null(pc.if_else(odd, a, pa.scalar(None, a.type))), pa.timestamp("s")))
    ts = ts.cast(pa.timestamp("ns"))
    if tz != "UTC":
        ts = pc.assume_timezone(ts, tz, ambiguous="earliest", nonexistent="earliest")
    return ts.cast(pa.timestamp("ns", tz="UTC"))


def _durations_ns(arr: pa.ChunkedArray) -> pa.Array:
    """``[D-]HH:MM:SS`` / ``MM:SS.mmm`` → duration[ns]; anything else (UNLIMITED, blank) → null."""
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
    t = _Bytes(arr)
    factor = np.where(t.valid, _FACTOR_BY_BYTE[t.at(-1)], 1.0)
    try:
        value = pc.cast(pc.utf8_rtrim(t.arr, characters="KMGTPE"), pa.float64())
    except pa.ArrowInvalid:  # junk such as "16?": the scalar parser, once per distinct value
        return _spread(_encoded(arr), lambda v: fs.parse_memory(v).bytes, pa.int64())
    return pc.cast(pc.round(pc.multiply(value, pa.array(factor))), pa.int64())


def _seconds_to_duration(arr: pa.ChunkedArray | pa.Array) -> pa.Array:
    if pa.types.is_integer(arr.type):
        return pc.cast(pc.multiply(pc.cast(arr, pa.int64()), 1_000_000_000), pa.duration("ns"))
    ns = pc.round(pc.multiply(pc.cast(arr, pa.float64()), 1e9))
    return pc.cast(pc.cast(ns, pa.int64()), pa.duration("ns"))


# ---------------------------------------------------------------------------
# sacct --parsable2


def _read_table(source: str | bytes | os.PathLike[str], names: list[str] | None) -> pa.Table:
    """Read the ``|``-separated text as strings; ``names`` ``None``: take them from a header line."""
    if isinstance(source, (str, bytes)):
        data = source.encode() if isinstance(source, str) else source
        first = data[: data.find(b"\n")] if b"\n" in data else data
        stream: Any = io.BytesIO(data)
    else:
        with open(source, "rb") as fh:
            first = fh.readline()
        stream = os.fspath(source)
    header = [f.strip().lower() for f in first.rstrip(b"\r\n").decode(errors="replace").split("|")]
    if names is None:
        if header[0] != "jobid":
            raise SchedulerOutputError("no field list given and the text has no sacct header line")
        names = header
    skip = 1 if header[0] == names[0] else 0  # a header line (sacct without --noheader)
    convert = pacsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, null_values=[""], strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    try:
        return pacsv.read_csv(
            stream,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=skip),
            parse_options=pacsv.ParseOptions(delimiter="|", quote_char=False, escape_char=False),
            convert_options=convert,
        )
    except pa.ArrowInvalid as exc:
        raise SchedulerOutputError(f"sacct output does not have the {len(names)} fields asked for: {exc}") from exc


def read_sacct_parsable2(
    source: str | bytes | os.PathLike[str],
    fields: Sequence[str] | None = SACCT_ACCOUNTING_FIELDS,
    *,
    tz: str = "UTC",
    cluster: str | None = None,
) -> pd.DataFrame:
    """Read ``sacct --parsable2 --noheader --format=<fields>`` output into the accounting schema.

    Args:
        source: The text (``str``/``bytes``) or a path to a file holding it. A header line is skipped.
        fields: The ``--format`` fields, in order (names as in ``sacct --helpformat``, any case).
            Any subset works; missing schema columns are NA. ``None``: read them from the header line
            sacct prints without ``--noheader``.
        tz: Time zone the times were printed in (the sacct process's ``TZ``).
        cluster: Cluster name for the rows when ``Cluster`` is not among the fields.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        SchedulerOutputError: A line has more or fewer fields than ``fields``, or a JobID is malformed.
    """
    if isinstance(source, (str, bytes)) and not source.strip():
        return empty_frame()
    table = _read_table(source, [f.lower() for f in fields] if fields is not None else None)
    names = table.column_names
    n = table.num_rows
    if n == 0:
        return empty_frame()
    col: dict[str, pa.ChunkedArray] = {name: table.column(name) for name in names}
    if "jobid" not in col:
        raise SchedulerOutputError("sacct fields must include JobID")
    out: dict[str, pd.Series] = {"scheduler": pd.Series(pd.Categorical.from_codes(np.zeros(n, np.int8), ["slurm"]))}
    if "cluster" not in col and cluster is not None:
        out["cluster"] = pd.Series(pd.Categorical.from_codes(np.zeros(n, np.int8), [cluster]))
    tasks = [_ids, _raw_ids_and_rss, _texts, _states, _times, _durations, _resources]
    if n < _THREADED_FROM_ROWS:
        for task in tasks:
            out.update(task(col, tz))
    else:  # the kernels release the GIL: independent column groups run side by side
        with ThreadPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 1)) as pool:
            for part in pool.map(lambda task: task(col, tz), tasks):
                out.update(part)
    return _assemble(out, n)


Columns = dict[str, pa.ChunkedArray]


def _encoded(arr: pa.ChunkedArray) -> tuple[pa.Array, list[Any]]:
    """Dictionary-encode: (indices with nulls pointing one past the end, distinct values)."""
    enc = (arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr).dictionary_encode()
    values = enc.dictionary.to_pylist()
    return pc.fill_null(enc.indices, len(values)), values


def _spread(encoded: tuple[pa.Array, list[Any]], fn: Callable[[Any], Any], typ: pa.DataType) -> pa.Array:
    """``fn`` applied once per distinct value (and once to ``None``), spread back over the rows."""
    idx, values = encoded
    return pa.array([fn(v) for v in values] + [fn(None)], type=typ).take(idx)


def _ids(col: Columns, tz: str) -> dict[str, pd.Series]:
    """JobID: ``123``, ``123_4``, ``123_[5-9%2]``, ``123+1``, each optionally ``.step``."""
    out: dict[str, pd.Series] = {}
    jt = _Bytes(col["jobid"])
    L = jt.len
    dot, us, plus, lb, rb = jt.find_all("._+[]")
    job_len = np.where(dot >= 0, dot, L)
    plus = np.where(plus < job_len, plus, -1)  # a '+' after the dot is a truncated step name
    base_end = np.minimum.reduce([np.where(us >= 0, us, job_len), np.where(plus >= 0, plus, job_len), job_len])
    is_spec = (us >= 0) & (lb == us + 1) & (rb > lb)
    is_task = (us >= 0) & ~is_spec
    is_het = plus >= 0
    bad = ~jt.valid | (jt.at(0) - np.uint8(48) > 9) | (base_end < 1) | ((dot >= 0) & (dot + 1 >= L))
    try:
        task = pc.cast(jt.slice(us + 1, np.where(is_het, plus, job_len), is_task), pa.int64())
        het = pc.cast(jt.slice(plus + 1, job_len, is_het), pa.int64())
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
    is_step = np.asarray(pc.fill_null(pc.greater_equal(pc.find_substring(col["jobid"], "."), 0), False))
    job_key: Any = col["jobid"]
    if "jobidraw" in col:
        rt = _Bytes(col["jobidraw"])
        rdot = rt.find(".")
        raw = rt.slice(0, np.where(rdot >= 0, rdot, rt.len), rt.valid) if (rdot >= 0).any() else rt.arr
        out["job_id_raw"] = _str_series(raw)
        job_key = _int_or_null(raw)
    if "maxrss" in col:
        rss = _memory_bytes(col["maxrss"])
        if is_step.any():
            if "jobidraw" not in col:  # key by the job part of JobID
                jt = _Bytes(col["jobid"])
                dot = jt.find(".")
                job_key = jt.slice(0, np.where(dot >= 0, dot, jt.len), jt.valid)
            rss = _fill_job_max(rss, job_key, is_step)
        out["max_rss_bytes"] = _int_series(rss)
    return out


def _fill_job_max(values: pa.Array, key: pa.Array, is_step: np.ndarray) -> pa.Array:
    """Job rows lacking a value get the max over their steps (rows with the same key).

    sacct prints each job row followed by its steps; when the rows are in that order (checked),
    the max is one ``reduceat`` over the segments; otherwise a hash group-by does it.
    """
    job_rows = np.flatnonzero(~is_step)
    v = np.asarray(pc.fill_null(values, -1))
    if len(job_rows) and job_rows[0] == 0:
        parent = job_rows[np.cumsum(~is_step) - 1]
        steps = np.flatnonzero(is_step)
        step_keys, parent_keys = key.take(pa.array(steps)), key.take(pa.array(parent[steps]))
        if pc.all(pc.equal(step_keys, parent_keys)).as_py() is not False:
            best = np.maximum.reduceat(np.where(is_step, v, -1), job_rows)
            filled = v.copy()
            filled[job_rows] = np.where(v[job_rows] >= 0, v[job_rows], best)
            return pa.array(filled, mask=filled < 0)
    step_mask = pa.array(is_step)
    per_job = pa.table({"k": key, "v": values}).filter(step_mask).group_by("k").aggregate([("v", "max")])
    from_steps = per_job.column("v_max").take(pc.index_in(key, value_set=per_job.column("k")))
    return pc.if_else(step_mask, values, pc.coalesce(values, from_steps))


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
    if "comment" in col:  # the tag (hpcjobs.states.parse_job_tag), once per distinct comment
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
        out["state_raw"] = _str_series(col["state"])
        codes = _spread(_encoded(col["state"]), lambda v: _STATE_CODES[fs.normalize_state(v)], pa.int8())
        out["state"] = pd.Series(pd.Categorical.from_codes(codes.to_numpy(), dtype=COLUMNS["state"]))
    if "exitcode" in col:
        enc = _encoded(col["exitcode"])
        out["exit_code"] = _int_series(_spread(enc, lambda v: fs.parse_exit_code(v)[0], pa.int64()))
        out["exit_signal"] = _int_series(_spread(enc, lambda v: fs.parse_exit_code(v)[1], pa.int64()))
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
        secs = _spread(_encoded(col["timelimit"]), fs.parse_duration, pa.float64())
        out["time_limit"] = pd.Series(_seconds_to_duration(secs).to_pandas())
    if "totalcpu" in col:
        out["cpu_time"] = pd.Series(_durations_ns(col["totalcpu"]).to_pandas())
    return out


def _resources(col: Columns, tz: str) -> dict[str, pd.Series]:
    """CPUs, nodes, GPUs (count, type) and requested memory: allocated, else requested."""
    out: dict[str, pd.Series] = {}
    summaries: dict[str, tuple[pa.Array, list[fs.TresSummary]]] = {}

    def tres(field: str, attr: str, typ: pa.DataType = _INT64) -> pa.Array | None:
        if field not in col:
            return None
        if field not in summaries:
            idx, values = _encoded(col[field])
            summaries[field] = (idx, [fs.summarize_tres(v) for v in values] + [fs.TresSummary()])
        idx, found = summaries[field]
        return pa.array([getattr(x, attr) for x in found], type=typ).take(idx)

    def first(*arrays: Any) -> Any:
        present = [a for a in arrays if a is not None]
        return pc.coalesce(*present) if len(present) > 1 else (present[0] if present else None)

    def count(field: str) -> pa.ChunkedArray | None:  # 0 (pending, interim rows) means not known yet
        if field not in col:
            return None
        value = _int_or_null(col[field])
        return pc.if_else(pc.equal(value, 0), pa.scalar(None, pa.int64()), value)

    cpus = first(count("alloccpus"), tres("alloctres", "cpus"), count("ncpus"), tres("reqtres", "cpus"),
                 count("reqcpus"))
    nodes = first(count("nnodes"), tres("alloctres", "nodes"), tres("reqtres", "nodes"))
    gpus = first(tres("alloctres", "gpus"), tres("reqtres", "gpus"))
    gpu_type = first(tres("alloctres", "gpu_type", pa.string()), tres("reqtres", "gpu_type", pa.string()))
    for name, arr in (("cpus", cpus), ("nodes", nodes), ("gpus", gpus)):
        if arr is not None:
            out[name] = _int_series(arr)
    if gpu_type is not None:
        out["gpu_type"] = _category_series(gpu_type)
    req_mem = None
    if "reqmem" in col:  # whole job since 21.08; before: per CPU (Mc) or per node (Mn)
        enc = _encoded(col["reqmem"])
        mem = _spread(enc, lambda v: fs.parse_memory(v).bytes, pa.int64())
        per = _spread(enc, lambda v: {"cpu": 1, "node": 2}.get(fs.parse_memory(v).per or "", 0), pa.int8())
        if pc.any(pc.not_equal(per, 0)).as_py():
            one = pa.scalar(1, pa.int64())
            per_cpu = pc.coalesce(cpus, one) if cpus is not None else one
            per_node = pc.coalesce(nodes, one) if nodes is not None else one
            mem = pc.multiply(mem, pc.if_else(pc.equal(per, 1), per_cpu, pc.if_else(pc.equal(per, 2), per_node, one)))
        req_mem = mem
    req_mem = first(req_mem, tres("reqtres", "mem_bytes"))
    if req_mem is not None:
        out["req_mem_bytes"] = _int_series(req_mem)
    return out


# ---------------------------------------------------------------------------
# sacct --json (21.08/22.05 dbv0.0.37/38 and 23.02+ data_parser shapes)


def _num(v: Any) -> Any:
    """A plain number, or the ``number`` of a 23.02+ ``{set, infinite, number}`` object (None if unset)."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        return v.get("number")
    return v


def _first_state(v: Any) -> str:
    if isinstance(v, dict):
        v = v.get("current")
    if isinstance(v, list):
        return ",".join(str(s) for s in v)
    return str(v) if v is not None else ""


def _json_exit(v: Any) -> tuple[int | None, int | None]:
    """``exit_code`` of either generation → (code, signal), as text sacct would print them."""
    if not isinstance(v, dict):
        return (int(v), 0) if isinstance(v, int) else (None, None)
    status = v.get("status")
    statuses = status if isinstance(status, list) else [status]
    code = _num(v.get("return_code"))
    sig_obj = v.get("signal") or {}
    sig = _num(sig_obj.get("id", sig_obj.get("signal_id"))) if isinstance(sig_obj, dict) else None
    if "PENDING" in statuses or "INVALID" in statuses:
        return None, None
    if sig is None and ("SIGNALED" in statuses or "CORE_DUMPED" in statuses):
        return (code if code is not None else 0), None
    return (code if code is not None else 0), (sig if sig is not None else 0)


def _tres_list(v: Any) -> list[dict[str, Any]]:
    return v if isinstance(v, list) else []


def _tres_counts(items: list[dict[str, Any]]) -> dict[str, Any]:
    """cpu/mem(MB)/node/gpus/gpu_type from a JSON TRES list."""
    out: dict[str, Any] = {}
    typed: dict[str, int] = {}
    for t in items:
        kind, name, count = t.get("type"), t.get("name"), _num(t.get("count"))
        if kind in ("cpu", "mem", "node") and count is not None:
            out[kind] = count
        elif kind == "gres" and name and count is not None:
            if name == "gpu":
                out["gpus"] = count
            elif name.startswith("gpu:"):
                typed[name[4:]] = count
    if typed:
        out.setdefault("gpus", sum(typed.values()))
        out["gpu_type"] = ",".join(sorted(typed))
    return out


def _step_max_rss(step: dict[str, Any]) -> int | None:
    req = (step.get("tres") or {}).get("requested") or {}
    for t in _tres_list(req.get("max")):
        if t.get("type") == "mem":
            count = _num(t.get("count"))
            return count if isinstance(count, int) and count >= 0 else None
    return None


def _cpu_seconds(time: dict[str, Any]) -> float | None:
    total = time.get("total")
    if isinstance(total, dict) and ("seconds" in total or "microseconds" in total):
        return (_num(total.get("seconds")) or 0) + (_num(total.get("microseconds")) or 0) / 1e6
    return None


def _epoch(v: Any) -> int | None:
    v = _num(v)
    return v if isinstance(v, int) and v > 0 else None


def _json_job_id(job: dict[str, Any]) -> str:
    array = job.get("array") or {}
    array_job = _num(array.get("job_id")) or 0
    task = _num(array.get("task_id"))
    het = job.get("het") or {}
    offset = _num(het.get("job_offset"))
    if array_job and task is not None:
        return f"{array_job}_{task}"
    if array_job and isinstance(array.get("task"), str) and array["task"]:
        return f"{array_job}_[{array['task'].strip('[]')}]"
    if offset is not None and _num(het.get("job_id")):
        return f"{_num(het['job_id'])}+{offset}"
    return str(job.get("job_id"))


def read_sacct_json(source: str | bytes | dict[str, Any] | os.PathLike[str]) -> pd.DataFrame:
    """Read ``sacct --json`` output (21.08 through 25.x shapes) into the accounting schema.

    One row per job and one per step. Job rows without their own CPU time (22.05 reports 0)
    take the sum over steps, as text sacct does; ``max_rss_bytes`` of a job is the max over steps
    (step ``tres.requested.max`` ``mem``, bytes). ``state_raw`` joins a 23.11+ state list with ``,``.

    Args:
        source: The JSON text, its parsed object, or a path to a file.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        SchedulerOutputError: Not sacct JSON (no ``jobs`` list).
    """
    import json

    if isinstance(source, dict):
        doc = source
    else:
        text = Path(source).read_bytes() if isinstance(source, os.PathLike) else source
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise SchedulerOutputError(f"sacct --json output is not JSON: {exc}") from exc
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise SchedulerOutputError("sacct --json output has no 'jobs' list")
    rows: list[dict[str, Any]] = []
    for job in jobs:
        job_id = _json_job_id(job)
        jid = fs.parse_job_id(job_id)
        t = job.get("time") or {}
        tres = job.get("tres") or {}
        alloc, req = _tres_counts(_tres_list(tres.get("allocated"))), _tres_counts(_tres_list(tres.get("requested")))
        required = job.get("required") or {}
        assoc = job.get("association") or {}
        comment = job.get("comment")
        comment = comment.get("job") if isinstance(comment, dict) else comment
        limit = _num(t.get("limit"))
        code, sig = _json_exit(job.get("exit_code"))
        mem_mb = req.get("mem")
        base = {
            "job_id": job_id, "array_job_id": jid.base_id if jid.is_array else None,
            "array_task_id": jid.array_task_id, "array_task_spec": jid.array_task_spec,
            "het_offset": jid.het_offset, "user": job.get("user") or assoc.get("user"),
            "account": job.get("account") or assoc.get("account"), "partition": job.get("partition") or None,
            "qos": job.get("qos"), "cluster": job.get("cluster") or assoc.get("cluster"),
            "submit_time": _epoch(t.get("submission")), "eligible_time": _epoch(t.get("eligible")),
            "comment": comment or None,
        }
        steps = [s for s in job.get("steps") or [] if isinstance(s, dict)]
        step_rss = [r for r in (_step_max_rss(s) for s in steps) if r is not None]
        step_cpu = [c for c in (_cpu_seconds(s.get("time") or {}) for s in steps) if c is not None]
        job_cpu = _cpu_seconds(t)
        state_raw = _first_state(job.get("state"))
        rows.append({
            **base, "job_id_raw": str(job.get("job_id")), "step": None, "job_name": job.get("name"),
            "state_raw": state_raw, "exit_code": code, "exit_signal": sig,
            "start_time": _epoch(t.get("start")), "end_time": _epoch(t.get("end")),
            "elapsed_s": _num(t.get("elapsed")), "time_limit_s": limit * 60 if isinstance(limit, int) else None,
            "nodes": alloc.get("node", _num(job.get("allocation_nodes"))),
            "cpus": alloc.get("cpu", req.get("cpu", _num(required.get("CPUs")))),
            "gpus": alloc.get("gpus", req.get("gpus")), "gpu_type": alloc.get("gpu_type", req.get("gpu_type")),
            "req_mem_bytes": mem_mb * 1024**2 if isinstance(mem_mb, int) else None,
            "max_rss_bytes": max(step_rss) if step_rss else None,
            "cpu_s": job_cpu if job_cpu else (sum(step_cpu) if step_cpu else job_cpu),
            "node_list": job.get("nodes"),
        })
        for s in steps:
            st_time = s.get("time") or {}
            step_info = s.get("step") or {}
            step_id = str(step_info.get("id", ""))
            step_name = step_id.split(".", 1)[1] if "." in step_id else step_id
            s_alloc = _tres_counts(_tres_list((s.get("tres") or {}).get("allocated")))
            s_code, s_sig = _json_exit(s.get("exit_code"))
            rows.append({
                **base, "job_id_raw": str(job.get("job_id")), "step": step_name, "job_name": step_info.get("name"),
                "state_raw": _first_state(s.get("state")), "exit_code": s_code, "exit_signal": s_sig,
                "start_time": _epoch(st_time.get("start")), "end_time": _epoch(st_time.get("end")),
                "submit_time": _epoch(st_time.get("start")), "eligible_time": None,  # as text sacct prints steps
                "elapsed_s": _num(st_time.get("elapsed")), "time_limit_s": None,
                "nodes": _num((s.get("nodes") or {}).get("count")), "cpus": s_alloc.get("cpu"),
                "gpus": s_alloc.get("gpus"), "gpu_type": s_alloc.get("gpu_type"), "req_mem_bytes": None,
                "max_rss_bytes": _step_max_rss(s), "cpu_s": _cpu_seconds(st_time),
                "node_list": (s.get("nodes") or {}).get("range"),
            })
    if not rows:
        return empty_frame()
    df = pd.DataFrame(rows)
    df["scheduler"] = "slurm"
    df["state"] = df["state_raw"].map(lambda v: fs.normalize_state(v.split(",")[0]))
    for name in ("submit_time", "eligible_time", "start_time", "end_time"):
        df[name] = pd.to_datetime(df[name].astype("Float64"), unit="s", utc=True)
    df["wait"] = df["start_time"] - df["eligible_time"].fillna(df["submit_time"])
    for name, src in (("elapsed", "elapsed_s"), ("time_limit", "time_limit_s"), ("cpu_time", "cpu_s")):
        df[name] = pd.to_timedelta(df[src].astype("Float64"), unit="s")
    tags = df["comment"].map(lambda c: st.parse_job_tag(c) if isinstance(c, str) else None)
    df["sweep_id"] = tags.map(lambda t: t.sweep_id if t else None)
    df["chunk"] = tags.map(lambda t: t.chunk if t else None)
    return conform(df)


# ---------------------------------------------------------------------------
# Windowed, cached queries

Runner = Callable[..., CommandResult]
_ONE_DAY = timedelta(days=1)
_ONE_HOUR = timedelta(hours=1)


def _windows(start: datetime, end: datetime, size: timedelta) -> list[tuple[datetime, datetime]]:
    """Windows of ``size`` aligned to multiples of ``size`` since the epoch (UTC), covering [start, end)."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    k = (start - epoch) // size
    out = []
    ws = epoch + k * size
    while ws < end:
        out.append((ws, ws + size))
        ws += size
    return out


def _aware(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def query_sacct(
    start: datetime,
    end: datetime | None = None,
    *,
    users: Sequence[str] | None = None,
    accounts: Sequence[str] | None = None,
    all_users: bool = False,
    job_ids: Sequence[str] | None = None,
    states: Sequence[str] | None = None,
    steps: bool = True,
    window: timedelta = _ONE_DAY,
    cache: WindowCache | bool | None = True,
    margin: timedelta = _ONE_HOUR,
    now: datetime | None = None,
    runner: Runner | None = None,
    timeout: float = 300.0,
) -> pd.DataFrame:
    """Run sacct over [start, end) in windows and return one accounting DataFrame.

    Windows are aligned to multiples of ``window`` (UTC midnight for days) so different reports
    share them. A window that ended more than ``margin`` before ``now`` is final: it is read from
    the cache when there, else queried and stored. sacct selects jobs *active* in a window, so a
    job spanning windows comes back from each; rows are de-duplicated on (``job_id_raw``, ``job_id``,
    ``step``), the later window winning, and rows not active within [start, end) are dropped.

    Args:
        start: Start of the period (naive times are UTC).
        end: End of the period; default ``now``.
        users: Passed to :func:`sacct_accounting_argv`, like ``accounts``, ``all_users``, ``job_ids``,
            ``states`` and ``steps``.
        window: Window length.
        cache: A :class:`WindowCache`, ``True`` for the default one, ``False``/``None`` for none.
        margin: How long after a window's end its records are considered final.
        now: The current time (tests).
        runner: Replacement for :func:`hpcjobs.process.run_command` (tests).
        timeout: Seconds allowed per sacct call.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        CommandError: sacct failed. CommandTimeout: sacct ran past ``timeout``.
        SchedulerOutputError: sacct printed something unreadable.
    """
    run = runner or run_command
    now_ = _aware(now or datetime.now(timezone.utc))
    start_, end_ = _aware(start), _aware(end or now_)
    store = WindowCache() if cache is True else (cache or None)
    shape = sacct_accounting_argv(users=users, accounts=accounts, all_users=all_users, job_ids=job_ids,
                                  states=states, steps=steps)
    env = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    frames = []
    for ws, we in _windows(start_, end_, window):
        final = we + margin < now_
        key = window_key(shape, ws, we)
        df = store.load(key) if (store is not None and final) else None
        if df is None:
            argv = sacct_accounting_argv(users=users, accounts=accounts, all_users=all_users, job_ids=job_ids,
                                         states=states, steps=steps, start=ws, end=we)
            result = run(argv, timeout=timeout, env=env)
            df = read_sacct_parsable2(result.stdout, SACCT_ACCOUNTING_FIELDS)
            if store is not None and final:
                store.store(key, df)
        frames.append(df)
    if not frames:
        return empty_frame()
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    df = df.drop_duplicates(subset=["job_id_raw", "job_id", "step"], keep="last")
    began = df["start_time"].fillna(df["eligible_time"]).fillna(df["submit_time"])
    active = (began.isna() | (began < end_)) & (df["end_time"].isna() | (df["end_time"] >= start_))
    return conform(df[active])
