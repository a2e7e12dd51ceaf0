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
from hpcjobs.states import _TAG_RE

#: Fields asked of sacct for accounting; Comment last because it is free text.
SACCT_ACCOUNTING_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "State",
    "ExitCode", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Timelimit", "NNodes", "AllocCPUS",
    "ReqCPUS", "AllocTRES", "ReqTRES", "ReqMem", "MaxRSS", "TotalCPU", "NodeList", "Comment",
)

_SACCT_TIME_FMT = "%Y-%m-%dT%H:%M:%S"
_DURATION_RE = r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$"
_MEM_RE = r"^(?P<n>\d+(?:\.\d+)?)(?P<u>[KMGTPE]?)[cn]?$"
_UNITS = pa.array(list(fs.UNIT_FACTORS))
_UNIT_FACTORS = pa.array([float(v) for v in fs.UNIT_FACTORS.values()], pa.float64())
_INT64 = pa.int64()
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


def _str_series(arr: pa.ChunkedArray) -> pd.Series:
    return pd.Series(pd.arrays.ArrowStringArray(arr.cast(pa.large_string())))


def _int_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    arr = pc.cast(arr, pa.int64())
    values = pc.fill_null(arr, 0).to_numpy()
    mask = pc.is_null(arr).to_numpy(zero_copy_only=False)
    return pd.Series(pd.arrays.IntegerArray(np.asarray(values, dtype=np.int64), mask))


def _category_series(arr: pa.ChunkedArray) -> pd.Series:
    enc = arr.combine_chunks().dictionary_encode() if isinstance(arr, pa.ChunkedArray) else arr
    codes = pc.fill_null(enc.indices, -1).to_numpy()
    return pd.Series(pd.Categorical.from_codes(codes, categories=enc.dictionary.to_pylist()))


def _map_distinct(arr: pa.ChunkedArray, fn: Callable[[str | None], Any], typ: pa.DataType) -> pa.Array:
    """Apply ``fn`` once per distinct value of ``arr`` and spread the results back."""
    enc = arr.combine_chunks().dictionary_encode()
    mapped = pa.array([fn(v) for v in enc.dictionary.to_pylist()] + [fn(None)], type=typ)
    idx = pc.fill_null(enc.indices, len(enc.dictionary))
    return mapped.take(idx)


def _blank_to_null(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)


