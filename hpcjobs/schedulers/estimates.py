"""What a scheduler answers ``hpcjobs plan``: a start estimate for a request, the state of a queue.

Plain values, shared by the backends that answer them (:class:`~hpcjobs.schedulers.base.Capabilities`
``start_estimate`` and ``queue_states``) and by :mod:`hpcjobs.plan.api`, which reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class StartEstimate:
    """What the scheduler's start estimate (Slurm's ``sbatch --test-only``) answered.

    Attributes:
        start: When the scheduler expects the job to start (UTC); ``None`` when it gave no estimate.
        processors: CPUs it would allocate.
        nodes: The nodes it would use (the scheduler's host list, e.g. ``n[1-4]``).
        partition: The partition it chose.
        error: Why there is no estimate (the scheduler's own words), ``None`` when there is one.
        refusal: Why the request can never run there (it does not fit that partition), in words that
            name the scheduler; ``None`` when it was not refused.
    """

    start: datetime | None
    processors: int | None = None
    nodes: str | None = None
    partition: str | None = None
    error: str | None = None
    refusal: str | None = None


@dataclass(frozen=True)
class QueueState:
    """One queue as the scheduler shows it (PBS ``qstat -Q -f``).

    Attributes:
        name: The queue.
        queue_type: ``Execution`` or ``Route``.
        enabled: Accepts new jobs.
        started: Runs its jobs.
        queued: Jobs queued (state Q).
        running: Jobs running (state R).
        held: Jobs held (state H).
        total: All its jobs.
    """

    name: str
    queue_type: str
    enabled: bool
    started: bool
    queued: int
    running: int
    held: int
    total: int

    @property
    def state(self) -> str:
        """``enabled, started``, or what it is not."""
        return f"{'enabled' if self.enabled else 'disabled'}, {'started' if self.started else 'stopped'}"
