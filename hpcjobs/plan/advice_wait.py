"""Expected queue wait of the request a right-sizing advice proposes, against the request the runs made.

``hpcjobs advise`` proposes a shorter wall time (and sometimes fewer GPUs); a smaller request usually
starts sooner, because Slurm's backfill scheduler starts a lower-priority job early when it ends
before the reserved start of a higher-priority one (Slurm's scheduling configuration guide,
https://slurm.schedmd.com/sched_config.html). This module puts a number on it from the same history
``hpcjobs plan`` reads (:mod:`hpcjobs.plan.history`: the jobs of the last N days on the runs' partition):

* **similar jobs**: the jobs with the same GPU count (in all) and node count and a wall-time limit
  within half and twice the request's, as ``plan`` counts them (:func:`~hpcjobs.plan.history.similar_wait`);
  their median and 90th-percentile wait, for the asked and for the proposed request;
* **wall-time class**: the jobs of the same GPU and node count whose limit falls in the same class
  (:data:`WALLTIME_CLASSES`: up to 15 minutes, 1, 4, 12 hours, 1 and 3 days, longer), a coarser and
  larger sample that shows how the wait grows with the wall time asked.

A figure is given only when at least ``min_jobs`` jobs are behind it; fewer give the count and no
figure (nothing is estimated from a handful of jobs).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hpcjobs.errors import HpcJobsError
from hpcjobs.plan.history import similar_wait
from hpcjobs.units import format_duration_short as duration_text

if TYPE_CHECKING:
    from hpcjobs.accounting.reports.advise import Advice

log = logging.getLogger(__name__)

#: Similar jobs needed before a median and p90 are given.
MIN_SIMILAR_JOBS = 5

#: Wall-time classes: (upper bound in seconds, inclusive; label), shortest first.
WALLTIME_CLASSES: tuple[tuple[float, str], ...] = (
    (15 * 60, "<=15m"), (3600, "15m-1h"), (4 * 3600, "1h-4h"), (12 * 3600, "4h-12h"), (86400, "12h-1d"),
    (3 * 86400, "1d-3d"), (math.inf, ">3d"))


def walltime_class(seconds: float | None) -> str | None:
    """The label of the :data:`WALLTIME_CLASSES` class of a wall time (``None``: no wall time)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return next(label for bound, label in WALLTIME_CLASSES if seconds <= bound)


def _bounds(label: str) -> tuple[float, float]:
    """(exclusive lower, inclusive upper) seconds of a class."""
    lower = 0.0
    for bound, name in WALLTIME_CLASSES:
        if name == label:
            return lower, bound
        lower = bound
    raise ValueError(f"no wall-time class {label!r}")


@dataclass(frozen=True)
class WaitFigures:
    """The wait of a set of jobs.

    Attributes:
        jobs: How many jobs.
        p50_s: Median wait in seconds (``None``: too few jobs).
        p90_s: 90th-percentile wait in seconds (``None``: too few jobs).
    """

    jobs: int
    p50_s: float | None = None
    p90_s: float | None = None


@dataclass(frozen=True)
class RequestWait:
    """The expected wait of one request on the partition.

    Attributes:
        walltime_s: Its wall time (``None``: none known).
        gpus: GPUs in all.
        nodes: Nodes.
        similar: Jobs with the same GPUs and nodes and a wall time within x0.5-x2.
        walltime_class: The :data:`WALLTIME_CLASSES` label of the wall time.
        in_class: Jobs with the same GPUs and nodes in that class.
    """

    walltime_s: int | None
    gpus: int
    nodes: int
    similar: WaitFigures
    walltime_class: str | None
    in_class: WaitFigures


