"""Finding a sweep's submissions in the scheduler by their tag, when its answers cannot be trusted.

A submit command may time out or fail and still queue the job seconds later, print an id and exit
non-zero, or print an id that does not exist. Every job hpcjobs submits carries the tag
``hpcjobs:<sweep>:<chunk>:<token>`` (:class:`hpcjobs.states.JobTag`), so the truth is one batched
query away: the user's jobs of the experiment's name with their tags (``squeue``/``sacct`` on Slurm,
``qstat`` on PBS and Torque). :func:`await_tokens` repeats that query with backoff for a bounded time
before a submission is declared "not submitted"; :func:`settle_unseen` gives a recorded job id the
scheduler never knows a grace period and several polls, then releases its points.

The time bound is :envvar:`HPCJOBS_SUBMIT_LOOKUP_S` (default :data:`DEFAULT_LOOKUP_S`): long enough for
a busy ``slurmctld`` to queue a job it answered late.
"""

from __future__ import annotations

import getpass
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from hpcjobs import states
from hpcjobs.errors import ConfigError, ConfigProblem, HpcJobsError, LedgerError, printable
from hpcjobs.schedulers.base import JobStatus, SchedulerBackend, same_job_of
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.status_table import StatusTable
from hpcjobs.states import parse_job_tag
from hpcjobs.sweep.ledger.store import Ledger, PointRecord, Submission
from hpcjobs.units import is_ascii_digits

log = logging.getLogger("hpcjobs.sweep")

#: Environment variable: seconds to look for a submission after an ambiguous answer.
LOOKUP_ENV = "HPCJOBS_SUBMIT_LOOKUP_S"
DEFAULT_LOOKUP_S = 60.0
#: A recorded job id is lost once this many status polls in a row did not report it ...
LOST_AFTER_POLLS = 3
#: ... over at least the lookup time, and only while the scheduler's history still covers it
#: (the tag query reads 14 days of ``sacct``; PBS keeps two weeks of history by default).
LOST_MAX_AGE_S = 7 * 86400.0
#: Further tries of a history query that failed, with backoff, before a lookup is inconclusive.
HISTORY_RETRIES = 3


def default_lookup_seconds() -> float:
    """The lookup time from :data:`LOOKUP_ENV`, else :data:`DEFAULT_LOOKUP_S`.

    Raises:
        ConfigError: The variable is set but is not a number of seconds between 0 and 86400.
    """
    raw = os.environ.get(LOOKUP_ENV, "").strip()
    if not raw:
        return DEFAULT_LOOKUP_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 86400:
        raise ConfigError(ConfigProblem(f"{raw!r} is not a number of seconds", key=LOOKUP_ENV,
                                        expected="a number from 0 to 86400"))
    return value


def numeric_job_order(job_id: str) -> tuple[int, str]:
    """Sort key of job ids by their number (``99`` before ``100``; PBS server suffixes ignored)."""
    digits = "".join(c for c in job_id.split(".")[0] if is_ascii_digits(c))
    return (int(digits) if digits else 0, job_id)


@dataclass(frozen=True)
class TagLookup:
    """What one tag query found.

    Attributes:
        found: Token → job ids carrying it (lowest first), for this sweep's jobs only.
        conclusive: The scheduler's live queue answered, so a token missing from ``found`` is
            not queued (``False``: the query failed; nothing can be concluded from absence).
        waited: Seconds spent waiting between polls.
    """

    found: dict[str, list[str]] = field(default_factory=dict)
    conclusive: bool = False
    waited: float = 0.0


