"""slurmctld's job list (``squeue --json``, slurmrestd ``GET /slurm/v0.0.XX/jobs``) → the accounting schema.

The list holds the jobs slurmctld still keeps: queued and running ones, and finished ones only for
``MinJobAge`` after they end. It is a queue snapshot, not accounting: no steps, no CPU time and no memory
used. Its shapes, read from the data:

* 22.05 (``openapi/v0.0.38``, the real capture in ``tests/data/slurm/testbed-22.05_squeue.json``): ``job_state``
  a string, times and counts plain integers, ``exit_code`` the raw wait status (``768`` = exit 3, ``15`` =
  signal 15);
* 23.02+ (data_parser ``v0.0.39`` and later, SchedMD's OpenAPI schema ``v0.0.4x_job_info``): ``job_state`` a
  list (base state first, then flags), times and counts ``{set, infinite, number}`` objects, ``exit_code``
  the verbose ``{status, return_code, signal}`` object.

``start_time`` of a pending job and ``end_time`` of a job that has not ended are slurmctld's *expected* times
(the schema: "Time execution began, or is expected to begin", "End time, real or expected"), so they are read
only for jobs that started and ended.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from hpcjobs import states as st
from hpcjobs.accounting.schema import conform, empty_frame
from hpcjobs.accounting.sources.slurm_json import (
    _count,
    _epoch,
    _first_state,
    _json_exit,
    _num,
    job_list_shape,
    load_slurm_json,
)
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.slurm import formats as fs

#: The note a report on such a file shows.
SNAPSHOT_NOTE = ("the file is slurmctld's job list (squeue --json or slurmrestd's jobs), a queue snapshot, not "
                 "accounting: it holds only the jobs slurmctld still kept (finished ones for MinJobAge), no CPU "
                 "time or memory used; ask sacct for the accounting")

#: Normalised states in which a job has not started: its ``start_time`` is an estimate.
_NOT_STARTED = frozenset({st.PENDING, st.HELD})


def _wait_status(value: Any) -> tuple[int | None, int | None]:
    """``exit_code`` of either generation → (code, signal): a 22.05 raw wait status, or the verbose object."""
    if isinstance(value, dict):
        return _json_exit(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return (value >> 8) & 0xFF, value & 0x7F
    return None, None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _queue_job_id(job: dict[str, Any]) -> str:
    """The JobID sacct prints for one entry: ``11_2``, ``11_[2-11%3]`` (pending tasks), ``7+1``, ``5``."""
    array_job = _num(job.get("array_job_id")) or 0
    task = _num(job.get("array_task_id"))
    spec = job.get("array_task_string")
    het_job, offset = _num(job.get("het_job_id")) or 0, _num(job.get("het_job_offset"))
    if array_job and task is not None:
        return f"{array_job}_{task}"
    if array_job and isinstance(spec, str) and spec:
        return f"{array_job}_[{spec.strip('[]')}]"
    if het_job and offset is not None:
        return f"{het_job}+{offset}"
    return str(_num(job.get("job_id")))


def _row(job: dict[str, Any]) -> dict[str, Any]:
    """One schema row (before the time and duration columns are typed) of one job object."""
    job_id = _queue_job_id(job)
    jid = fs.parse_job_id(job_id)
    state_raw = _first_state(job.get("job_state"))
    state = fs.normalize_state(state_raw.split(",")[0], _text(job.get("state_reason")))
    started, ended = state not in _NOT_STARTED, st.is_terminal(state)
    start = _epoch(job.get("start_time")) if started else None
    end = _epoch(job.get("end_time")) if ended else None
    code, sig = _wait_status(job.get("exit_code")) if ended else (None, None)
    alloc, req = fs.summarize_tres(_text(job.get("tres_alloc_str"))), fs.summarize_tres(_text(job.get("tres_req_str")))
    limit = _num(job.get("time_limit"))
    comment = _text(job.get("comment"))
    tag = st.parse_job_tag(comment)
    return {
        "job_id": job_id, "job_id_raw": str(_num(job.get("job_id"))),
        "array_job_id": jid.base_id if jid.is_array else None, "array_task_id": jid.array_task_id,
        "array_task_spec": jid.array_task_spec, "het_offset": jid.het_offset, "step": None,
        "job_name": _text(job.get("name")), "user": _text(job.get("user_name")), "account": _text(job.get("account")),
        "partition": _text(job.get("partition")), "qos": _text(job.get("qos")), "cluster": _text(job.get("cluster")),
        "state": state, "state_raw": state_raw, "exit_code": code, "exit_signal": sig,
        "submit_time": _epoch(job.get("submit_time")), "eligible_time": _epoch(job.get("eligible_time")),
        "start_time": start, "end_time": end,
        "elapsed_s": end - start if start is not None and end is not None else None,
        "time_limit_s": limit * 60 if isinstance(limit, int) and limit > 0 else None,
        "nodes": _count(alloc.nodes, _num(job.get("node_count")), req.nodes),
        "cpus": _count(alloc.cpus, _num(job.get("cpus")), req.cpus),
        "gpus": _count(alloc.gpus, req.gpus, 0 if alloc.cpus is not None or req.cpus is not None else None),
        "gpu_type": alloc.gpu_type or req.gpu_type,
        "req_mem_bytes": req.mem_bytes, "node_list": _text(job.get("nodes")) if started else None,
        "comment": comment, "sweep_id": tag.sweep_id if tag else None, "chunk": tag.chunk if tag else None,
    }


def read_squeue_json(source: str | bytes | dict[str, Any] | os.PathLike[str]) -> pd.DataFrame:
    """Read slurmctld's job list (``squeue --json``, slurmrestd's ``jobs``) into the accounting schema.

    One job row per entry (no steps). A pending job has no start time, a job that has not ended no end
    time (the list's expected times are not read); exit codes only for ended jobs; CPU time and memory
    used are NA (slurmctld does not keep them). ``df.attrs["notes"]`` holds :data:`SNAPSHOT_NOTE`.

    Args:
        source: The JSON text, its parsed object, or a path to a file.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        SchedulerOutputError: Not JSON, or no ``jobs`` list of slurmctld job objects (``job_state``).
    """
    doc = load_slurm_json(Path(source).read_bytes() if isinstance(source, os.PathLike) else source, "squeue --json")
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list) or job_list_shape(jobs) not in ("squeue", "empty"):
        raise SchedulerOutputError("not slurmctld's job list (squeue --json): no 'jobs' list of objects with "
                                   "'job_state'")
    rows = [_row(job) for job in jobs]
    if not rows:
        df = empty_frame()
    else:
        df = pd.DataFrame(rows)
        df["scheduler"] = "slurm"
        for name in ("submit_time", "eligible_time", "start_time", "end_time"):
            df[name] = pd.to_datetime(df[name].astype("Float64"), unit="s", utc=True)
        df["wait"] = df["start_time"] - df["eligible_time"].fillna(df["submit_time"])
        for name, src in (("elapsed", "elapsed_s"), ("time_limit", "time_limit_s")):
            df[name] = pd.to_timedelta(df[src].astype("Float64"), unit="s")
        df = conform(df)
    df.attrs["notes"] = [SNAPSHOT_NOTE]
    return df
