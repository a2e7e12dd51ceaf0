"""Splitting a sweep into job-array chunks, and telling transient scheduler errors from real ones.

Pure functions: the submitter (:mod:`hpcjobs.sweep.submitter`) decides *when* to call the
scheduler; this module decides *how much* goes in one call and *whether* a failure is worth
retrying.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Array size used when neither the scheduler nor the site says (Slurm's default MaxArraySize).
DEFAULT_MAX_ARRAY_SIZE = 1001

#: stderr fragments of scheduler failures that go away by themselves (retry with backoff).
TRANSIENT_PATTERNS: tuple[str, ...] = (
    r"Socket timed out on send/recv operation",
    r"Resource temporarily unavailable",
    r"Unable to contact slurm controller",
    r"Slurm temporarily unable to accept job",
    r"slurm_persist_conn_open_without_init",
    r"Zero Bytes were transmitted or received",
    r"QOSMaxSubmitJobPerUserLimit",
    r"AssocMaxSubmitJobLimit",
    r"MaxSubmitJobsPerUser",
    r"Job violates accounting/QOS policy",
    r"Communication connection failure",
    r"Connection refused",
    r"cannot connect to server",  # PBS
    r"Maximum number of jobs already in queue",  # PBS qsub: PBSE_MAXQUED
    r"would exceed (?:complex|queue|server) max_queued",  # PBS
    r"pbs_iff: cannot read reply",
)
_TRANSIENT_RE = re.compile("|".join(TRANSIENT_PATTERNS), re.IGNORECASE)

#: stderr fragments meaning "the queue is full for you": wait for jobs to leave, then trickle in.
QUEUE_FULL_PATTERNS = re.compile(
    r"QOSMaxSubmitJobPerUserLimit|AssocMaxSubmitJobLimit|MaxSubmitJobsPerUser|max_queued|"
    r"Maximum number of jobs already in queue",
    re.IGNORECASE,
)


def is_transient(stderr: str) -> bool:
    """Whether a failed scheduler call is worth retrying (timeouts, busy controller, full queue)."""
    return bool(_TRANSIENT_RE.search(stderr or ""))


def is_queue_full(stderr: str) -> bool:
    """Whether a failure means the user's submit limit is reached (wait for the queue to drain)."""
    return bool(QUEUE_FULL_PATTERNS.search(stderr or ""))


def chunk_capacity(max_array_size: int | None, site_max: int | None = None) -> int:
    """Tasks per array chunk: ``MaxArraySize - 1``, the site's limit winning when it is stricter.

    Slurm's MaxArraySize bounds the array *index* (indices ``0..MaxArraySize-1``); hpcjobs keeps
    each chunk to ``MaxArraySize - 1`` tasks with indices re-based to start at 0 in every chunk.
    """
    sizes = [s for s in (max_array_size, site_max) if s]
    size = min(sizes) if sizes else DEFAULT_MAX_ARRAY_SIZE
    return max(1, size - 1)


@dataclass(frozen=True)
class Chunk:
    """Consecutive sweep points submitted as one array: indices ``0..len(point_ids)-1``."""

    number: int
    point_ids: tuple[str, ...]

    @property
    def size(self) -> int:
        """Number of array tasks."""
        return len(self.point_ids)


def plan_chunks(point_ids: Sequence[str], capacity: int, first_number: int = 0) -> list[Chunk]:
    """Split ``point_ids`` (in order) into chunks of at most ``capacity`` tasks.

    ``first_number`` numbers the chunks after those an earlier submission already used.
    """
    if capacity < 1:
        raise ValueError("chunk capacity must be at least 1")
    return [
        Chunk(first_number + i, tuple(point_ids[start:start + capacity]))
        for i, start in enumerate(range(0, len(point_ids), capacity))
    ]


def room_in_queue(limit: int | None, queued: int) -> int | None:
    """How many more tasks the user may queue (``None``: no known limit)."""
    if limit is None:
        return None
    return max(0, limit - queued)
