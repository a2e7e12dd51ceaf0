"""Why Slurm jobs wait: ``squeue``, ``sprio``, ``sshare`` and ``sacctmgr``, at most five calls for any number of jobs.

1. ``squeue --jobs=IDS`` with the fields below (one line per job, an array's waiting tasks folded into one
   ``1517_[3-10]`` line, as squeue lists them): state, reason, priority, expected start...
2. ``sprio --jobs=IDS``: the priority's factors (age, fair share, job size, partition, QOS), when the
   cluster runs ``priority/multifactor`` (with ``priority/basic`` sprio says so and hpcjobs notes it).
3. ``sshare --users=USERS``: the users' fair-share factor.
4. Only when a job waits for a QOS or association limit: ``sacctmgr show qos`` (the limits) and
5. ``squeue --states=RUNNING,PENDING --users=USERS``: how much of the limit the users' other jobs hold.

Field letters are ``squeue(1)``'s ``--format`` ones; ``|`` cannot occur in the values asked for, the
reason comes last (it may hold commas and colons: ``ReqNodeNotAvail, UnavailableNodes:n[1-3]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from hpcjobs.schedulers.pending import PendingJob, PendingQuery, QueryRun, job_ids_argument
from hpcjobs.schedulers.slurm.discover import slurm_time
from hpcjobs.schedulers.slurm.discover_qos import parse_parsable2
from hpcjobs.schedulers.slurm.reasons import explain_reason
from hpcjobs.units import is_ascii_digits

#: ``squeue --format``: id, state, user, account, partition, QOS, priority, start, submit, time limit,
#: nodes, CPUs, dependency, reason.
SQUEUE_FORMAT = "%i|%T|%u|%a|%P|%q|%Q|%S|%V|%l|%D|%C|%E|%r"
_FIELDS = ("job_id", "state", "user", "account", "partition", "qos", "priority", "start", "submit", "time_limit",
           "nodes", "cpus", "dependency", "reason")
#: ``sprio --format``: id, user, priority, age, fair share, job size, partition, QOS.
SPRIO_FORMAT = "%i|%u|%Y|%A|%F|%J|%P|%Q"
_FACTORS = ("age", "fairshare", "jobsize", "partition", "qos")
#: The QOS limits a per-user or per-account limit reason is checked against.
QOS_FIELDS = "Name,MaxJobsPU,MaxSubmitPU,MaxTRESPU,MaxJobsPA,MaxTRESPA,GrpJobs,GrpTRES,MaxWall"
#: Runs one command; its stdout, or ``None`` when it failed (the failure noted).
_Ask = Callable[[list[str]], "str | None"]
_ARRAY_TASKS = re.compile(r"_\[(?P<ranges>[0-9,\-%]+)\]$")


def squeue_argv(job_ids: Sequence[str]) -> list[str]:
    """``squeue -h --jobs=IDS --format=...`` (every state: the ones not waiting are told apart)."""
    return ["squeue", "--noheader", f"--jobs={job_ids_argument(job_ids)}", f"--format={SQUEUE_FORMAT}"]


def _when(text: str) -> datetime | None:
    """An squeue time (``2026-12-07T12:00:00``, local time of the controller), or ``None`` (``N/A``, ``Unknown``)."""
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except ValueError:
        return None


def _int(text: str) -> int | None:
    return int(text) if is_ascii_digits(text) else None


def _tasks(job_id: str) -> int:
    """How many array tasks ``1517_[3-10,12]`` stands for (1 for a plain id; ``%N`` throttles are not tasks)."""
    match = _ARRAY_TASKS.search(job_id)
    if match is None:
        return 1
    total = 0
    for part in match.group("ranges").split("%")[0].split(","):
        first, _, last = part.partition("-")
        if is_ascii_digits(first) and (not last or is_ascii_digits(last)):
            total += int(last) - int(first) + 1 if last else 1
    return max(total, 1)


def parse_squeue(text: str) -> list[dict[str, str]]:
    """The lines of :func:`squeue_argv`'s output as field mappings (lines of another shape are skipped)."""
    rows = []
    for line in text.splitlines():
        parts = line.split("|", len(_FIELDS) - 1)
        if len(parts) == len(_FIELDS):
            rows.append(dict(zip(_FIELDS, (p.strip() for p in parts), strict=True)))
    return rows


def pending_job(row: dict[str, str]) -> PendingJob:
    """One waiting line of :func:`parse_squeue` as a :class:`PendingJob`."""
    code, _, detail = row["reason"].partition(",")
    return PendingJob(
        job_id=row["job_id"], reason=explain_reason(code), detail=detail.strip(), tasks=_tasks(row["job_id"]),
        user=row["user"], account=row["account"], partition=row["partition"], qos=row["qos"],
        priority=_int(row["priority"]), expected_start=_when(row["start"]), submitted=_when(row["submit"]),
        time_limit_s=slurm_time(row["time_limit"]), nodes=_int(row["nodes"]), cpus=_int(row["cpus"]),
        dependency="" if row["dependency"] in ("", "(null)") else row["dependency"])


