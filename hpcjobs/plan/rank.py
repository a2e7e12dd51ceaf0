"""One row per partition (and QOS) and the rule that recommends one.

The rule (:func:`recommend`), among the rows where the request fits (and, on PBS, whose queue is
enabled and started):

1. the earliest expected start from ``sbatch --test-only`` (starts within the same minute tie; a
   row with no estimate comes after every row with one);
2. then the lowest historical median queue wait of similar jobs on that partition (no history:
   after every row with one);
3. then the lowest cost in billing-hours (CPU-hours where the partition has no billing weights);
4. then the site's order of partitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from hpcjobs.units import format_duration_short


@dataclass(frozen=True)
class PlanRow:
    """What ``hpcjobs plan`` knows about running the request on one partition (and QOS).

    Attributes:
        partition: The site's partition entry.
        qos: The QOS the job would run under (``None``: the scheduler's default).
        fits: Whether hpcjobs would submit it there (its limits, the QOS's limits, the queue's state).
        why_not: Why not, one reason per broken limit.
        start: Slurm's expected start (``sbatch --test-only``), UTC.
        start_nodes: The nodes Slurm would use.
        estimate_error: Why there is no start estimate (Slurm's words), when one was asked for.
        wait_jobs: Similar jobs found in the history of this partition.
        wait_p50_s: Their median queue wait, seconds.
        wait_p90_s: Their 90th-percentile queue wait, seconds.
        core_hours: CPU-hours at the requested wall time.
        gpu_hours: GPU-hours at the requested wall time.
        billing_hours: Billing units × hours (``billing_known``: from the partition's TRESBillingWeights).
        billing_known: See ``billing_hours``.
        queue_state: PBS: ``enabled, started`` or what is not; ``None`` elsewhere.
        queued: PBS: jobs queued in the queue now.
        running: PBS: jobs running in the queue now.
    """

    partition: str
    qos: str | None = None
    fits: bool = True
    why_not: tuple[str, ...] = ()
    start: datetime | None = None
    start_nodes: str | None = None
    estimate_error: str | None = None
    wait_jobs: int = 0
    wait_p50_s: float | None = None
    wait_p90_s: float | None = None
    core_hours: float | None = None
    gpu_hours: float | None = None
    billing_hours: float | None = None
    billing_known: bool = False
    queue_state: str | None = None
    queued: int | None = None
    running: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        """``partition`` or ``partition/qos``."""
        return f"{self.partition}/{self.qos}" if self.qos else self.partition


def _start_minutes(row: PlanRow, now: datetime) -> float:
    if row.start is None:
        return math.inf
    return max(0.0, (row.start - now).total_seconds()) // 60


def rank_key(row: PlanRow, now: datetime, order: int = 0) -> tuple[float, float, float, int]:
    """The sort key of the rule: minutes to the expected start, median wait, cost, site order."""
    p50 = row.wait_p50_s if row.wait_p50_s is not None else math.inf
    cost = row.billing_hours if row.billing_hours is not None else math.inf
    return (_start_minutes(row, now), p50, cost, order)


def recommend(rows: Sequence[PlanRow], now: datetime) -> tuple[PlanRow | None, str]:
    """The row the rule picks, and why in one line (see the module's docstring for the rule).

    Args:
        rows: The rows, in the site's order of partitions.
        now: When the estimates were asked for (UTC).

    Returns:
        The chosen row (``None`` when the request fits nowhere) and the reason.
    """
    ranked = sorted(((rank_key(r, now, i), r) for i, r in enumerate(rows) if r.fits), key=lambda kr: kr[0])
    if not ranked:
        return None, "the request fits no partition of the site: " + "; ".join(
            f"{r.label}: {', '.join(r.why_not) or 'not available'}" for r in rows)
    (key, best), rest = ranked[0], ranked[1:]
    where = f"{len(ranked)} partition{'s' if len(ranked) != 1 else ''} where it fits"
    if math.isfinite(key[0]):
        when = "now" if key[0] == 0 else f"in {format_duration_short(key[0] * 60)}"
        reason = f"expected to start {when} (sbatch --test-only), the earliest of {where}"
    else:
        reason = f"no start estimate; chosen among {where} by historical wait and cost"
    tied = [r for k, r in rest if k[0] == key[0]]
    if tied and math.isfinite(key[0]):
        reason += f" (tied with {', '.join(r.label for r in tied)})"
    if tied or not math.isfinite(key[0]):
        same_wait = [r for k, r in rest if k[:2] == key[:2]]
        if math.isfinite(key[1]):
            reason += f"; median wait of {best.wait_jobs} similar jobs {format_duration_short(key[1])}"
            if not same_wait:
                other = min((k[1] for k, r in rest if k[0] == key[0]), default=math.inf)
                if math.isfinite(other):
                    reason += f" (next best {format_duration_short(other)})"
        else:
            reason += "; no history of similar jobs"
        if same_wait:
            same_cost = [r for k, r in rest if k[:3] == key[:3]]
            if math.isfinite(key[2]) and not same_cost:
                unit = "billing-hours" if best.billing_known else "CPU-hours"
                reason += f"; lowest cost {key[2]:.4g} {unit}"
            else:
                reason += "; same cost: first in the site's order"
    return best, reason


