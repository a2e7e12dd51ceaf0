"""PBS Pro / OpenPBS job records → the normalised accounting DataFrame (:mod:`hpcjobs.accounting.schema`).

Sources: ``qstat -x -f -F json`` (:func:`read_qstat_json`), ``qstat -x -f`` text
(:func:`read_qstat_text`) and the server's accounting logs ``server_priv/accounting/YYYYMMDD``
(:func:`read_pbs_accounting`). Parsing is done by the pure functions of
:mod:`hpcjobs.schedulers.pbs.formats`; this module only shapes rows. Torque reuses the row builders
(:mod:`hpcjobs.accounting.sources.torque`).

Time zones: qstat prints ``ctime``-style times in the *client's* local zone and accounting lines
carry the *server's* local time of writing (their ``ctime/etime/start/end`` fields are epoch
seconds and need no zone). Every reader takes ``tz`` (an IANA name or ``tzinfo``); ``None``
means this machine's local zone, which is right when reading on the cluster itself. All
timestamps come back tz-aware in UTC.

Reruns (accounting): one row per job from its last ``E`` record, which describes the final
run (``start`` is the last start, ``resources_used`` that run's usage, ``run_count`` the number
of runs). Earlier runs' ``R`` records are not rows; ``wait`` is measured from eligibility to the
final start and so includes the time spent in earlier runs. A job with several ``E`` records (a log that
wrote one per run, or a job id the server reused) has the row of its last one; the earlier ones are listed in
``df.attrs["skipped"]`` with their lines (a :class:`~hpcjobs.skipped.SkippedRecordsWarning`), never dropped
silently.

Submit time: ``ctime``; a job none of whose records has one (a Torque ``Q`` record holds only ``queue=``: a job
deleted while queued) takes the time stamp of its first ``Q`` record, written at the second of ``ctime``
wherever both are present (the real OpenPBS and PBS Pro logs of ``tests/data/pbs``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import pandas as pd

from hpcjobs import states
from hpcjobs.accounting.schema import conform
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.pbs import formats as pbs
from hpcjobs.schedulers.pbs.accounting_log import accounting_job_id
from hpcjobs.skipped import Skipped, attach
from hpcjobs.states import parse_job_tag
from hpcjobs.units import is_ascii_digits

Derive = Callable[..., tuple[str, int | None, int | None]]
Source = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]

_TIME_COLS = ("submit_time", "eligible_time", "start_time", "end_time")
_DURATION_COLS = ("wait", "elapsed", "time_limit", "cpu_time")
_INT_COLS = ("array_task_id", "exit_code", "exit_signal", "nodes", "cpus", "gpus", "req_mem_bytes",
             "max_rss_bytes", "mem_used_bytes", "chunk")


def rows_to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Turn row dicts (datetimes, seconds, ints, ``None``) into a schema-conformed DataFrame."""
    df = pd.DataFrame(rows)
    if df.empty:
        return conform(df)
    for col in _TIME_COLS:
        if col in df:
            df[col] = pd.to_datetime(df[col], utc=True).astype("datetime64[ns, UTC]")
    for col in _DURATION_COLS:
        if col in df:
            df[col] = pd.to_timedelta(pd.to_numeric(df[col]), unit="s").astype("timedelta64[ns]")
    for col in _INT_COLS:
        if col in df:
            df[col] = pd.array([None if v is None or v != v else int(v) for v in df[col]], dtype="Int64")
    return conform(df)


def _delta(a: datetime | None, b: datetime | None) -> float | None:
    return (b - a).total_seconds() if a is not None and b is not None else None