def parse_sprio(text: str) -> dict[str, tuple[int | None, dict[str, float]]]:
    """``sprio`` lines by job id: the priority and its factors."""
    out: dict[str, tuple[int | None, dict[str, float]]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 + len(_FACTORS):
            continue
        factors = {}
        for name, value in zip(_FACTORS, parts[3:], strict=True):
            try:
                factors[name] = float(value)
            except ValueError:
                continue
        out[parts[0]] = (_int(parts[2]), factors)
    return out


def parse_sshare(text: str) -> dict[str, float]:
    """``sshare -P`` rows by user: the fair-share factor (``FairShare``)."""
    out: dict[str, float] = {}
    for row in parse_parsable2(text):
        user, value = row.get("User", "").strip(), row.get("FairShare", "").strip()
        try:
            if user:
                out[user] = float(value)
        except ValueError:
            continue
    return out


def explain_pending(job_ids: Sequence[str], run: QueryRun) -> PendingQuery:
    """What Slurm says of ``job_ids``: the waiting ones explained, the others with their state.

    Raises:
        CommandError: ``squeue`` itself failed (the other commands only leave a note when they do).
    """
    query = PendingQuery()

    def ask(argv: list[str]) -> str | None:  # a command whose failure leaves a note, not an error
        query.calls.append(argv)
        result = run(argv)
        if result.returncode != 0:
            query.notes.append(f"`{' '.join(argv[:2])} ...` exited {result.returncode}: "
                               f"{' '.join(result.stderr.split())[:300]}")
            return None
        return result.stdout

    first = squeue_argv(job_ids)
    query.calls.append(first)
    result = run(first)
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        from hpcjobs.errors import CommandError

        raise CommandError(first, result.returncode, result.stdout, result.stderr)
    rows = parse_squeue(result.stdout)
    seen = set()
    for row in rows:
        seen.add(row["job_id"].split("_")[0])
        if row["state"] == "PENDING":
            query.pending.append(pending_job(row))
        else:
            query.others[row["job_id"]] = row["state"]
    for job_id in job_ids:
        if job_id.split("_")[0] not in seen:
            query.others[job_id] = "GONE"
    if not query.pending:
        return query
    _add_priorities(query, ask)
    _add_limits(query, ask)
    return query


#: What sprio says (on stderr, exit 1) where priorities are not computed from factors.
BASIC_PRIORITY = "priority/basic"


def _add_priorities(query: PendingQuery, ask: _Ask) -> None:
    ids = job_ids_argument([j.job_id.split("_")[0] for j in query.pending])
    text = ask(["sprio", "--noheader", f"--jobs={ids}", f"--format={SPRIO_FORMAT}"])
    if text is None and query.notes and BASIC_PRIORITY in query.notes[-1]:
        query.notes[-1] = ("the cluster runs priority/basic: jobs start in the order they were submitted (as "
                           "resources allow), with no priority factors and no fair share")
        return
    if text is not None:
        factors = parse_sprio(text)
        for job in query.pending:
            found = factors.get(job.job_id.split("_")[0]) or factors.get(job.job_id)
            if found is not None:
                job.factors = found[1]
                job.priority = found[0] if found[0] is not None else job.priority
    users = ",".join(sorted({j.user for j in query.pending if j.user}))
    if users:
        shares = ask(["sshare", "--noheader", "--parsable2", f"--users={users}",
                      "--format=Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"])
        if shares is not None:
            fair = parse_sshare("Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n" + shares)
            for job in query.pending:
                job.fair_share = fair.get(job.user)


def _add_limits(query: PendingQuery, ask: _Ask) -> None:
    limited = [j for j in query.pending if j.reason.kind == "limit" and j.reason.code.startswith(("QOS", "Max"))]
    if not limited:
        return
    qos_text = ask(["sacctmgr", "--noheader", "--parsable2", "show", "qos",
                    f"format={QOS_FIELDS}"])
    users = ",".join(sorted({j.user for j in limited}))
    held = ask(["squeue", "--noheader", "--states=RUNNING", f"--users={users}",
                "--format=%u|%q|%a|%C|%D|%i"])
    if qos_text is None:
        return
    limits = {r.get("Name", ""): r for r in parse_parsable2(QOS_FIELDS.replace(",", "|") + "\n" + qos_text)}
    running: dict[tuple[str, str], int] = {}
    for line in (held or "").splitlines():
        parts = line.split("|")
        if len(parts) == 6:
            running[(parts[0], parts[1])] = running.get((parts[0], parts[1]), 0) + 1
    for job in limited:
        row = limits.get(job.qos)
        if row is None:
            continue
        set_limits = [f"{k} {v}" for k, v in row.items() if k != "Name" and v]
        in_use = running.get((job.user, job.qos), 0)
        job.limits.append(f"QOS {job.qos}: " + (", ".join(set_limits) or "no limits set")
                          + f"; {job.user} has {in_use} job(s) running in it")


__all__ = ["SPRIO_FORMAT", "SQUEUE_FORMAT", "explain_pending", "parse_sprio", "parse_squeue", "parse_sshare",
           "pending_job", "squeue_argv"]