@dataclass(frozen=True)
class WaitComparison:
    """Expected queue wait of the asked and of the proposed request.

    Attributes:
        partition: The partition (the scheduler's name, as accounting records it).
        days: Days of history looked at (0: none).
        history_jobs: Jobs in that history.
        min_jobs: Jobs needed for a figure.
        asked: The wait of the request the runs made (``None``: not computed).
        proposed: The wait of the proposed request (``None``: no proposal).
        error: Why the history could not be read, when it could not.
        note: One line for people.
    """

    partition: str | None
    days: int
    history_jobs: int
    min_jobs: int
    asked: RequestWait | None
    proposed: RequestWait | None
    error: str | None = None
    note: str = ""

    def difference(self, which: str = "similar", stat: str = "p50_s") -> float | None:
        """Proposed minus asked (seconds; negative: shorter) of ``similar``/``in_class`` ``p50_s``/``p90_s``."""
        if self.asked is None or self.proposed is None:
            return None
        a = getattr(getattr(self.asked, which), stat)
        p = getattr(getattr(self.proposed, which), stat)
        return None if a is None or p is None else float(p - a)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, flat: ``wait_asked_p50_s``, ``wait_proposed_p50_s``, ``wait_diff_p50_s``, ... and the
        same with ``class_`` for the wall-time class (``None`` where there is no figure)."""
        out: dict[str, Any] = {"partition": self.partition, "days": self.days, "history_jobs": self.history_jobs,
                               "min_jobs": self.min_jobs, "error": self.error, "note": self.note}
        for name, req in (("asked", self.asked), ("proposed", self.proposed)):
            out[f"walltime_{name}_s"] = req.walltime_s if req else None
            out[f"gpus_{name}"] = req.gpus if req else None
            out[f"nodes_{name}"] = req.nodes if req else None
            out[f"wait_{name}_jobs"] = req.similar.jobs if req else None
            out[f"wait_{name}_p50_s"] = req.similar.p50_s if req else None
            out[f"wait_{name}_p90_s"] = req.similar.p90_s if req else None
            out[f"class_{name}"] = req.walltime_class if req else None
            out[f"class_{name}_jobs"] = req.in_class.jobs if req else None
            out[f"class_{name}_p50_s"] = req.in_class.p50_s if req else None
            out[f"class_{name}_p90_s"] = req.in_class.p90_s if req else None
        for stat in ("p50_s", "p90_s"):
            out[f"wait_diff_{stat}"] = self.difference("similar", stat)
            out[f"class_diff_{stat}"] = self.difference("in_class", stat)
        return out


def _figures(waits: np.ndarray, min_jobs: int) -> WaitFigures:
    if len(waits) < min_jobs or len(waits) == 0:
        return WaitFigures(len(waits))
    q50, q90 = np.quantile(waits, [0.5, 0.9], method="linear")
    return WaitFigures(len(waits), float(q50), float(q90))


def request_wait(history: pd.DataFrame, *, partition: str, gpus: int, nodes: int, walltime_s: int | None,
                 min_jobs: int = MIN_SIMILAR_JOBS) -> RequestWait:
    """The wait of similar jobs and of the jobs of the same wall-time class, for one request.

    Args:
        history: :func:`hpcjobs.plan.history.compact_history` rows.
        partition: The partition (scheduler name).
        gpus: GPUs in all.
        nodes: Nodes.
        walltime_s: Wall time (``None``: any, and no class).
        min_jobs: Jobs needed for a figure.
    """
    stats = similar_wait(history, gpus=gpus, nodes=nodes, walltime_s=walltime_s, partitions=[partition]) \
        if len(history) else {}
    s = stats.get(partition)
    similar = (WaitFigures(0) if s is None else
               WaitFigures(s.jobs, s.p50_s, s.p90_s) if s.jobs >= min_jobs else WaitFigures(s.jobs))
    label = walltime_class(walltime_s)
    if label is None or not len(history):
        return RequestWait(walltime_s, gpus, nodes, similar, label, WaitFigures(0))
    lower, upper = _bounds(label)
    limit = history["limit_s"].to_numpy(dtype=float)
    mask = ((history["gpus"].to_numpy() == gpus) & (history["nodes"].to_numpy() == nodes)
            & (history["partition"].astype("string") == partition).fillna(False).to_numpy(dtype=bool)
            & (limit > lower) & (limit <= upper))
    waits = history["wait_s"].to_numpy(dtype=float)[mask]
    return RequestWait(walltime_s, gpus, nodes, similar, label, _figures(waits[~np.isnan(waits)], min_jobs))


def compare_wait(history: pd.DataFrame, *, partition: str | None, nodes: int, asked_walltime_s: int | None,
                 asked_gpus: int, proposed_walltime_s: int | None, proposed_gpus: int | None = None,
                 min_jobs: int = MIN_SIMILAR_JOBS, days: int = 0) -> WaitComparison:
    """The expected wait of the asked and of the proposed request on ``partition`` (see the module docs).

    Args:
        history: :func:`hpcjobs.plan.history.compact_history` rows.
        partition: The runs' partition (``None``: unknown, nothing compared).
        nodes: Their node count.
        asked_walltime_s: The wall time they asked for.
        asked_gpus: The GPUs they asked for, in all.
        proposed_walltime_s: The proposed wall time (``None``: no proposal).
        proposed_gpus: The proposed GPUs (``None``: as asked).
        min_jobs: Jobs needed for a figure.
        days: Days of history (for the result and the note).
    """
    if partition is None:
        return WaitComparison(None, days, len(history), min_jobs, None, None,
                              note="the runs' partition is unknown: no queue wait to compare")
    asked = request_wait(history, partition=partition, gpus=asked_gpus, nodes=nodes, walltime_s=asked_walltime_s,
                         min_jobs=min_jobs)
    proposed = None
    if proposed_walltime_s is not None or proposed_gpus is not None:
        gpus = asked_gpus if proposed_gpus is None else proposed_gpus
        proposed = request_wait(history, partition=partition, gpus=gpus, nodes=nodes,
                                walltime_s=proposed_walltime_s or asked_walltime_s, min_jobs=min_jobs)
    result = WaitComparison(partition, days, len(history), min_jobs, asked, proposed)
    return WaitComparison(partition, days, len(history), min_jobs, asked, proposed, note=_note(result))


def _note(c: WaitComparison) -> str:
    where = f"on {c.partition}" + (f" in the last {c.days} days" if c.days else "")
    asked, proposed = c.asked, c.proposed
    assert asked is not None
    if proposed is None:
        if asked.similar.p50_s is None:
            return f"no proposal; too few similar jobs {where} for the asked request ({asked.similar.jobs} found, " \
                   f"{c.min_jobs} needed)"
        return f"no proposal; median wait of {asked.similar.jobs} similar jobs {where}: " \
               f"{duration_text(asked.similar.p50_s)}"
    missing = [name for name, r in (("asked", asked), ("proposed", proposed)) if r.similar.p50_s is None]
    if missing:
        counts = ", ".join(f"{name} {r.similar.jobs}" for name, r in (("asked", asked), ("proposed", proposed)))
        text = f"too few similar jobs {where} to estimate the wait of the {' and '.join(missing)} request " \
               f"({counts} found, {c.min_jobs} needed)"
        diff = c.difference("in_class")
        if diff is not None:
            text += f"; by wall-time class {asked.walltime_class} -> {proposed.walltime_class}: median " \
                    f"{_change(diff)}"
        return text
    diff = c.difference()
    assert diff is not None
    return f"median wait of similar jobs {where}: {duration_text(asked.similar.p50_s)} asked, " \
           f"{duration_text(proposed.similar.p50_s)} proposed ({_change(diff)}; {asked.similar.jobs} and " \
           f"{proposed.similar.jobs} jobs)"


def _change(diff: float) -> str:
    if diff == 0:
        return "no change"
    return f"{duration_text(abs(diff))} {'less' if diff < 0 else 'more'}"


def load_wait_history(scheduler: str | None, days: int, *, now: datetime | None = None,
                      cache_dir: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The compact history ``hpcjobs plan`` reads (:func:`hpcjobs.plan.history.wait_history`): ``sacct``
    windows (cached) on Slurm, ``qstat -x`` on PBS Pro.

    Raises:
        HpcJobsError: No live history for this scheduler, or the scheduler's command failed.
    """
    from hpcjobs.plan.history import wait_history

    history = wait_history(scheduler, days, now=now or datetime.now(timezone.utc), cache_dir=cache_dir)
    if history is None:
        raise HpcJobsError(f"no live accounting history of queue waits for {scheduler or 'an unknown scheduler'}")
    return history


