"""The normalised job-state vocabulary shared by every backend and the reports.

Pandas-free: status polling on a login node imports this, not the reports.
Each scheduler maps its raw state codes onto these names; the raw value is
always kept beside the normalised one.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass

PENDING = "PENDING"
HELD = "HELD"
RUNNING = "RUNNING"
SUSPENDED = "SUSPENDED"
COMPLETING = "COMPLETING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
TIMEOUT = "TIMEOUT"
CANCELLED = "CANCELLED"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
NODE_FAIL = "NODE_FAIL"
PREEMPTED = "PREEMPTED"
REQUEUED = "REQUEUED"
BOOT_FAIL = "BOOT_FAIL"
DEADLINE = "DEADLINE"
UNKNOWN = "UNKNOWN"

#: Every normalised state, in a stable order (used for categorical dtypes).
ALL_STATES: tuple[str, ...] = (
    PENDING,
    HELD,
    RUNNING,
    SUSPENDED,
    COMPLETING,
    COMPLETED,
    FAILED,
    TIMEOUT,
    CANCELLED,
    OUT_OF_MEMORY,
    NODE_FAIL,
    PREEMPTED,
    REQUEUED,
    BOOT_FAIL,
    DEADLINE,
    UNKNOWN,
)

#: States after which a job will not run again without a new submission or requeue.
TERMINAL_STATES: frozenset[str] = frozenset(
    {COMPLETED, FAILED, TIMEOUT, CANCELLED, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE}
)

#: Terminal states that count as a failure of the point (everything terminal but COMPLETED).
FAILURE_STATES: frozenset[str] = TERMINAL_STATES - {COMPLETED}

#: States in which the job is still queued or running.
ACTIVE_STATES: frozenset[str] = frozenset({PENDING, HELD, RUNNING, SUSPENDED, COMPLETING, REQUEUED})


def is_terminal(state: str) -> bool:
    """True if ``state`` (normalised) is final."""
    return state in TERMINAL_STATES


# ---------------------------------------------------------------------------
# The tag hpcjobs puts on every job it submits (Slurm --comment, PBS job name /
# variable list), so a job can be tied back to its sweep and submission even
# when the submitting process died before it recorded the job id.

_TAG_RE = re.compile(r"hpcjobs:(?P<sweep>[A-Za-z0-9_.-]+):(?P<chunk>\d+):(?P<token>[0-9a-f]{8,32})")


#: Hex digits of a token that mark the folder the submission was made for (:func:`place_mark`).
PLACE_MARK_DIGITS = 6


def place_mark(folder: str | os.PathLike[str]) -> str:
    """Six hex digits that stand for ``folder`` (its resolved path): the start of its tokens' text.

    The sweep id comes from the experiment, so the same experiment in two folders (two projects,
    two test runs) gives two sweeps with one id; the mark in their tokens tells their jobs apart.
    """
    resolved = os.path.realpath(os.fspath(folder))
    return hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:PLACE_MARK_DIGITS]


def new_token(folder: str | os.PathLike[str] | None = None) -> str:
    """A fresh submission token (16 hex digits), unique per submission attempt, in the job's tag.

    With ``folder`` (the ledger's folder), the first :data:`PLACE_MARK_DIGITS` digits are its
    :func:`place_mark` and the other ten are random; without, all sixteen are random.
    """
    if folder is None:
        return secrets.token_hex(8)
    return place_mark(folder) + secrets.token_hex(8)[:16 - PLACE_MARK_DIGITS]


def made_for(token: str, folder: str | os.PathLike[str]) -> bool:
    """Whether ``token`` carries ``folder``'s :func:`place_mark` (a token from before marks: by chance only)."""
    return len(token) == 16 and token.startswith(place_mark(folder))


@dataclass(frozen=True)
class JobTag:
    """The identity hpcjobs stamps on a submitted job.

    Attributes:
        sweep_id: The sweep (or single-job experiment) the job belongs to.
        chunk: Index of the array chunk within the sweep (0 for a single job).
        token: Random hex token unique to one submission attempt.
    """

    sweep_id: str
    chunk: int
    token: str

    def render(self) -> str:
        """The tag as written into a job's comment: ``hpcjobs:<sweep>:<chunk>:<token>``."""
        return f"hpcjobs:{self.sweep_id}:{self.chunk}:{self.token}"


def parse_job_tag(text: str | None) -> JobTag | None:
    """Find an hpcjobs tag in a job comment or name; ``None`` when there is none."""
    if not text:
        return None
    m = _TAG_RE.search(text)
    if not m:
        return None
    return JobTag(m["sweep"], int(m["chunk"]), m["token"])
