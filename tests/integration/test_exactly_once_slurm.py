"""Exactly once on the real Slurm when the scheduler's memory is not there.

The cases of ``tests/hostile/test_exactly_once.py`` (there against a faked Slurm), staged on the real
testbed with its own controls: ``testbed.sh accounting stop|start`` takes slurmdbd down while
slurmctld keeps running (``sacct`` then fails, and slurmctld holds its records until slurmdbd is back),
and ``testbed.sh min-job-age 2`` makes a finished job leave ``squeue`` within seconds (MinJobAge; the
testbed's 60 s is restored after each case). Each case counts what really ran: every task appends its
point id to ``runs-<sweep>.log``, and each point must appear there exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from real_testbed import in_ci, slurm_staging, wait_for

from hpcjobs.process import run_command
from tests.integration.test_sweep_slurm import SMALL, _assert_exactly_once, _experiment, _wait_done

pytestmark = pytest.mark.slurm

TESTBED = Path(__file__).resolve().parents[1] / "slurm" / "testbed.sh"
#: Crash injection: the real sbatch queues the job, then the submitter is killed before it reads the id.
CRASH_AFTER_SBATCH = """#!/bin/bash
out=$("$REAL_SBATCH" "$@"); rc=$?
printf '%s\\n' "$out"
if [[ $rc -eq 0 && ! -e $CRASH_MARK ]]; then : >"$CRASH_MARK"; kill -9 "$PPID"; fi
exit $rc
"""


@pytest.fixture
def staged(slurm_testbed) -> None:
    """The staging controls need root (as CI runs); elsewhere the cases skip, in CI they fail."""
    if os.geteuid() != 0:
        if in_ci():
            pytest.fail("CI=true but not root: the accounting outage cannot be staged")
        pytest.skip("staging an accounting outage needs root (tests/slurm/testbed.sh accounting)")


def _testbed(*args: str) -> None:
    run_command(["bash", str(TESTBED), *args], timeout=120)


@contextmanager
def _staged(change: tuple[str, ...], restore: tuple[str, ...]) -> Iterator[None]:
    """The testbed changed by ``change`` while inside, ``restore`` after; the SSH tests in another process wait."""
    with slurm_staging(exclusive=True):
        _testbed(*change)
        try:
            yield
        finally:
            _testbed(*restore)


def fast_purge() -> AbstractContextManager[None]:
    """Finished jobs leave slurmctld's memory (and squeue) within seconds while inside."""
    return _staged(("min-job-age", "2"), ("min-job-age", "default"))


def accounting_down() -> AbstractContextManager[None]:
    """slurmdbd stopped while inside: every sacct fails; slurmctld keeps the records for later."""
    return _staged(("accounting", "stop"), ("accounting", "start"))


def _tagged_in_queue(sweep_id: str) -> set[str]:
    """Array job ids in squeue (any state, while slurmctld remembers them) tagged with this sweep."""
    out = run_command(["squeue", "-h", "-t", "all", "-o", "%F|%k"], timeout=30).stdout
    return {line.split("|")[0] for line in out.splitlines() if f"hpcjobs:{sweep_id}:" in line}


