"""Why PBS Pro / OpenPBS jobs wait: the job's state, hold types and the scheduler's ``comment``, in two calls.

1. ``qstat -E -f -F json IDS``: each job's ``job_state`` (``Q`` queued, ``H`` held, ``W`` waiting for its
   ``-a`` time), ``Hold_Types`` (``u`` its owner, ``o`` an operator, ``s`` the system: a dependency),
   ``depend``, ``Execution_Time``, ``Priority``, ``estimated.start_time`` when the scheduler estimates
   it, and ``comment``, where the scheduler writes why it did not run the job in its last cycle
   (``Not Running: Insufficient amount of resource: ncpus (R: 8 A: 7 T: 8)``);
2. ``qstat -Q -f -F json``: the queues' state and limits (``max_run``, ``max_queued``, ``resources_max``,
   ``started``, ``enabled``), for the lines that name the limit in the way.

The comment's wording is OpenPBS's scheduler's (its ``sched_error`` messages, as ``qstat -f`` shows them);
hpcjobs explains the families below and shows any other comment as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from hpcjobs.errors import CommandError, SchedulerOutputError
from hpcjobs.schedulers.pbs.discover import pbs_walltime
from hpcjobs.schedulers.pbs.formats import parse_qstat_json
from hpcjobs.schedulers.pending import PendingJob, PendingQuery, QueryRun, Reason, ReasonKind

SOURCE = "OpenPBS's scheduler comments (qstat -f: comment)"

#: (pattern of the comment, code, summary, action, kind): the first that matches explains it.
_COMMENTS: tuple[tuple[re.Pattern[str], str, str, str, ReasonKind], ...] = tuple(
    (re.compile(p, re.I), code, summary, action, kind) for p, code, summary, action, kind in (
        (r"Can Never Run", "CanNeverRun", "the request can never be met where the job is queued (a resource or "
         "limit no node or queue has)", "change the request (qalter) or move the job to another queue", "request"),
        (r"Insufficient amount of (?:server |queue )?resource", "InsufficientResource",
         "the resources the job asks for are in use by other jobs", "wait for them to be freed", "wait"),
        (r"Not enough free nodes", "NotEnoughFreeNodes", "not enough nodes are free for the job now",
         "wait for nodes to be freed", "wait"),
        (r"has reached .*limit|per-user limit|per-group limit|per-project limit|user limit|group limit|max_run|"
         r"limit reached",
         "RunLimit", "a limit on how many jobs (or how much of a resource) you (or your group) may run at once is "
         "reached", "wait for your other jobs to finish", "limit"),
        (r"conflict with reservation or top job|top job", "TopJob", "the job would delay a reservation or the job "
         "the scheduler keeps room for", "wait; a shorter wall time may let it backfill", "wait"),
        (r"Queue .* not started|Queue not started", "QueueNotStarted", "the job's queue is not scheduling jobs",
         "wait for the queue to be started, or move the job (qmove)", "cluster"),
        (r"exclusive", "Exclusive", "the job asks for a whole node, and none is free", "wait", "wait"),
        (r"Not Running", "NotRunning", "the scheduler did not run the job in its last cycle", "see the comment",
         "other"),
    ))


def _reason(attrs: Mapping[str, Any]) -> tuple[Reason, str]:
    """The job's reason and the scheduler's own words for it."""
    state = str(attrs.get("job_state", ""))
    comment = " ".join(str(attrs.get("comment", "")).split())
    holds = str(attrs.get("Hold_Types", ""))
    if state == "H":
        if "u" in holds:
            return Reason("HeldUser", "the job was held by its owner (qhold, or qsub -h)", "`qrls ID`", "hold",
                          SOURCE), comment
        if "o" in holds:
            return Reason("HeldOperator", "an operator held the job", "ask the cluster's operators to release it",
                          "hold", SOURCE), comment
        if attrs.get("depend"):
            return Reason("Dependency", "the job waits for the jobs of its dependency (a system hold until they "
                          "end as it asks)", "wait for those jobs (qstat -f: depend)", "dependency", SOURCE), comment
        return Reason("HeldSystem", "the system held the job", "look at its comment; ask the operators", "hold",
                      SOURCE), comment
    if state == "W":
        return Reason("ExecutionTime", "the job asked not to start before a given time (qsub -a)",
                      "wait, or `qalter -a` an earlier time", "hold", SOURCE), comment
    if not comment:
        return Reason("NotConsidered", "the scheduler has not looked at the job yet", "wait a scheduling cycle",
                      "wait", SOURCE), comment
    for pattern, code, summary, action, kind in _COMMENTS:
        if pattern.search(comment):
            return Reason(code, summary, action, kind, SOURCE), comment
    return Reason("Comment", f"the scheduler says: {comment[:200]}", "see the comment (qstat -f ID)", "other",
                  SOURCE), comment


def _when(value: Any) -> datetime | None:
    """A PBS time as ``qstat -f -F json`` writes it (``Mon Dec  7 13:18:27 2026``, the client's local time), or
    seconds since the epoch; ``None`` when absent or unreadable."""
    from hpcjobs.schedulers.pbs.accounting_log import parse_pbs_time

    return parse_pbs_time(" ".join(str(value).split()) if isinstance(value, str) else value)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _tasks(job_id: str, attrs: Mapping[str, Any]) -> int:
    """An array's queued subjobs (``array_state_count``: ``Queued:3 Running:1 ...``), else 1."""
    counts = str(attrs.get("array_state_count", ""))
    match = re.search(r"Queued:(\d+)", counts)
    return int(match.group(1)) if "[]" in job_id and match else 1


def pending_job(job_id: str, attrs: Mapping[str, Any]) -> PendingJob:
    """One waiting job of ``qstat -f -F json`` as a :class:`PendingJob`."""
    reason, comment = _reason(attrs)
    resources = attrs.get("Resource_List") if isinstance(attrs.get("Resource_List"), dict) else {}
    return PendingJob(
        job_id=job_id, reason=reason, detail=comment, tasks=_tasks(job_id, attrs),
        user=str(attrs.get("Job_Owner", "")).split("@")[0], account=str(attrs.get("Account_Name", "")),
        partition=str(attrs.get("queue", "")), priority=_int(attrs.get("Priority")),
        expected_start=_when(attrs.get("estimated", {}).get("start_time") if isinstance(attrs.get("estimated"), dict)
                             else None) or _when(attrs.get("Execution_Time")),
        submitted=_when(attrs.get("qtime")), time_limit_s=pbs_walltime(resources.get("walltime")),
        nodes=_int(resources.get("nodect")), cpus=_int(resources.get("ncpus")),
        dependency=str(attrs.get("depend", "")))


def _queue_limits(text: str) -> dict[str, list[str]]:
    """Each queue's limits and state as short lines (``max_run [u:PBS_GENERIC=1]``, ``not started``)."""
    try:
        doc = parse_qstat_json(text)
    except SchedulerOutputError:
        return {}
    out: dict[str, list[str]] = {}
    queues = doc.get("Queue") if isinstance(doc.get("Queue"), dict) else {}
    for name, attrs in queues.items():
        if not isinstance(attrs, dict):
            continue
        lines = [f"{k} {attrs[k]}" for k in ("max_run", "max_queued", "max_run_res", "max_user_run") if attrs.get(k)]
        maxes = attrs.get("resources_max") if isinstance(attrs.get("resources_max"), dict) else {}
        lines += [f"resources_max.{k} {v}" for k, v in sorted(maxes.items())]
        if str(attrs.get("started", "True")).lower() == "false":
            lines.append("not started")
        if str(attrs.get("enabled", "True")).lower() == "false":
            lines.append("not enabled")
        out[str(name)] = lines
    return out


def explain_pending(job_ids: Sequence[str], run: QueryRun,
                    same_job: Callable[[str, str], bool] | None = None) -> PendingQuery:
    """What PBS says of ``job_ids``: the waiting ones explained, the others with their state.

    Raises:
        CommandError: ``qstat`` itself failed for another reason than unknown ids.
    """
    query = PendingQuery()
    # -E: one request for all the ids (without it OpenPBS 23.06 prints only the first id's job in -F json)
    argv = ["qstat", "-E", "-f", "-F", "json", "--", *job_ids]
    query.calls.append(argv)
    result = run(argv)
    if result.returncode != 0 and not result.stdout.strip() and "Unknown Job Id" not in result.stderr:
        raise CommandError(argv, result.returncode, result.stdout, result.stderr)
    jobs = parse_qstat_json(result.stdout)["Jobs"]
    same = same_job or (lambda a, b: a == b)
    for job_id, attrs in jobs.items():
        state = str(attrs.get("job_state", ""))
        if state in ("Q", "H", "W") or (state == "B" and _tasks(job_id, attrs) > 0 and "Queued:0" not in
                                        str(attrs.get("array_state_count", "Queued:0"))):
            query.pending.append(pending_job(job_id, attrs))
        else:
            query.others[job_id] = {"R": "RUNNING", "E": "EXITING", "F": "FINISHED", "B": "RUNNING",
                                    "S": "SUSPENDED", "X": "FINISHED"}.get(state, state)
    for wanted in job_ids:
        if not any(same(wanted, j) for j in jobs):
            query.others[wanted] = "GONE"
    limited = [j for j in query.pending if j.reason.kind in ("limit", "cluster", "request")]
    if limited:
        queues_argv = ["qstat", "-Q", "-f", "-F", "json"]
        query.calls.append(queues_argv)
        answer = run(queues_argv)
        if answer.returncode == 0:
            limits = _queue_limits(answer.stdout)
            for job in limited:
                job.limits += [f"queue {job.partition}: {line}" for line in limits.get(job.partition, [])]
        else:
            query.notes.append(f"`qstat -Q` exited {answer.returncode}: {' '.join(answer.stderr.split())[:200]}")
    return query


__all__ = ["explain_pending", "pending_job"]
