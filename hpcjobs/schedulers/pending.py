"""Why a job waits: the scheduler-neutral answer a backend's ``explain_pending`` gives (``hpcjobs why``).

A backend that declares ``capabilities.explains_pending`` asks its scheduler about a set of jobs in a fixed
number of calls, however many jobs there are, and returns a :class:`PendingQuery`: one
:class:`PendingJob` per waiting job (an array's waiting tasks as one entry, as the scheduler lists them),
each with its reason in plain words (:class:`Reason`) and what the scheduler said around it (priority
and its factors, fair share, expected start, the limit and how much of it is in use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from hpcjobs.process import CommandResult

#: What kind of wait a reason is: the queue is working (``wait``), a limit of the user's QOS or account
#: (``limit``), another job (``dependency``), someone held it (``hold``), the request itself can never
#: start as asked (``request``), the cluster's nodes or partitions (``cluster``), anything else.
ReasonKind = Literal["wait", "limit", "dependency", "hold", "request", "cluster", "other"]

#: Runs one scheduler command (through the process seam) and returns its result, whatever its exit status.
QueryRun = Callable[[list[str]], CommandResult]


@dataclass(frozen=True)
class Reason:
    """A scheduler's pending reason, explained.

    Attributes:
        code: The scheduler's own word (``QOSMaxJobsPerUserLimit``, a PBS comment).
        summary: What it means, in plain words.
        action: What would change it (what the user can do, or that waiting is enough).
        kind: See :data:`ReasonKind`.
        source: Where the explanation comes from (the scheduler's documentation).
    """

    code: str
    summary: str
    action: str
    kind: ReasonKind
    source: str = ""


@dataclass
class PendingJob:
    """One waiting job (or an array's waiting tasks), as the scheduler described it.

    Attributes:
        job_id: The scheduler's id of the job or of the array's waiting tasks (``1517_[3-10]``).
        tasks: How many tasks the entry stands for (an array's waiting tasks).
        reason: The explained reason; ``detail`` what the scheduler said besides the code (nodes, a job id).
        user, account, partition, qos: The job's.
        priority: The job's priority (the scheduler's number; larger starts first on Slurm).
        factors: The priority's parts (``age``, ``fairshare``, ``jobsize``, ``partition``, ``qos``), when known.
        fair_share: The user's fair-share factor (0 to 1; below 0.5: more than their share used lately).
        expected_start: The scheduler's estimate of the start, when it made one.
        submitted: When the job was submitted.
        time_limit_s, nodes, cpus: What the job asked for.
        dependency: The dependency the job waits for, as the scheduler writes it.
        limits: The limit in the way and how much of it is used (``QOS whytest: MaxJobsPU 1, 1 running``).
    """

    job_id: str
    reason: Reason
    detail: str = ""
    tasks: int = 1
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    priority: int | None = None
    factors: dict[str, float] = field(default_factory=dict)
    fair_share: float | None = None
    expected_start: datetime | None = None
    submitted: datetime | None = None
    time_limit_s: int | None = None
    nodes: int | None = None
    cpus: int | None = None
    dependency: str = ""
    limits: list[str] = field(default_factory=list)


@dataclass
class PendingQuery:
    """What one ``explain_pending`` learnt.

    Attributes:
        pending: The waiting jobs.
        others: Jobs that are not waiting, with their state (``RUNNING``), or ``GONE`` when the queue no
            longer lists them (finished: ``hpcjobs status`` and ``report`` tell how).
        calls: Every scheduler command run, in order (their number does not grow with the jobs).
        notes: What a person should know about the answer (a priority plugin with no factors, a command
            that failed and what was left out).
    """

    pending: list[PendingJob] = field(default_factory=list)
    others: dict[str, str] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def by_reason(self) -> list[tuple[Reason, list[PendingJob]]]:
        """The waiting jobs grouped by reason code, the largest group first."""
        groups: dict[str, list[PendingJob]] = {}
        for job in self.pending:
            groups.setdefault(job.reason.code, []).append(job)
        ordered = sorted(groups.values(), key=lambda jobs: (-sum(j.tasks for j in jobs), jobs[0].reason.code))
        return [(jobs[0].reason, jobs) for jobs in ordered]


def job_ids_argument(job_ids: Sequence[str]) -> str:
    """Ids as one comma-separated argument (each already checked as a job id by the caller)."""
    return ",".join(dict.fromkeys(job_ids))


__all__ = ["PendingJob", "PendingQuery", "QueryRun", "Reason", "ReasonKind", "job_ids_argument"]