def build_row(
    *,
    scheduler: str,
    job_id: str,
    cluster: str | None,
    job_name: str | None,
    user: str | None,
    account: str | None,
    queue: str | None,
    state: tuple[str, int | None, int | None],
    state_raw: str,
    submit: datetime | None,
    eligible: datetime | None,
    start: datetime | None,
    end: datetime | None,
    resource_list: Mapping[str, Any],
    resources_used: Mapping[str, Any],
    exec_host: str | None,
    comment: str | None,
    tag: str | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One schema row from the fields every PBS-family source provides.

    ``tag`` is the rendered hpcjobs tag (or ``None``); the ``comment`` column holds it, else the
    PBS ``comment``.

    The allocation wins over the request, and a request the job spelled out over a default
    (docs/accounting.md has the table). CPUs: the ``ncpus`` of PBS Pro's ``exec_vnode``, else the
    slots of ``exec_host``, else Torque ``total_execution_slots``; not started: the ``select``
    total, else the largest of nodes × ppn, ``procs`` and ``ncpus`` (a queue's default
    ``ncpus=1`` does not hide ``ppn=4``).
    Nodes: ``Resource_List.nodect``, else Torque ``unique_node_count``, else ``exec_host`` hosts,
    else the ``nodes`` spec. GPUs: the ``ngpus`` of ``exec_vnode``, else ``Resource_List.ngpus``
    (or ``gpus``/``gpu``), else the ``select``/``nodes`` spec, else 0; NA only when the record has
    no ``Resource_List`` at all. Elapsed: end − start when both are known, else
    ``resources_used.walltime``.
    """
    extra = extra or {}
    try:
        pid: pbs.PbsJobId | None = pbs.parse_job_id(job_id)
    except SchedulerOutputError:  # an accounting log's id with an odd server name still has its parts
        parts = accounting_job_id(job_id)
        pid = pbs.PbsJobId(*parts) if parts else None
    hosts = pbs.parse_exec_host(exec_host) if exec_host else {}
    cpus, nodes, gpus = _counts(resource_list, hosts, extra)
    req_mem = pbs.parse_size(resource_list.get("mem"))
    if req_mem is None and resource_list.get("select"):
        req_mem = pbs.select_totals(resource_list["select"]).get("mem")
    elapsed = _delta(start, end)
    if elapsed is None:
        elapsed = pbs.parse_duration(resources_used.get("walltime"))
    wait_from = eligible or submit
    parsed_tag = parse_job_tag(tag)
    parent = pid.parent if pid is not None and pid.index is not None else None
    return {
        "scheduler": scheduler,
        "cluster": cluster or (pid.server if pid else None),
        "job_id": job_id,
        "job_id_raw": pid.raw_id if pid else job_id,
        "array_job_id": parent if parent else (job_id if pid is not None and pid.is_array else None),
        "array_task_id": pid.index if pid else None,
        "job_name": job_name,
        "user": user,
        "account": account,
        "partition": queue,
        "state": state[0],
        "state_raw": state_raw,
        "exit_code": state[1],
        "exit_signal": state[2],
        "submit_time": submit,
        "eligible_time": eligible,
        "start_time": start,
        "end_time": end,
        "wait": _delta(wait_from, start),
        "elapsed": elapsed,
        "time_limit": pbs.parse_duration(resource_list.get("walltime")),
        "nodes": nodes,
        "cpus": cpus,
        "gpus": gpus,
        "req_mem_bytes": req_mem,
        "max_rss_bytes": pbs.parse_size(resources_used.get("mem")),
        "mem_used_bytes": pbs.parse_size(resources_used.get("mem")),  # the whole job's, as the MoM sums it
        "cpu_time": pbs.parse_duration(resources_used.get("cput")),
        "node_list": ",".join(hosts) if hosts else None,
        "comment": tag or comment,
        "sweep_id": parsed_tag.sweep_id if parsed_tag else None,
        "chunk": parsed_tag.chunk if parsed_tag else None,
    }


def _first_int(*candidates: Any) -> int | None:
    for c in candidates:
        v = pbs.as_int(c)
        if v is not None:
            return v
    return None


def _counts(resource_list: Mapping[str, Any], hosts: Mapping[str, int],
            extra: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """CPUs, nodes and GPUs of a job (see :func:`build_row`)."""
    select = pbs.select_totals(resource_list["select"]) if resource_list.get("select") else {}
    nodes_spec = pbs.parse_nodes_spec(resource_list["nodes"]) if resource_list.get("nodes") else {}
    vnode = pbs.exec_vnode_totals(extra["exec_vnode"]) if extra.get("exec_vnode") else {}
    asked = [v for v in (nodes_spec.get("cpus"), pbs.as_int(resource_list.get("procs")),
                         pbs.as_int(resource_list.get("ncpus"))) if v is not None]
    requested = _first_int(select.get("ncpus"), max(asked) if asked else None)
    cpus = _first_int(vnode.get("ncpus"), sum(hosts.values()) if hosts else None,
                      extra.get("total_execution_slots"), requested)
    nodes = _first_int(resource_list.get("nodect"), extra.get("unique_node_count"),
                       len(hosts) if hosts else None, nodes_spec.get("nodes"))
    listed = [resource_list.get(name) for name in pbs.GPU_RESOURCES]
    gpus = _first_int(vnode.get("ngpus"), *listed, select.get("ngpus"), nodes_spec.get("gpus"),
                      0 if resource_list or vnode else None)
    return cpus, nodes, gpus


def _account(attrs: Mapping[str, Any], account_key: str, project_key: str) -> str | None:
    account = pbs.as_text(attrs.get(account_key))
    project = pbs.as_text(attrs.get(project_key))
    if account:
        return account
    return project if project and project != "_pbs_project_default" else None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def qstat_row(
    job_id: str,
    attrs: Mapping[str, Any],
    *,
    scheduler: str,
    tz: tzinfo | str | None,
    derive: Derive = pbs.derive_final_state,
    server: str | None = None,
) -> dict[str, Any]:
    """One schema row from a job's qstat attributes (PBS JSON/text or Torque XML/text).

    The end time is ``obittime`` (Torque ``comp_time``); a history job that never ran (deleted
    while queued or held) has neither, and ends at its ``history_timestamp`` (epoch seconds), the
    moment it moved to history, which is also the time of its accounting ``D`` record.
    """
    owner = pbs.as_text(attrs.get("euser")) or (pbs.as_text(attrs.get("Job_Owner")) or "").split("@")[0]
    return build_row(
        scheduler=scheduler,
        job_id=job_id,
        cluster=pbs.as_text(attrs.get("server")) or server,
        job_name=pbs.as_text(attrs.get("Job_Name")),
        user=owner or None,
        account=_account(attrs, "Account_Name", "project"),
        queue=pbs.as_text(attrs.get("queue")),
        state=pbs.job_state_from_attrs(attrs, derive),
        state_raw=str(attrs.get("job_state") or ""),
        submit=pbs.parse_pbs_time(attrs.get("ctime"), tz),
        eligible=pbs.parse_pbs_time(attrs.get("etime"), tz),
        start=pbs.parse_pbs_time(attrs.get("stime") or attrs.get("start_time"), tz),
        end=pbs.parse_pbs_time(attrs.get("obittime") or attrs.get("comp_time"), tz) or (
            pbs.parse_pbs_time(attrs.get("history_timestamp"))
            if str(attrs.get("job_state") or "").strip() in ("F", "X") else None),
        resource_list=_dict(attrs.get("Resource_List")),
        resources_used=_dict(attrs.get("resources_used")),
        exec_host=pbs.as_text(attrs.get("exec_host")),
        comment=pbs.as_text(attrs.get("comment")),
        tag=pbs.find_tag(attrs),
        extra=attrs,
    )


def jobs_to_frame(
    jobs: Mapping[str, Mapping[str, Any]],
    *,
    scheduler: str,
    tz: tzinfo | str | None = None,
    derive: Derive = pbs.derive_final_state,
    server: str | None = None,
) -> pd.DataFrame:
    """A schema DataFrame from ``{job_id: attributes}`` as the qstat parsers return it."""
    rows = [qstat_row(jid, a, scheduler=scheduler, tz=tz, derive=derive, server=server)
            for jid, a in jobs.items() if isinstance(a, Mapping)]
    return rows_to_frame(rows)


def read_qstat_json(text: str, *, tz: tzinfo | str | None = None) -> pd.DataFrame:
    """``qstat -x -f -F json`` output → schema DataFrame (no rows when ``Jobs`` is absent).

    Args:
        text: The command's standard output.
        tz: Zone of the machine that ran qstat (its ``ctime`` strings are local); ``None`` = here.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`, ``scheduler`` = ``pbspro``.

    Raises:
        SchedulerOutputError: When the output is not (repairable) JSON.
    """
    doc = pbs.parse_qstat_json(text)
    return jobs_to_frame(doc["Jobs"], scheduler="pbspro", tz=tz, server=pbs.as_text(doc.get("pbs_server")))


def read_qstat_text(text: str, *, tz: tzinfo | str | None = None) -> pd.DataFrame:
    """``qstat -x -f`` text output → schema DataFrame (``scheduler`` = ``pbspro``).

    Args:
        text: The command's standard output.
        tz: Zone of the machine that ran qstat; ``None`` = this machine's zone.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.
    """
    return jobs_to_frame(pbs.parse_qstat_full(text), scheduler="pbspro", tz=tz)


# --------------------------------------------------------------------------- accounting logs


def iter_source_lines(source: Source) -> Iterator[str]:
    """Lines of accounting text, of one file/directory, or of several (in the order given).

    A ``str`` holding a newline or a ``;``, or only blanks, is text; any other ``str``/path names a
    file, or a directory whose files are read in name order (``YYYYMMDD`` sorts by date). (An empty
    string is empty text, never ``Path("")``, which is the current directory.)
    """
    if isinstance(source, str) and ("\n" in source or ";" in source or not source.strip()):
        yield from source.splitlines()
        return
    items: Iterable[str | os.PathLike[str]] = [source] if isinstance(source, (str, os.PathLike)) else source
    for item in items:
        if isinstance(item, str) and ("\n" in item or ";" in item or not item.strip()):
            yield from item.splitlines()
            continue
        path = Path(item)
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
        for f in files:
            with f.open(encoding="utf-8", errors="replace") as fh:
                yield from fh


def _epoch(value: str | None) -> datetime | None:
    return pbs.parse_pbs_time(value) if value and is_ascii_digits(value.strip().lstrip("-")) else None


def _tag_in(text: str | None) -> str | None:
    tag = parse_job_tag(text)
    return tag.render() if tag else None


def _split_resources(attrs: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    req: dict[str, str] = {}
    used: dict[str, str] = {}
    for k, v in attrs.items():
        if k.startswith("Resource_List."):
            req[k[len("Resource_List."):]] = v
        elif k.startswith("resources_used."):
            used[k[len("resources_used."):]] = v
    return req, used


def _submit_time(attrs: Mapping[str, str], rich: list[pbs.AccountingRecord], recs: list[pbs.AccountingRecord],
                 tz: tzinfo | str | None) -> datetime | None:
    """When a job was submitted: ``ctime`` of the row's record or of any record that has it, else the time stamp
    of its first ``Q`` record (a Torque ``Q`` holds only ``queue=``, so a job deleted while queued has no
    ``ctime`` at all; for every job whose records have one, the first ``Q`` is written at that second)."""
    for candidate in (attrs, *(r.attrs for r in reversed(rich))):
        ctime = _epoch(candidate.get("ctime"))
        if ctime is not None:
            return ctime
    queued = [r.time for r in recs if r.record_type == "Q"]
    return pbs.localize(min(queued), tz) if queued else None


def accounting_rows(
    records: Iterable[pbs.AccountingRecord],
    *,
    scheduler: str,
    tz: tzinfo | str | None = None,
    derive: Derive = pbs.derive_final_state,
    include_unfinished: bool = False,
    skipped: list[Skipped] | None = None,
    unfinished: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Rows (one per job) from accounting records, see :func:`read_pbs_accounting`.

    Job records (``QSERDA``) whose id is not a job id are listed in ``skipped`` when it is given.
    Jobs that have not ended (still queued or running when the log was written) are a choice, not
    a loss: without ``include_unfinished`` their ids go to ``unfinished`` when it is given.
    """
    by_job: dict[str, list[pbs.AccountingRecord]] = {}
    for rec in records:
        if rec.record_type not in "QSERDA":
            continue
        if accounting_job_id(rec.job_id) is not None:
            by_job.setdefault(rec.job_id, []).append(rec)
        elif skipped is not None:
            skipped.append(Skipped(rec.line, f"{rec.record_type} record of {rec.job_id!r}, not a job id"))
    rows = []
    for job_id, recs in by_job.items():
        ends = [r for r in recs if r.record_type == "E"]
        deleted = [r for r in recs if r.record_type == "D"]
        aborted = [r for r in recs if r.record_type == "A"]
        rich = [r for r in recs if r.record_type in "QSER" and "ctime" in r.attrs]
        queues = [r.attrs["queue"] for r in recs if "queue" in r.attrs]
        final: pbs.AccountingRecord | None = ends[-1] if ends else None
        if skipped is not None:  # a rerun that wrote an E per run, or the id reused: the row is the last E
            skipped.extend(Skipped(r.line, f"E record of {job_id} followed by another E record of it (a rerun, or "
                                   "the id reused): the job's row is its last E record") for r in ends[:-1])
        attrs: Mapping[str, str] = final.attrs if final else (rich[-1].attrs if rich else {})
        req, used = _split_resources(attrs)
        end: datetime | None
        if final is not None:
            state = derive(
                pbs.as_int(attrs.get("Exit_status")),
                walltime_used_s=pbs.parse_duration(used.get("walltime")),
                walltime_limit_s=pbs.parse_duration(req.get("walltime")),
                deleted=bool(deleted),
            )
            raw, end = "E", _epoch(attrs.get("end"))
        elif deleted or aborted:
            last = (deleted or aborted)[-1]
            state = (states.CANCELLED, None, None) if deleted else (states.FAILED, None, None)
            raw, end = last.record_type, pbs.localize(last.time, tz)
        elif include_unfinished:
            last_type = recs[-1].record_type
            state = ({"S": states.RUNNING, "R": states.REQUEUED}.get(last_type, states.PENDING), None, None)
            raw, end = last_type, None
        else:
            if unfinished is not None and "[]" not in job_id:  # an array parent's tasks have the records
                unfinished.append(job_id)
            continue
        user = attrs.get("user") or (attrs.get("owner") or "").split("@")[0] or None
        rows.append(build_row(
            scheduler=scheduler,
            job_id=job_id,
            cluster=None,
            job_name=attrs.get("jobname"),
            user=user,
            account=_account(attrs, "account", "project"),
            queue=attrs.get("queue") or (queues[-1] if queues else None),
            state=state,
            state_raw=raw,
            submit=_submit_time(attrs, rich, recs, tz),
            eligible=_epoch(attrs.get("etime")),
            start=_epoch(attrs.get("start")),
            end=end,
            resource_list=req,
            resources_used=used,
            exec_host=attrs.get("exec_host"),
            comment=None,
            tag=_tag_in(attrs.get("jobname")),
            extra=attrs,
        ))
    return rows


def read_pbs_accounting(
    source: Source,
    *,
    tz: tzinfo | str | None = None,
    include_unfinished: bool = False,
) -> pd.DataFrame:
    """PBS Pro / OpenPBS accounting logs → one schema row per job.

    A job's row comes from its last ``E`` record (final run after reruns, see the module
    docstring); ``ctime``/``etime``/``start``/``end`` are epoch seconds (``etime=0`` → NaT).
    Jobs deleted (``D``) or aborted (``A``) without an ``E`` record become CANCELLED/FAILED rows
    ending at that record's time. A ``D`` record before the ``E`` makes a signal kill CANCELLED.

    Args:
        source: Accounting text, a file or directory path, or several of those.
        tz: Zone of the PBS server (the line time stamps are its local time; used only for
            ``D``/``A`` end times); ``None`` = this machine's local zone.
        include_unfinished: Also return jobs without an ``E``/``D``/``A`` record: RUNNING after
            ``S``, REQUEUED after ``R``, else PENDING.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`, ``scheduler`` = ``pbspro``.
        Subjobs (``1234[5].srv``) are rows with ``array_job_id``/``array_task_id``; an array
        parent gets a row only when the log holds an ``E`` (or ``D``/``A``) record for it. Lines that
        are not records and job records without a job id are listed in ``df.attrs["skipped"]``
        (line numbers count through all files read), with a
        :class:`~hpcjobs.skipped.SkippedRecordsWarning`. The ids of jobs left out because
        they have not ended are in ``df.attrs["unfinished"]`` (no Python warning: a log of today holds
        running jobs; ``hpcjobs report`` prints their count, :func:`hpcjobs.accounting.build.reader_notes`).
    """
    skipped: list[Skipped] = []
    unfinished: list[str] = []
    records = pbs.iter_accounting_records(iter_source_lines(source), skipped)
    rows = accounting_rows(records, scheduler="pbspro", tz=tz, include_unfinished=include_unfinished,
                           skipped=skipped, unfinished=unfinished)
    df = attach(rows_to_frame(rows), sorted(skipped, key=lambda k: k.line or 0))
    df.attrs["unfinished"] = unfinished
    return df
