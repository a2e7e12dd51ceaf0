"""Classification of PBS Pro / Torque ``qstat`` and ``qdel`` error lines (no pandas).

Split out of :mod:`hpcjobs.schedulers.pbs.formats`, which re-exports every name here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNKNOWN_JOB = "unknown_job"
JOB_FINISHED = "job_finished"
BAD_JOB_ID = "bad_job_id"
OTHER_ERROR = "other"

_ERROR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (UNKNOWN_JOB, re.compile(r"^\w+: Unknown Job Id(?: Error)? (?P<id>\S+)\s*$")),
    (JOB_FINISHED, re.compile(r"^\w+: (?P<id>\S+) Job has finished, use -x or -H")),
    (JOB_FINISHED, re.compile(r"^\w+: Job has finished (?P<id>\S+)\s*$")),
    (BAD_JOB_ID, re.compile(r"^\w+: illegally formed job identifier: (?P<id>\S+)\s*$")),
)


@dataclass(frozen=True)
class PbsCommandError:
    """One error line of ``qstat``/``qdel``: its kind (``unknown_job``, ``job_finished``, ``bad_job_id``
    or ``other``), the job id it names, and the line itself."""

    kind: str
    job_id: str | None
    line: str


def classify_error_line(line: str) -> PbsCommandError:
    """Classify one stderr line: ``qstat: Unknown Job Id 123.srv`` (Torque: ``... Id Error 123.srv``),
    ``qstat: 123.srv Job has finished, use -x or -H ...`` (qdel words it ``qdel: Job has finished
    123.srv``; both exit 35 on OpenPBS 23.06), ``qdel: illegally formed job identifier: x``."""
    text = line.strip()
    for kind, pattern in _ERROR_PATTERNS:
        m = pattern.match(text)
        if m:
            return PbsCommandError(kind, m["id"], text)
    return PbsCommandError(OTHER_ERROR, None, text)


def parse_error_lines(stderr: str) -> list[PbsCommandError]:
    """Every non-empty stderr line, classified."""
    return [classify_error_line(line) for line in stderr.splitlines() if line.strip()]


def is_unknown_job_error(stderr: str) -> bool:
    """True when stderr holds only "unknown job" errors (the jobs are gone; nothing else went wrong)."""
    errors = parse_error_lines(stderr)
    return bool(errors) and all(e.kind == UNKNOWN_JOB for e in errors)