def _int_or_null(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_integer(arr.type):
        return arr
    digits = pc.match_substring_regex(arr, r"^\d+$")
    return pc.cast(pc.if_else(digits, arr, pa.scalar(None, arr.type)), pa.int64())


def _parse_times(arr: pa.ChunkedArray, tz: str) -> pa.ChunkedArray:
    """ISO ``YYYY-MM-DDTHH:MM:SS`` or epoch seconds; Unknown/None/blank → null; as UTC ns."""
    if pa.types.is_timestamp(arr.type):
        ts = arr
    else:
        ts = pc.strptime(arr, format=_SACCT_TIME_FMT, unit="s", error_is_null=True)
        failed = pc.and_(pc.is_null(ts), pc.is_valid(arr))
        if pc.any(failed).as_py() and pc.any(pc.match_substring_regex(arr.filter(failed), r"^\d+$")).as_py():
            epoch = pc.cast(_int_or_null(arr), pa.timestamp("s"))
            ts = pc.coalesce(ts, epoch)
            return pc.cast(ts, pa.timestamp("ns")).cast(pa.timestamp("ns", tz="UTC"))
    if tz == "UTC":
        return pc.cast(pc.cast(ts, pa.timestamp("ns")), pa.timestamp("ns", tz="UTC"))
    local = pc.assume_timezone(pc.cast(ts, pa.timestamp("ns")), tz, ambiguous="earliest", nonexistent="earliest")
    return pc.cast(local, pa.timestamp("ns", tz="UTC"))


def _durations_ns(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    """``[D-][HH:]MM:SS[.fff]`` → duration[ns]; anything else (UNLIMITED, blank) → null."""
    parts = pc.extract_regex(arr, _DURATION_RE)

    def num(name: str) -> pa.ChunkedArray:
        field = pc.struct_field(parts, name)
        return pc.cast(pc.binary_join_element_wise("0", field, ""), pa.int64())

    secs = pc.cast(pc.struct_field(parts, "s"), pa.float64())
    whole = pc.add(pc.add(pc.multiply(num("d"), 86400), pc.multiply(num("h"), 3600)), pc.multiply(num("m"), 60))
    total_ns = pc.add(pc.multiply(pc.cast(whole, pa.float64()), 1e9), pc.multiply(secs, 1e9))
    return pc.cast(pc.round(total_ns), pa.int64()).cast(pa.duration("ns"))


def _memory_bytes(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    """``1294440K``/``16G``/``0``/``891.26M`` → bytes (int64); ``16?``/blank → null."""
    parts = pc.extract_regex(arr, _MEM_RE)
    value = pc.cast(pc.struct_field(parts, "n"), pa.float64())
    factor = _UNIT_FACTORS.take(pc.index_in(pc.struct_field(parts, "u"), value_set=_UNITS))
    return pc.cast(pc.round(pc.multiply(value, factor)), pa.int64())


def _seconds_to_duration(arr: pa.ChunkedArray | pa.Array) -> pa.Array:
    ns = pc.round(pc.multiply(pc.cast(arr, pa.float64()), 1e9))
    return pc.cast(pc.cast(ns, pa.int64()), pa.duration("ns"))


# ---------------------------------------------------------------------------
# sacct --parsable2


def _read_table(source: str | bytes | os.PathLike[str], names: list[str]) -> pa.Table:
    if isinstance(source, (str, bytes)):
        data = source.encode() if isinstance(source, str) else source
        first = data[: data.find(b"\n")] if b"\n" in data else data
        skip = 1 if first.split(b"|", 1)[0].strip().lower() == names[0].encode() else 0  # a header line
        stream: Any = io.BytesIO(data)
    else:
        with open(source, "rb") as fh:
            head = fh.readline()
        skip = 1 if head.split(b"|", 1)[0].strip().lower() == names[0].encode() else 0
        stream = os.fspath(source)
    convert = pacsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, null_values=[""], strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    try:
        return pacsv.read_csv(
            stream,
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=skip, block_size=8 << 20),
            parse_options=pacsv.ParseOptions(delimiter="|", quote_char=False, escape_char=False),
            convert_options=convert,
        )
    except pa.ArrowInvalid as exc:
        raise SchedulerOutputError(f"sacct output does not have the {len(names)} fields asked for: {exc}") from exc


def read_sacct_parsable2(
    source: str | bytes | os.PathLike[str],
    fields: Sequence[str] = SACCT_ACCOUNTING_FIELDS,
    *,
    tz: str = "UTC",
    cluster: str | None = None,
) -> pd.DataFrame:
    """Read ``sacct --parsable2 --noheader --format=<fields>`` output into the accounting schema.

    Args:
        source: The text (``str``/``bytes``) or a path to a file holding it. A header line is skipped.
        fields: The ``--format`` fields, in order (names as in ``sacct --helpformat``, any case).
            Any subset works; missing schema columns are NA.
        tz: Time zone the times were printed in (the sacct process's ``TZ``).
        cluster: Cluster name for the rows when ``Cluster`` is not among the fields.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        SchedulerOutputError: A line has more or fewer fields than ``fields``, or a JobID is malformed.
    """
    names = [f.lower() for f in fields]
    if isinstance(source, (str, bytes)) and not source.strip():
        return empty_frame()
    table = _read_table(source, names)
    n = table.num_rows
    if n == 0:
        return empty_frame()
    col: dict[str, pa.ChunkedArray] = {name: table.column(name) for name in names}
    out: dict[str, pd.Series] = {}

    # ids
    if "jobid" not in col:
        raise SchedulerOutputError("sacct fields must include JobID")
    parts = pc.extract_regex(col["jobid"], fs._JOB_ID_RE.pattern)
    if parts.null_count:
        bad = col["jobid"].filter(pc.is_null(parts))[0].as_py()
        raise SchedulerOutputError(f"not a Slurm job id in sacct output: {bad!r}")
    job = pc.struct_field(parts, "job")
    base = pc.struct_field(parts, "base")
    step = _blank_to_null(pc.struct_field(parts, "step"))
    task = _int_or_null(pc.struct_field(parts, "task"))
    spec = _blank_to_null(pc.struct_field(parts, "spec"))
    is_array = pc.or_(pc.is_valid(task), pc.is_valid(spec))
    is_step = pc.is_valid(step)
    out["job_id"] = _str_series(job)
    out["array_job_id"] = _str_series(pc.if_else(is_array, base, pa.scalar(None, pa.string())))
    out["array_task_id"] = _int_series(task)
    out["array_task_spec"] = _str_series(spec)
    out["het_offset"] = _int_series(_int_or_null(pc.struct_field(parts, "het")))
    out["step"] = _str_series(step)
    if "jobidraw" in col:
        raw = pc.struct_field(pc.extract_regex(col["jobidraw"], r"^(?P<j>[^.]*)"), "j")
        out["job_id_raw"] = _str_series(raw)
        job_key: pa.ChunkedArray = _int_or_null(raw)
    else:
        job_key = job

    # plain text and categorical columns
    for field, name in (("jobname", "job_name"), ("nodelist", "node_list"), ("comment", "comment")):
        if field in col:
            out[name] = _str_series(col[field])
    for field, name in (("user", "user"), ("account", "account"), ("partition", "partition"),
                        ("qos", "qos"), ("cluster", "cluster")):
        if field in col:
            out[name] = _category_series(col[field])
    if "cluster" not in col and cluster is not None:
        out["cluster"] = pd.Series(pd.Categorical([cluster] * n))
    out["scheduler"] = pd.Series(pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), ["slurm"]))

    # state, exit code, comment tag: once per distinct value
    if "state" in col:
        out["state_raw"] = _str_series(col["state"])
        codes = _map_distinct(col["state"], lambda v: _STATE_CODES[fs.normalize_state(v)], pa.int8())
        out["state"] = pd.Series(pd.Categorical.from_codes(codes.to_numpy(), dtype=COLUMNS["state"]))
    if "exitcode" in col:
        out["exit_code"] = _int_series(_map_distinct(col["exitcode"], lambda v: fs.parse_exit_code(v)[0],
                                                     pa.int64()))
        out["exit_signal"] = _int_series(_map_distinct(col["exitcode"], lambda v: fs.parse_exit_code(v)[1],
                                                       pa.int64()))
    if "comment" in col:
        tag = pc.extract_regex(col["comment"], _TAG_RE.pattern)
        out["sweep_id"] = _category_series(pc.struct_field(tag, "sweep"))
        out["chunk"] = _int_series(_int_or_null(pc.struct_field(tag, "chunk")))

    # times
    times = {}
    for field, name in (("submit", "submit_time"), ("eligible", "eligible_time"), ("start", "start_time"),
                        ("end", "end_time")):
        if field in col:
            times[name] = _parse_times(col[field], tz)
            out[name] = pd.Series(times[name].to_pandas())
    if "start_time" in times and ("eligible_time" in times or "submit_time" in times):
        ref = times.get("eligible_time", times.get("submit_time"))
        if "eligible_time" in times and "submit_time" in times:
            ref = pc.coalesce(times["eligible_time"], times["submit_time"])
        out["wait"] = pd.Series(pc.subtract(times["start_time"], ref).to_pandas())

    # durations
    if "elapsedraw" in col:
        out["elapsed"] = pd.Series(_seconds_to_duration(_int_or_null(col["elapsedraw"])).to_pandas())
    elif "elapsed" in col:
        out["elapsed"] = pd.Series(_durations_ns(col["elapsed"]).to_pandas())
    if "timelimitraw" in col:  # minutes
        out["time_limit"] = pd.Series(_seconds_to_duration(pc.multiply(_int_or_null(col["timelimitraw"]), 60))
                                      .to_pandas())
    elif "timelimit" in col:
        secs = _map_distinct(col["timelimit"], fs.parse_duration, pa.float64())
        out["time_limit"] = pd.Series(_seconds_to_duration(secs).to_pandas())
    if "totalcpu" in col:
        out["cpu_time"] = pd.Series(_durations_ns(col["totalcpu"]).to_pandas())

    # resources: allocated TRES, else requested TRES, else the plain count fields
    def tres(field: str, attr: str, typ: pa.DataType = _INT64) -> pa.Array | None:
        if field not in col:
            return None
        return _map_distinct(col[field], lambda v: getattr(fs.summarize_tres(v), attr), typ)

    def first(*arrays: Any) -> Any:
        present = [a for a in arrays if a is not None]
        return pc.coalesce(*present) if present else None

    alloc_cpus = None
    if "alloccpus" in col:  # 0 while pending: fall through to the request
        alloc_cpus = _int_or_null(col["alloccpus"])
        alloc_cpus = pc.if_else(pc.equal(alloc_cpus, 0), pa.scalar(None, pa.int64()), alloc_cpus)
    cpus = first(alloc_cpus, tres("alloctres", "cpus"),
                 _int_or_null(col["ncpus"]) if "ncpus" in col else None, tres("reqtres", "cpus"),
                 _int_or_null(col["reqcpus"]) if "reqcpus" in col else None)
    nodes = first(_int_or_null(col["nnodes"]) if "nnodes" in col else None, tres("alloctres", "nodes"),
                  tres("reqtres", "nodes"))
    gpus = first(tres("alloctres", "gpus"), tres("reqtres", "gpus"))
    gpu_type = first(tres("alloctres", "gpu_type", pa.string()), tres("reqtres", "gpu_type", pa.string()))
    for name, arr in (("cpus", cpus), ("nodes", nodes), ("gpus", gpus)):
        if arr is not None:
            out[name] = _int_series(arr)
    if gpu_type is not None:
        out["gpu_type"] = _category_series(pa.chunked_array([gpu_type]))

    req_mem = None
    if "reqmem" in col:
        mem = _map_distinct(col["reqmem"], lambda v: fs.parse_memory(v).bytes, pa.int64())
        per = _map_distinct(col["reqmem"], lambda v: {"cpu": 1, "node": 2}.get(fs.parse_memory(v).per or "", 0),
                            pa.int8())
        one = pa.scalar(1, pa.int64())
        scale = pc.if_else(pc.equal(per, 1), pc.coalesce(cpus, one) if cpus is not None else one,
                           pc.if_else(pc.equal(per, 2), pc.coalesce(nodes, one) if nodes is not None else one, one))
        req_mem = pc.multiply(mem, scale)
    req_mem = first(req_mem, tres("reqtres", "mem_bytes"))
    if req_mem is not None:
        out["req_mem_bytes"] = _int_series(req_mem)

    if "maxrss" in col:
        rss = _memory_bytes(col["maxrss"])
        step_rows = pa.table({"k": job_key, "v": rss}).filter(is_step)
        per_job = step_rows.group_by("k").aggregate([("v", "max")])
        from_steps = per_job.column("v_max").take(pc.index_in(job_key, value_set=per_job.column("k")))
        rss = pc.if_else(is_step, rss, pc.coalesce(rss, from_steps))
        out["max_rss_bytes"] = _int_series(rss)

    return conform(pd.DataFrame(out))


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
            return _num(t.get("count"))
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
