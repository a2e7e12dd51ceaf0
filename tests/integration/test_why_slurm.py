"""``hpcjobs why`` on the real Slurm testbed: each waiting case made for real, then explained.

The cases: a job held by its user (``--hold``), a job waiting for it (``--dependency=afterok``), a job whose
earliest start is in an hour (``--begin``), a job whose time limit its partition no longer allows
(a job that fitted the partition of its own this test makes, whose limit is then lowered: the testbed's
``EnforcePartLimits=ALL`` refuses a job over the limit at submission, and an operator's own raise of a job's
limit is trusted and runs), a job that
needs every CPU of the node while another holds one, and a sweep held by a QOS that lets a user run one
job at a time (``MaxJobsPerUser=1``, a QOS of this test's own, removed after it). Every answer must name
the scheduler's reason, explain it in words, and come from a fixed number of scheduler calls (``calls``
in ``--json``, also printed by ``-v``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import run_hpcjobs

from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm

SITE = Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml"
QOS = "hpcjobs-why"
PARTITION = "hpcjobs-why"


def _sbatch(*options: str, cwd: str) -> str:
    done = run_command(["sbatch", "--parsable", "--output=/dev/null", *options, "--wrap=sleep 120"], timeout=30,
                       cwd=cwd)
    return done.stdout.strip().split(";")[0]


def _why(target: str, cwd: str, *extra: str) -> dict:
    done = run_hpcjobs("why", target, "--json", "--fresh", *extra, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _reason_of(job_id: str, cwd: str, want: set[str], timeout: float = 60.0) -> dict:
    """``hpcjobs why JOB`` until its reason is one of ``want`` (the scheduler sets some after a cycle)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = _why(job_id, cwd, "--site", str(SITE))
        reasons = {p["reason"] for p in answer["pending"]}
        if reasons & want:
            (job,) = answer["pending"]
            return job
        assert time.monotonic() < deadline, f"{job_id}: {answer['pending']} {answer['not_waiting']}"
        time.sleep(2)


@pytest.fixture
def own_partition(slurm_testbed):
    """A partition of this test's own (the node's, 30 minutes at most), deleted after it."""
    run_command(["scontrol", "create", f"PartitionName={PARTITION}", "Nodes=ALL", "MaxTime=00:30:00", "State=UP"],
                timeout=30)
    yield PARTITION
    run_command(["scontrol", "delete", f"PartitionName={PARTITION}"], timeout=30, check=False)


def test_held_dependent_delayed_and_oversized_jobs_are_explained(own_partition, slurm_workdir):
    jobs: list[str] = []
    try:
        held = _sbatch("--hold", "--time=5", cwd=slurm_workdir)
        jobs.append(held)
        waiting = _sbatch(f"--dependency=afterok:{held}", "--time=5", cwd=slurm_workdir)
        jobs.append(waiting)
        later = _sbatch("--begin=now+3600", "--time=5", cwd=slurm_workdir)
        jobs.append(later)
        long = _sbatch("--hold", "--time=20", f"--partition={PARTITION}", cwd=slurm_workdir)
        jobs.append(long)
        run_command(["scontrol", "update", f"PartitionName={PARTITION}", "MaxTime=00:10:00"], timeout=30)
        run_command(["scontrol", "release", long], timeout=30)

        job = _reason_of(held, slurm_workdir, {"JobHeldUser"})
        assert job["kind"] == "hold" and "scontrol release" in job["action"]
        job = _reason_of(waiting, slurm_workdir, {"Dependency"})
        assert job["kind"] == "dependency" and job["dependency"].startswith(f"afterok:{held}"), job
        job = _reason_of(later, slurm_workdir, {"BeginTime"})
        assert job["kind"] == "hold" and job["expected_start"], job
        job = _reason_of(long, slurm_workdir, {"PartitionTimeLimit"})
        assert job["kind"] == "request" and job["time_limit_s"] == 1200 and "time limit" in job["summary"], job

        # all four in one question: the same few calls, whatever the number of jobs
        both = run_hpcjobs("-v", "why", ",".join(jobs), "--site", str(SITE), "--fresh", cwd=slurm_workdir)
        assert both.returncode == 2, both.stdout + both.stderr  # a list is not one job id: refused, not guessed
        single = run_hpcjobs("-v", "why", held, "--site", str(SITE), "--fresh", cwd=slurm_workdir)
        assert single.returncode == 0, single.stderr
        assert "JobHeldUser" in single.stdout and "what would change it: `scontrol release ID`" in single.stdout
        assert "hpcjobs why asked slurm" in single.stderr and "time(s)" in single.stderr, single.stderr
        assert "priority/basic" in single.stderr  # the testbed computes no priority factors: said, not hidden
    finally:
        run_command(["scancel", *jobs], timeout=30, check=False)


