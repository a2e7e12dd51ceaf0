"""Helpers for tests against the real one-node Slurm testbed (``tests/slurm/testbed.sh``).

Tests that need Slurm are marked ``@pytest.mark.slurm`` and take the ``slurm_testbed`` fixture. When
the cluster does not answer, the fixture skips with a clear reason on a laptop and *fails* in CI
(``CI=true``): a missing Slurm is never a silent skip there.

Every subprocess goes through :func:`hpcjobs.process.run_command`.

What the helpers know about this Slurm (22.05, see ``tests/slurm/README.md``):

* for ~5 s after a job ends its ``sacct`` row can be incomplete (JobName ``allocation``, empty
  Partition): :meth:`SlurmTestbed.wait_terminal` polls until every row is terminal *and* complete;
* pending array tasks are one row ``123_[5-11%3]`` until they have all started;
* a ``--time=0:01`` job is killed 60-90 s after it starts (slurmctld checks limits every 30 s), so
  waits default to :data:`DEFAULT_WAIT_S`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pytest
from real_testbed import Testbed, client

from hpcjobs.errors import HpcJobsError
from hpcjobs.process import CommandResult

#: Long enough for a ``--time=0:01`` job to reach TIMEOUT (60-90 s) plus accounting lag.
DEFAULT_WAIT_S = 180.0
POLL_S = 0.5

#: Fields requested from ``sacct`` by :meth:`SlurmTestbed.sacct_rows` (order matters for the split).
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "Partition",
    "Account",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "ReqMem",
    "MaxRSS",
    "AllocTRES",
    "ReqTRES",
    "Comment",
    "WorkDir",
)

#: First word of a job's State once it will not change any more.
TERMINAL_SLURM_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


def slurm(argv: Sequence[str], *, timeout: float = 30.0, check: bool = True) -> CommandResult:
    """Run one Slurm client command through the project's subprocess seam.

    Args:
        argv: The command and its arguments.
        timeout: Seconds before the command is abandoned.
        check: Raise when the exit code is not 0.

    Returns:
        The finished command.

    Raises:
        CommandError: The command failed (with ``check``) or could not be started.
        CommandTimeout: The command ran past ``timeout``.
    """
    return client(argv, timeout=timeout, check=check)


def testbed_problem() -> str | None:
    """Say why the Slurm testbed cannot be used, or ``None`` when ``sinfo`` and ``sacct`` answer.

    Returns:
        A one-line reason, or ``None`` when the cluster is usable.
    """
    checks = (
        ["sinfo", "--noheader", "--format=%P %a"],
        ["sacct", "--noheader", "--parsable2", "-X", "--jobs=1", "--format=JobID"],
    )
    for argv in checks:
        try:
            result = slurm(argv, timeout=15.0, check=False)
        except HpcJobsError as exc:
            return f"{argv[0]}: {exc}"
        if result.returncode != 0:
            return f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()[:300]}"
    return None


#: The Slurm testbed as the shared real-testbed helper sees it.
SLURM_TESTBED = Testbed("Slurm", "sudo bash tests/slurm/testbed.sh start", testbed_problem)
START_HINT = SLURM_TESTBED.start_hint


def parse_scontrol_config(text: str) -> dict[str, str]:
    """Read ``scontrol show config`` output into a ``{key: value}`` dict.

    Args:
        text: The command's standard output (``Key   = Value`` lines).

    Returns:
        The settings, values stripped; lines without `` = `` are ignored.
    """
    settings: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip() and " " not in key.strip():
            settings[key.strip()] = value.strip()
    return settings


def row_is_terminal_and_complete(row: dict[str, str]) -> bool:
    """Whether a job-level sacct row is final: terminal state, accounting lag over.

    Args:
        row: One ``sacct -X`` row as returned by :meth:`SlurmTestbed.sacct_rows`.

    Returns:
        True when the state is terminal, the JobName is no longer the ``allocation``
        placeholder, the partition is set and the JobID is not a pending array range.
    """
    state = row["State"].split(" ", 1)[0]
    return (
        state in TERMINAL_SLURM_STATES
        and row["JobName"] != "allocation"
        and row["Partition"] != ""
        and "[" not in row["JobID"]
    )


@dataclass(frozen=True)
class SubmittedJob:
    """A job submitted by :meth:`SlurmTestbed.submit`."""

    job_id: str
    output: str


class SlurmTestbed:
    """Thin helpers around the testbed's client commands (``sbatch``, ``sacct``, ``scontrol``)."""

    cluster = "hpctest"
    account = "hpcjobs"
    other_account = "other"
    partitions = ("debug", "gpu")

    def submit(self, *sbatch_args: str, wrap: str, workdir: str | os.PathLike[str]) -> SubmittedJob:
        """Submit ``--wrap`` command with ``sbatch --parsable``.

        Args:
            *sbatch_args: Extra sbatch options (e.g. ``"-p", "gpu"``).
            wrap: The shell command the job runs.
            workdir: Directory for the job's output file (``slurm-<id>.out``).

        Returns:
            The job id and the path of its output file.

        Raises:
            CommandError: sbatch rejected the job.
        """
        workdir = os.fspath(workdir)
        argv = ["sbatch", "--parsable", f"--chdir={workdir}", "--output=slurm-%j.out", *sbatch_args]
        result = slurm([*argv, f"--wrap={wrap}"])
        job_id = result.stdout.strip().split(";", 1)[0]
        return SubmittedJob(job_id, os.path.join(workdir, f"slurm-{job_id}.out"))

    def sacct_rows(
        self, job_ids: Iterable[str], *, allocations_only: bool = True, fields: Sequence[str] = SACCT_FIELDS
    ) -> list[dict[str, str]]:
        """Accounting rows of the given jobs (one ``sacct`` call).

        Args:
            job_ids: Job ids (an array job id brings all its tasks).
            allocations_only: Pass ``-X`` (job lines only, no ``.batch``/``.extern`` steps).
            fields: sacct ``--format`` fields.

        Returns:
            One dict per line, keyed by field name.
        """
        argv = [
            "sacct",
            "--parsable2",
            "--noheader",
            f"--jobs={','.join(job_ids)}",
            f"--format={','.join(fields)}",
        ]
        if allocations_only:
            argv.append("-X")
        out = slurm(argv).stdout
        rows = []
        for line in out.splitlines():
            values = line.split("|")
            if len(values) != len(fields):  # a Comment with '|' would break this; tests avoid it
                raise AssertionError(f"unexpected sacct line {line!r} for fields {fields}")
            rows.append(dict(zip(fields, values, strict=True)))
        return rows

    def wait_complete_rows(self, job_ids: Iterable[str], fields: Sequence[str],
                           timeout: float = 60.0) -> list[dict[str, str]]:
        """Poll ``sacct -X`` until every row has every one of ``fields`` filled in, and return the rows.

        For ~5 s after a job ends its row lacks Timelimit, ReqTRES and Partition and shows ReqMem ``16?``
        (tests/data/slurm/testbed-22.05_sacct-interim-vs-final.txt); a test that asserts such a field must
        read it through this, not with one ``sacct`` call.

        Args:
            job_ids: The jobs.
            fields: The fields the test asserts (each must be non-empty and not end with ``?``).
            timeout: Seconds to wait before failing the test.
        """
        ids = list(job_ids)
        deadline = time.monotonic() + timeout
        while True:
            rows = self.sacct_rows(ids, fields=["JobName", *fields])
            if rows and all(r["JobName"] != "allocation" and all(r[f] and not r[f].endswith("?") for f in fields)
                            for r in rows):
                return rows
            if time.monotonic() > deadline:
                pytest.fail(f"sacct rows of {', '.join(ids)} still incomplete after {timeout:.0f} s: {rows}")
            time.sleep(1)

    def wait_terminal(self, *job_ids: str, timeout: float = DEFAULT_WAIT_S) -> dict[str, dict[str, str]]:
        """Poll ``sacct`` until every job (and every array task) is terminal with a complete row.

        Args:
            *job_ids: The jobs to wait for.
            timeout: Seconds before the test fails.

        Returns:
            ``{JobID: row}`` of the ``-X`` rows (array tasks appear as ``123_4``).
        """
        deadline = time.monotonic() + timeout
        wanted = {job_id.split("_", 1)[0] for job_id in job_ids}
        rows: list[dict[str, str]] = []
        while True:
            rows = self.sacct_rows(job_ids)
            seen = {row["JobID"].split("_", 1)[0] for row in rows}
            if wanted <= seen and rows and all(row_is_terminal_and_complete(r) for r in rows):
                return {row["JobID"]: row for row in rows}
            if time.monotonic() > deadline:
                pytest.fail(f"jobs {', '.join(job_ids)} not finished in sacct after {timeout:.0f} s: {rows}")
            time.sleep(POLL_S)

    def wait_squeue_state(self, job_id: str, state: str, *, timeout: float = 60.0) -> None:
        """Poll ``squeue`` until the job shows ``state`` (e.g. ``RUNNING``).

        Args:
            job_id: The job.
            state: squeue's long state name.
            timeout: Seconds before the test fails.
        """
        deadline = time.monotonic() + timeout
        while True:
            now = slurm(["squeue", "--noheader", f"--jobs={job_id}", "--format=%T"], check=False).stdout.strip()
            if now == state:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"job {job_id} not {state} after {timeout:.0f} s (squeue says {now!r})")
            time.sleep(POLL_S)

    def config(self) -> dict[str, str]:
        """``scontrol show config`` as a dict."""
        return parse_scontrol_config(slurm(["scontrol", "show", "config"]).stdout)


@pytest.fixture(scope="session")
def slurm_testbed() -> SlurmTestbed:
    """The running Slurm testbed; skips (laptop) or fails (``CI=true``) when it does not answer."""
    SLURM_TESTBED.require()
    return SlurmTestbed()


@pytest.fixture
def slurm_workdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh directory for job output files (readable by slurmd, which runs as root)."""
    path = tmp_path_factory.mktemp("slurmjob")
    path.chmod(0o777)
    return os.fspath(path)
