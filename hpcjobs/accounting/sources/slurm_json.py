"""``sacct --json`` (21.08/22.05 dbv0.0.37/38 and 23.02+ data_parser shapes) → the accounting schema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from hpcjobs import states as st
from hpcjobs.accounting.schema import conform, empty_frame
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.slurm import formats as fs


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
    if items:  # a TRES list without gres/gpu is a job without GPUs; NA only when there is no list
        out.setdefault("gpus", 0)
    return out


def _step_max_rss(step: dict[str, Any]) -> int | None:
    req = (step.get("tres") or {}).get("requested") or {}
    for t in _tres_list(req.get("max")):
        if t.get("type") == "mem":
            count = _num(t.get("count"))
            return count if isinstance(count, int) and count >= 0 else None
    return None


def _step_used(step: dict[str, Any]) -> int | None:
    """MaxRSS × the step's task count (see :mod:`hpcjobs.accounting.sacct.usage`)."""
    rss = _step_max_rss(step)
    tasks = _num((step.get("tasks") or {}).get("count")) if isinstance(step.get("tasks"), dict) else None
    return rss * tasks if rss is not None and isinstance(tasks, int) and tasks > 1 else rss


def _cpu_seconds(time: dict[str, Any]) -> float | None:
    total = time.get("total")
    if isinstance(total, dict) and ("seconds" in total or "microseconds" in total):
        return (_num(total.get("seconds")) or 0) + (_num(total.get("microseconds")) or 0) / 1e6
    return None


def _count(*candidates: Any) -> int | None:
    """The first candidate that is a positive count (allocation before request), else a 0 given, else None."""
    counts = [c for c in candidates if isinstance(c, int) and not isinstance(c, bool) and c >= 0]
    return next((c for c in counts if c > 0), counts[0] if counts else None)


def _epoch(v: Any) -> int | None:
    v = _num(v)
    return v if isinstance(v, int) and v > 0 else None


def _kind(value: Any) -> str:
    """``a list ([1, 2])``, ``null``, ``a number (Infinity)``...: a JSON value and its type, for messages."""
    if value is None or isinstance(value, bool):
        return _json_text(value)
    kind = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)
    return f"{kind} ({_json_text(value)})"


def _json_text(value: Any) -> str:
    """A JSON value as JSON spells it (``null``, ``Infinity``), cut to 60 characters, for messages."""
    import json

    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:60] + "…"


def _text(value: Any, where: str) -> str | None:
    """A text field of ``sacct --json`` (a name, a user, a partition): a string or null.

    Raises:
        SchedulerOutputError: Another type (``where`` is its JSON path).
    """
    if value is None or isinstance(value, str):
        return value
    raise SchedulerOutputError(f"{where} is {_kind(value)}: expected a string")


#: Above any Slurm job id (they are 32-bit), within what the accounting frame holds.
_MAX_JOB_ID = 2**63 - 1


def _json_job_id(job: dict[str, Any], where: str = "jobs[0]") -> str:
    raw = job.get("job_id")
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 < raw <= _MAX_JOB_ID:
        raise SchedulerOutputError(f"{where}.job_id is {_kind(raw)}: expected a Slurm job id (a "
                                   "positive whole number)")
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


def job_list_shape(jobs: list[Any]) -> str:
    """Which Slurm JSON a ``jobs`` list is, from its job objects' keys.

    Returns:
        ``"sacct"`` (objects with ``state``/``time``: ``sacct --json``, slurmdbd), ``"squeue"`` (objects with
        ``job_state``: slurmctld's list, ``squeue --json``), ``"empty"`` (no job objects), or ``"mixed"`` /
        ``"unknown"`` (objects of both shapes, or of neither).
    """
    shapes = set()
    for job in jobs:
        if not isinstance(job, dict):
            shapes.add("unknown")
        elif "job_state" in job and "state" not in job:
            shapes.add("squeue")
        elif "state" in job or "time" in job:
            shapes.add("sacct")
        else:
            shapes.add("unknown")
    if not shapes:
        return "empty"
    return shapes.pop() if len(shapes) == 1 else "mixed"


def load_slurm_json(source: str | bytes | dict[str, Any], what: str) -> Any:
    """The parsed document of Slurm JSON output (text, bytes, or already parsed).

    Raises:
        SchedulerOutputError: Not JSON, or nested too deeply to be Slurm output (``what`` names the command).
    """
    import json

    if isinstance(source, dict):
        return source
    try:
        return json.loads(source)
    except RecursionError:
        raise SchedulerOutputError(f"{what} output is nested too deeply to be Slurm output") from None
    except ValueError as exc:
        raise SchedulerOutputError(f"{what} output is not JSON: {exc}") from exc


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
        SchedulerOutputError: Not sacct JSON (no ``jobs`` list, or slurmctld's job list of ``squeue --json``:
            :func:`hpcjobs.accounting.sources.slurm_queue.read_squeue_json` reads that).
    """
    doc = load_slurm_json(Path(source).read_bytes() if isinstance(source, os.PathLike) else source, "sacct --json")
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise SchedulerOutputError("sacct --json output has no 'jobs' list")
    shape = job_list_shape(jobs)
    if shape == "squeue":
        raise SchedulerOutputError("this is slurmctld's job list (squeue --json, slurmrestd's jobs: objects with "
                                   "'job_state'), not sacct --json: read it with read_squeue_json")
    if shape in ("mixed", "unknown"):
        raise SchedulerOutputError("sacct --json output whose 'jobs' are not sacct job objects (with 'state' and "
                                   "'time')")
    rows: list[dict[str, Any]] = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise SchedulerOutputError(f"jobs[{i}] is {_kind(job)}: expected a job object")
        job_id = _json_job_id(job, f"jobs[{i}]")
        for key in ("user", "account", "partition", "qos", "cluster", "name", "nodes"):
            _text(job.get(key), f"jobs[{i}].{key}")
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
        step_used = [r for r in (_step_used(s) for s in steps) if r is not None]
        step_cpu = [c for c in (_cpu_seconds(s.get("time") or {}) for s in steps) if c is not None]
        job_cpu = _cpu_seconds(t)
        state_raw = _first_state(job.get("state"))
        rows.append({
            **base, "job_id_raw": str(job.get("job_id")), "step": None, "job_name": job.get("name"),
            "state_raw": state_raw, "exit_code": code, "exit_signal": sig,
            "start_time": _epoch(t.get("start")), "end_time": _epoch(t.get("end")),
            "elapsed_s": _num(t.get("elapsed")), "time_limit_s": limit * 60 if isinstance(limit, int) else None,
            # a job that never started allocated nothing: the request (schema: "requested if not started")
            "nodes": _count(alloc.get("node"), _num(job.get("allocation_nodes")), req.get("node")),
            "cpus": alloc.get("cpu", req.get("cpu", _num(required.get("CPUs")))),
            "gpus": alloc.get("gpus", req.get("gpus")), "gpu_type": alloc.get("gpu_type", req.get("gpu_type")),
            "req_mem_bytes": mem_mb * 1024**2 if isinstance(mem_mb, int) else None,
            "max_rss_bytes": max(step_rss) if step_rss else None,
            "mem_used_bytes": max(step_used) if step_used else None,
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
                "max_rss_bytes": _step_max_rss(s), "mem_used_bytes": _step_used(s), "cpu_s": _cpu_seconds(st_time),
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