def test_a_job_waiting_for_cpus_another_job_holds(slurm_testbed, slurm_workdir):
    jobs: list[str] = []
    try:
        jobs.append(_sbatch("--cpus-per-task=1", "--time=5", cwd=slurm_workdir))
        big = _sbatch("--cpus-per-task=8", "--time=5", cwd=slurm_workdir)
        jobs.append(big)
        job = _reason_of(big, slurm_workdir, {"Resources", "Priority"})
        assert job["kind"] == "wait" and job["cpus"] == 8, job
    finally:
        run_command(["scancel", *jobs], timeout=30, check=False)


@pytest.fixture
def one_job_qos(slurm_testbed):
    """A QOS that lets a user run one job at a time, which root may use; removed after the test."""
    run_command(["sacctmgr", "-i", "add", "qos", QOS, "MaxJobsPerUser=1"], timeout=30, check=False)
    run_command(["sacctmgr", "-i", "modify", "qos", "where", f"name={QOS}", "set", "MaxJobsPerUser=1"], timeout=30)
    run_command(["sacctmgr", "-i", "modify", "user", "where", "name=root", "set", f"qos+={QOS}"], timeout=30)
    yield QOS
    run_command(["sacctmgr", "-i", "modify", "user", "where", "name=root", "set", f"qos-={QOS}"], timeout=30,
                check=False)
    run_command(["sacctmgr", "-i", "delete", "qos", QOS], timeout=30, check=False)


def test_a_sweep_held_by_a_qos_limit_is_grouped_by_reason(slurm_workdir, one_job_qos):
    folder = Path(slurm_workdir)
    exp = folder / "whyqos.yaml"
    exp.write_text(f"name: whyqos\ndescription: run in {folder}\nqos: {one_job_qos}\n"
                   "resources: {cpus_per_task: 1, walltime: 5m}\ncommand: sleep 120\n"
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3]\n")
    sub = run_hpcjobs("sweep", str(exp), "--site", str(SITE), "--root", str(folder / "sweeps"), "--json", cwd=folder)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    sweep = json.loads(sub.stdout)["sweep_id"]
    try:
        deadline = time.monotonic() + 90
        while True:
            answer = _why(sweep, slurm_workdir, "--root", str(folder / "sweeps"))
            groups = {g["reason"]: g for g in answer["groups"]}
            if "QOSMaxJobsPerUserLimit" in groups and groups["QOSMaxJobsPerUserLimit"]["tasks"] == 3:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(2)
        group = groups["QOSMaxJobsPerUserLimit"]
        assert group["kind"] == "limit" and "per user" in group["summary"], group
        assert len(group["job_ids"]) == 1 and group["job_ids"][0].endswith("_[1-3]"), group  # one line for 3 tasks
        (waiting,) = answer["pending"]
        assert any(f"QOS {one_job_qos}: " in line and "MaxJobsPU 1" in line and "1 job(s) running" in line
                   for line in waiting["limits"]), waiting["limits"]
        assert len(answer["calls"]) <= 5, answer["calls"]
        assert [c[0] for c in answer["calls"]][:1] == ["squeue"]

        text = run_hpcjobs("why", sweep, "--root", str(folder / "sweeps"), cwd=folder)
        assert text.returncode == 0, text.stderr
        assert "QOSMaxJobsPerUserLimit (3 task(s))" in text.stdout and "limit: QOS hpcjobs-why" in text.stdout
        again = _why(sweep, slurm_workdir, "--root", str(folder / "sweeps"))  # --fresh: asked again
        cached = run_hpcjobs("why", sweep, "--root", str(folder / "sweeps"), "--json", cwd=folder)
        assert json.loads(cached.stdout)["cached_calls"] >= 1 and again["groups"]
    finally:
        run_hpcjobs("cancel", sweep, "--root", str(folder / "sweeps"), cwd=folder)
