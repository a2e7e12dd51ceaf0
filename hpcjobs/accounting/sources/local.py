"""The local runner's own accounting: what it measured of each point it ran, as the normalised schema.

The ``local`` site has no scheduler to ask afterwards: the runner itself starts every point's
process, reaps it with ``wait4(2)`` and saves, per task, its start and end (wall clock), its outcome,
its CPU time (user + system, from the child's ``rusage``: the task and every process it waited for)
and its peak resident memory (``ru_maxrss``, the largest of those processes), with what the job
asked (CPUs, memory, wall time). :func:`local_usage_rows` turns those records into the rows of
:mod:`hpcjobs.accounting.schema`, so :func:`hpcjobs.load_sweep`, ``results``, ``report --sweep`` and
``advise`` compute a local sweep's elapsed time and efficiencies as they do from ``sacct``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hpcjobs.accounting.schema import conform, empty_frame
from hpcjobs.states import ALL_STATES


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def local_usage_rows(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The schema's rows of the runner's task records (:meth:`hpcjobs.sweep.local_procs.LocalFiles.usages`)."""
    rows = []
    for r in records:
        start, end = _number(r.get("start")), _number(r.get("end"))
        job_id = _text(r.get("job_id"))
        if job_id is None or start is None or end is None or end < start:
            continue
        cpu = _number(r.get("cpu_time_s"))
        limit = _int(r.get("time_limit_s"))
        rss = _int(r.get("max_rss_bytes"))
        rows.append({
            "scheduler": "local", "job_id": job_id, "job_id_raw": job_id, "array_job_id": _text(r.get("array_job_id")),
            "array_task_id": _int(r.get("array_task_id")), "job_name": _text(r.get("job_name")),
            "user": _text(r.get("user")), "state": _text(r.get("state")), "state_raw": _text(r.get("state_raw")),
            "exit_code": _int(r.get("exit_code")), "exit_signal": _int(r.get("exit_signal")),
            "submit_time": pd.Timestamp(start, unit="s", tz="UTC"),
            "eligible_time": pd.Timestamp(start, unit="s", tz="UTC"),
            "start_time": pd.Timestamp(start, unit="s", tz="UTC"), "end_time": pd.Timestamp(end, unit="s", tz="UTC"),
            "wait": pd.Timedelta(0), "elapsed": pd.Timedelta(seconds=end - start),
            "time_limit": pd.Timedelta(seconds=limit) if limit else None,
            "nodes": 1, "cpus": _int(r.get("cpus")), "req_mem_bytes": _int(r.get("req_mem_bytes")),
            "max_rss_bytes": rss, "mem_used_bytes": rss,
            "cpu_time": pd.Timedelta(seconds=cpu) if cpu is not None else None,
            "node_list": _text(r.get("node")), "sweep_id": _text(r.get("sweep_id")), "chunk": _int(r.get("chunk")),
        })
    if not rows:
        return empty_frame()
    frame = pd.DataFrame(rows)
    for column in ("wait", "elapsed", "time_limit", "cpu_time"):  # an all-NaT column would read as a datetime
        frame[column] = pd.to_timedelta(frame[column])
    frame["state"] = frame["state"].where(frame["state"].isin(list(ALL_STATES)))  # never a state hpcjobs lacks
    return conform(frame)


__all__ = ["local_usage_rows"]