def tagged_jobs(client: SchedulerClient, sweep_id: str, name: str, user: str, *, history: bool = True,
                backlog: bool = True) -> TagLookup:
    """One batched query of the user's jobs called ``name``, by tag (no per-job calls).

    Args:
        client: The scheduler client.
        sweep_id: Only tags of this sweep count.
        name: The experiment's job name (narrows the query where the scheduler can filter).
        user: Whose jobs.
        history: Also ask accounting for finished jobs (``sacct`` on Slurm); else the live queue only.
        backlog: With ``history``, first ask whether the scheduler holds records its history lacks yet
            (``sdiag`` on Slurm, right after an accounting outage); if it does, the lookup is not
            conclusive about what it did not find. Off for the check that a new ledger starts clean,
            which must not stop every new sweep of a busy cluster.
    """
    backend = client.backend
    argvs = backend.tag_query_argvs(name, user)
    found: dict[str, list[str]] = {}
    # Asked before the live queue: a job that leaves the queue after this answer was still in it when
    # the queue was asked (MinJobAge), and one that left before is in the history unless held back.
    conclusive = not (history and backlog and _history_held_back(client))
    for i, argv in enumerate(argvs if history else argvs[:1]):
        # Any query that does not answer makes the lookup inconclusive: a job that finished and left
        # the live queue is only in the history, so a failed history query is never "not submitted".
        # The one exception is a scheduler that says it keeps no history at all (Slurm without
        # accounting storage): its live queue is all there is to ask.
        try:
            result = client.run(argv, check=False)
        except HpcJobsError as exc:
            log.warning("could not look up submissions (%s)", exc)
            conclusive = False
            continue
        if result.returncode != 0:
            no_history = i > 0 and _keeps_no_history(backend, result.stderr)
            log.warning("could not look up submissions: %s exited %d: %s%s", argv[0], result.returncode,
                        printable(result.stderr.strip()[:500]),
                        " (the scheduler keeps no history: its live queue decides)" if no_history else "")
            conclusive = conclusive and no_history
            if not result.stdout.strip():
                continue
        try:
            pairs = backend.parse_tag_query(result.stdout)
        except HpcJobsError as exc:
            log.warning("could not read the submissions %s listed (%s)", argv[0], exc)
            conclusive = False
            continue
        for job_id, comment in pairs:
            tag = parse_job_tag(comment)
            if tag and tag.sweep_id == sweep_id and job_id not in found.setdefault(tag.token, []):
                found[tag.token].append(job_id)
    return TagLookup({t: sorted(j, key=numeric_job_order) for t, j in found.items()}, conclusive)


def _history_held_back(client: SchedulerClient) -> bool:
    """Whether the scheduler says it holds records its history does not have yet (then no "no" is final).

    A backend without such a call, or a call that fails or does not say (a site may restrict it), is
    taken at its history's word, as before.
    """
    backend = client.backend
    argv = backend.history_backlog_argv()
    if argv is None:
        return False
    try:
        result = client.run(argv, check=False)
    except HpcJobsError as exc:
        log.debug("could not ask %s for its history backlog (%s)", argv[0], exc)
        return False
    held = backend.parse_history_backlog(result.stdout) if result.returncode == 0 else None
    if held:
        log.warning("%s says %d record(s) are not in the scheduler's accounting yet: a job missing from its "
                    "history may still be there", argv[0], held)
    return bool(held)


def _keeps_no_history(backend: SchedulerBackend, stderr: str) -> bool:
    """Whether a failed history query says the scheduler keeps no history (not that it is down)."""
    return backend.accounting_disabled(stderr)


def await_tokens(client: SchedulerClient, tokens: Collection[str], sweep_id: str, name: str, user: str, *,
                 seconds: float, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, initial: float = 1.0,
                 maximum: float = 15.0) -> TagLookup:
    """Poll the live queue (one query per poll, backoff ``initial`` doubling to ``maximum``) for ``tokens``.

    Returns as soon as every token is found. When the time is up, a last query that includes the
    scheduler's history decides (a job may already have finished and left the queue). A history
    query that fails is asked again :data:`HISTORY_RETRIES` times with backoff; still failing, the
    lookup is inconclusive: the callers then submit nothing for what it did not find.

    Args:
        seconds: How long to keep looking (the waits never add up to more).
        sleep: Injected for tests.
        clock: Injected for tests.
    """
    wanted = set(tokens)
    start, waited, delay = clock(), 0.0, initial
    while True:
        look = tagged_jobs(client, sweep_id, name, user, history=False)
        if wanted <= set(look.found):
            return TagLookup(look.found, True, waited)
        elapsed = max(waited, clock() - start)
        if elapsed + delay > seconds:
            break
        sleep(delay)
        waited += delay
        delay = min(delay * 2, maximum)
    final = tagged_jobs(client, sweep_id, name, user, history=True)
    # The history did not answer (accounting down, a timeout): ask again with backoff a few times
    # before the caller is told that nothing can be concluded (it then submits nothing).
    for _ in range(HISTORY_RETRIES):
        if final.conclusive or wanted <= set(final.found):
            break
        sleep(delay)
        waited += delay
        delay = min(delay * 2, maximum)
        final = tagged_jobs(client, sweep_id, name, user, history=True)
    conclusive = final.conclusive or wanted <= set(final.found)
    return TagLookup(final.found, conclusive, waited)