def advice_wait(advice: Advice, jobs: pd.DataFrame, *, days: int, min_jobs: int = MIN_SIMILAR_JOBS,
                now: datetime | None = None, cache_dir: str | os.PathLike[str] | None = None) -> WaitComparison:
    """The queue wait of an advice's proposal against the runs' request, from the last ``days`` days.

    The asked request is the runs' largest wall-time limit and GPU count and their most common node
    count; the proposed one the advice's wall time and GPUs (as asked where it proposes none). A history
    that cannot be read gives a comparison with ``error`` set (never an exception).

    Args:
        advice: The advice (:func:`hpcjobs.accounting.reports.advise.advise`).
        jobs: The runs' accounting rows (job and step rows).
        days: Days of history.
        min_jobs: Jobs needed for a figure.
        now: The current time (tests).
        cache_dir: Cache folder of the accounting windows.
    """
    rows = jobs[jobs["step"].isna().to_numpy(dtype=bool)] if "step" in jobs else jobs
    nodes_known = rows["nodes"].dropna() if "nodes" in rows else pd.Series(dtype=float)
    nodes = int(nodes_known.astype(int).mode().min()) if len(nodes_known) else 1
    gpus_known = rows["gpus"].dropna() if "gpus" in rows else pd.Series(dtype=float)
    asked_gpus = int(gpus_known.max()) if len(gpus_known) else 0
    wall = next((r for r in advice.resources if r.resource == "walltime"), None)
    asked_wall = wall.asked if wall is not None else None
    gpu_advice = advice.proposed("gpus")
    proposed_wall = advice.proposed("walltime")
    if advice.partition is None:
        return compare_wait(pd.DataFrame(), partition=None, nodes=nodes, asked_walltime_s=asked_wall,
                            asked_gpus=asked_gpus, proposed_walltime_s=proposed_wall, days=days)
    try:
        history = load_wait_history(advice.scheduler, days, now=now, cache_dir=cache_dir)
    except HpcJobsError as exc:
        log.info("history of queue waits not read: %s", exc)
        error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return WaitComparison(advice.partition, days, 0, min_jobs, None, None, error,
                              f"queue wait not compared: history not read ({error})")
    return compare_wait(history, partition=advice.partition, nodes=nodes, asked_walltime_s=asked_wall,
                        asked_gpus=asked_gpus, proposed_walltime_s=proposed_wall, proposed_gpus=gpu_advice,
                        min_jobs=min_jobs, days=days)


__all__ = [
    "MIN_SIMILAR_JOBS",
    "WALLTIME_CLASSES",
    "RequestWait",
    "WaitComparison",
    "WaitFigures",
    "advice_wait",
    "compare_wait",
    "duration_text",
    "load_wait_history",
    "request_wait",
    "walltime_class",
]
