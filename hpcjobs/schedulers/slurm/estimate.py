"""Slurm's own start estimate: ``sbatch --test-only`` and what it writes to stderr.

``sbatch --test-only`` "validates the batch script and returns an estimate of when a job would be
scheduled to run given the current job queue and all the other arguments specifying the job
requirements. No job is actually submitted" (sbatch(1)). The answer is one line on stderr, written
by ``src/sbatch/sbatch.c`` (SchedMD/slurm) as ``Job %u to start at %s using %u processors on nodes
%s in partition %s``, prefixed with ``sbatch: ``; a request that cannot run prints
``allocation failure: <reason>`` and exits 1. Real answers of Slurm 22.05 are in ``tests/data/plan/``.

Pure functions: no subprocess here (:class:`~hpcjobs.schedulers.slurm.backend.SlurmBackend` hands them to
:mod:`hpcjobs.plan.api`, which runs the command through :func:`hpcjobs.process.run_command`).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from hpcjobs.schedulers.estimates import StartEstimate

#: Environment for the call: times in UTC, ISO 8601 (``SLURM_TIME_FORMAT=standard``, slurm.conf(5)).
WILL_RUN_ENV: dict[str, str] = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}

_START = re.compile(
    r"Job (?P<job>\d+) to start at (?P<start>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
    r" using (?P<cpus>\d+) processors on nodes? (?P<nodes>\S*)(?: in partition (?P<partition>\S+))?")
_FAILURE = re.compile(r"^allocation failure: (?P<reason>.+)$", re.M)
_ERROR = re.compile(r"^sbatch: error: (?P<reason>.+)$", re.M)


def will_run_argv(script: str | Path, partition: str, qos: str | None = None) -> list[str]:
    """``sbatch --test-only`` of ``script`` on ``partition`` (and ``qos``); options override its directives."""
    argv = ["sbatch", "--test-only", f"--partition={partition}"]
    if qos:
        argv.append(f"--qos={qos}")
    return [*argv, str(script)]


def parse_will_run(stderr: str, returncode: int = 0) -> StartEstimate:
    """Read the answer of ``sbatch --test-only`` (its stderr and exit status).

    Times are read as UTC: run the command with :data:`WILL_RUN_ENV`.

    Args:
        stderr: What the command wrote to stderr.
        returncode: Its exit status.

    Returns:
        The estimate, or one whose ``error`` says why there is none (``allocation failure: ...``,
        ``sbatch: error: ...``, or the unrecognised text itself); ``refusal`` is set when Slurm
        answered ``allocation failure`` and exit 1 (the partition can never run the request).
    """
    m = _START.search(stderr)
    if m and returncode == 0:
        start = datetime.fromisoformat(m["start"]).replace(tzinfo=timezone.utc)
        return StartEstimate(start, int(m["cpus"]), m["nodes"] or None, m["partition"])
    reasons = [r["reason"].strip() for r in _FAILURE.finditer(stderr)]
    reasons += [r["reason"].strip() for r in _ERROR.finditer(stderr) if r["reason"].strip() not in reasons]
    if reasons:
        error = "; ".join(reasons)
    else:
        text = " ".join(stderr.split())[:300]
        error = f"no estimate (exit {returncode}): {text or 'nothing on stderr'}"
    # exit 1 with ``allocation failure``: the request can never run on that partition
    refused = returncode != 0 and "allocation failure" in stderr
    return StartEstimate(None, error=error, refusal=f"Slurm: {error}" if refused else None)