def _tagged_in_accounting(sweep_id: str) -> set[str]:
    """Array job ids in sacct tagged with this sweep (one per array, whatever its tasks)."""
    out = run_command(["sacct", "-n", "-P", "-X", "-a", "-S", "now-1hour", "-o", "JobID,Comment"],
                      timeout=30).stdout
    return {line.split("|")[0].split("_")[0] for line in out.splitlines() if f"hpcjobs:{sweep_id}:" in line}


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _sweep(exp: Path, root: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return _cli("sweep", str(exp), "--site", SMALL, "--root", str(root), "--json", cwd=cwd, env=env)


def _sweep_id(root: Path, name: str) -> str:
    return next(d.name for d in root.iterdir() if d.name.startswith(f"{name}-"))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def test_accounting_down_on_resume_submits_nothing_then_recovers(staged, workdir):
    """Killed right after sbatch queued chunk 0; the job ends and is purged; sacct fails on the rerun."""
    root, exp = workdir / "sweeps", _experiment(workdir, "resume", 10)  # two chunks of 5
    bindir = workdir / "bin"
    bindir.mkdir()
    (bindir / "sbatch").write_text(CRASH_AFTER_SBATCH)
    (bindir / "sbatch").chmod(0o755)
    crashing = {"PATH": f"{bindir}:{os.environ['PATH']}", "REAL_SBATCH": shutil.which("sbatch") or "sbatch",
                "CRASH_MARK": str(workdir / "crashed")}
    killed = _sweep(exp, root, workdir, env=crashing)
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    sweep_id = _sweep_id(root, "resume")
    with fast_purge():
        queued = wait_for("the unrecorded job in squeue", lambda: _tagged_in_queue(sweep_id), timeout=30)
        assert len(queued) == 1, queued
        wait_for(f"job {queued} finished and purged from squeue", lambda: not _tagged_in_queue(sweep_id),
                 timeout=90)
        with accounting_down():
            rerun = _sweep(exp, root, workdir, env={"HPCJOBS_SUBMIT_LOOKUP_S": "1"})
            assert rerun.returncode == 1, rerun.stderr
            assert "unresolved" in rerun.stderr and "run the same command again" in rerun.stderr, rerun.stderr
            assert not _tagged_in_queue(sweep_id), "submitted while the chunk was undecided"
    # slurmdbd is back, but slurmctld sends what it kept only after a while (sdiag's DBD Agent queue): a
    # rerun at once must not take the missing job for "not submitted"; it waits, or stops undecided
    at_once = _sweep(exp, root, workdir, env={"HPCJOBS_SUBMIT_LOOKUP_S": "1"})
    assert at_once.returncode in (0, 1), at_once.stderr
    assert len(_tagged_in_queue(sweep_id) | _tagged_in_accounting(sweep_id)) <= 2
    wait_for("slurmctld sent its records (sdiag)", lambda: "DBD Agent queue size: 0" in run_command(
        ["sdiag"], timeout=30).stdout, timeout=90)
    wait_for("the purged job in sacct again", lambda: queued <= _tagged_in_accounting(sweep_id), timeout=60)
    final = _sweep(exp, root, workdir)
    assert final.returncode == 0, final.stderr
    _wait_done(sweep_id, root)
    _assert_exactly_once(workdir, root, sweep_id, 10)
    assert len(_tagged_in_accounting(sweep_id)) == 2  # one array per chunk, none twice


def test_accounting_down_while_polling_loses_nothing_and_says_so(staged, workdir):
    """Arrays end and leave squeue while sacct fails: status keeps the points, the rerun submits nothing."""
    root, exp = workdir / "sweeps", _experiment(workdir, "polling", 10)
    first = _sweep(exp, root, workdir)
    assert first.returncode == 0, first.stderr
    sweep_id = _sweep_id(root, "polling")
    no_grace = {"HPCJOBS_SUBMIT_LOOKUP_S": "0"}  # only the scheduler's answers decide
    with fast_purge(), accounting_down():
        wait_for("both arrays finished and purged from squeue", lambda: not _tagged_in_queue(sweep_id), timeout=120)
        for _ in range(3):
            status = _cli("status", sweep_id, "--root", str(root), "--json", cwd=workdir, env=no_grace)
            assert status.returncode == 0, status.stderr
            counts = json.loads(status.stdout)["counts"]
            assert counts.get("LOST", 0) == 0 and sum(counts.values()) == 10, counts
            assert "accounting did not answer" in status.stderr, status.stderr
            assert "keep their last known state" in status.stderr, status.stderr
        again = _sweep(exp, root, workdir, env=no_grace)
        assert not _tagged_in_queue(sweep_id), f"points submitted again: {again.stdout} {again.stderr}"
    wait_for("both arrays in sacct again", lambda: len(_tagged_in_accounting(sweep_id)) == 2, timeout=60)
    _wait_done(sweep_id, root)
    _assert_exactly_once(workdir, root, sweep_id, 10)


def test_a_deleted_ledger_does_not_submit_queued_jobs_again(staged, workdir):
    """The ledger removed while the arrays are queued: the same command refuses, naming the jobs it found."""
    root = workdir / "sweeps"
    exp = workdir / "held.yaml"
    exp.write_text(f"name: held\ndescription: run in {workdir}\nresources: {{walltime: 5m}}\n"
                   "command: sleep 300\nsweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5, 6]\n")
    first = _sweep(exp, root, workdir)
    assert first.returncode == 0, first.stderr
    sweep_id = _sweep_id(root, "held")
    jobs = _tagged_in_queue(sweep_id)
    try:
        assert len(jobs) == 2, jobs
        for path in (root / sweep_id).glob("ledger.sqlite*"):
            path.unlink()
        blind = _sweep(exp, root, workdir)
        assert blind.returncode != 0, blind.stdout
        assert all(job in blind.stderr for job in jobs), blind.stderr
        assert _tagged_in_queue(sweep_id) == jobs, "the same points were submitted a second time"
    finally:
        run_command(["scancel", "--", *sorted(jobs)], timeout=30, check=False)


def test_resubmit_leaves_a_point_whose_job_slurm_requeued(staged, workdir):
    """A failed array is requeued by the scheduler (scontrol requeuehold): resubmit sends nothing new."""
    root = workdir / "sweeps"
    exp = workdir / "requeued.yaml"
    exp.write_text(f"name: requeued\ndescription: run in {workdir}\nresources: {{walltime: 5m}}\n"
                   "command: exit 3\nsweep:\n  grid:\n    x: [0, 1]\n")
    assert _sweep(exp, root, workdir).returncode == 0
    sweep_id = _sweep_id(root, "requeued")
    _wait_done(sweep_id, root)
    (job,) = _tagged_in_queue(sweep_id) or _tagged_in_accounting(sweep_id)
    try:
        run_command(["scontrol", "requeuehold", job], timeout=30)
        wait_for(f"job {job} pending again", lambda: "PENDING" in run_command(
            ["squeue", "-h", "-j", job, "-o", "%T"], timeout=30, check=False).stdout, timeout=30)
        resubmit = _cli("resubmit", sweep_id, "--root", str(root), cwd=workdir)
        assert job in resubmit.stdout + resubmit.stderr, (resubmit.stdout, resubmit.stderr)
        assert _tagged_in_queue(sweep_id) == {job}, "a second live attempt of a requeued point"
    finally:
        run_command(["scancel", "--", job], timeout=30, check=False)