def settle_unseen(ledger: Ledger, client: SchedulerClient, subs: Sequence[Submission],
                  records: Sequence[JobStatus] | StatusTable, *, user: str | None = None) -> list[str]:
    """After a status poll: give job ids the scheduler did not report a grace period, then release them.

    A submission whose id has been missing from :data:`LOST_AFTER_POLLS` polls in a row over at least
    the lookup time is looked up by its tag (one query): found under another id, that id is recorded;
    not found (and the query answered), the attempt is marked lost and its points become pending.

    Returns:
        The tokens marked lost.
    """
    if isinstance(records, StatusTable):
        covered = {s.token for s in subs if s.job_id and records.covers(s.job_id, same_job_of(client.backend))}
    else:
        covered = {s.token for s in subs if s.job_id and client.covers(records, s.job_id)}
    unseen = [s for s in subs if s.token not in covered]
    counts = ledger.note_unseen([s.token for s in unseen], covered)
    grace, now = default_lookup_seconds(), time.time()
    due = [s for s in unseen if s.token in counts and counts[s.token].misses >= LOST_AFTER_POLLS
           and now - counts[s.token].first_miss_at >= grace and now - s.created_at <= LOST_MAX_AGE_S]
    if not due:
        return []
    meta = ledger.meta
    name = str(meta.extra.get("name") or meta.sweep_id.rsplit("-", 1)[0])
    look = tagged_jobs(client, meta.sweep_id, name, user or getpass.getuser())
    if not look.conclusive:
        undecided = [s for s in due if not look.found.get(s.token)]
        if undecided:
            log.warning("%d job(s) of sweep %s are not in the scheduler's live queue and its accounting did not "
                        "answer: their points keep their last known state until it does (%s)", len(undecided),
                        meta.sweep_id, ", ".join(str(s.job_id) for s in undecided[:5])
                        + (", ..." if len(undecided) > 5 else ""))
    lost = []
    for s in due:
        jobs = look.found.get(s.token)
        try:
            if jobs and s.job_id not in jobs:
                ledger.correct_job_id(s.token, jobs[0], "the scheduler holds this attempt's tag under that id")
            elif not jobs and look.conclusive:
                n = counts[s.token].misses
                ledger.mark_lost(s.token, f"is unknown to the scheduler ({n} status polls over "
                                          f"{now - counts[s.token].first_miss_at:.0f} s) and no job carries token "
                                          f"{s.token}")
                log.warning("job %s of sweep %s is unknown to the scheduler: marked lost, its points are pending "
                            "again", s.job_id, meta.sweep_id)
                lost.append(s.token)
        except LedgerError as exc:  # a status arrived in between: the job exists
            log.info("not lost: %s", exc)
    return lost


def still_queued(client: SchedulerClient, points: Sequence[PointRecord]) -> dict[str, str]:
    """The points whose job the live queue still holds, active, though the ledger has them finished.

    A job the scheduler requeued (after a node failure, a preemption, ``scontrol requeue``) can read
    as finished in accounting while it waits to run again: resubmitting its points would run them
    twice. One batched queue call (``squeue``, ``qstat``) decides.

    Returns:
        Point id -> the job id the queue holds it under.

    Raises:
        CommandError: The queue did not answer (resubmitting blind could run points twice).
    """
    wanted = [p for p in points if p.array_job_id or p.job_id]
    ids = sorted({p.array_job_id or p.job_id or "" for p in wanted})
    active = [r for r in client.queue_status(ids) if r.state in states.ACTIVE_STATES]
    if not active:
        return {}
    same = client.backend.same_job
    out = {}
    for p in wanted:
        for r in active:
            if p.array_job_id and r.array_job_id and same(r.array_job_id, p.array_job_id) and (
                    r.array_task_id is None or r.array_task_id == p.array_index):
                out[p.point_id] = r.job_id
                break
            if p.job_id and same(r.job_id, p.job_id):
                out[p.point_id] = r.job_id
                break
    return out
