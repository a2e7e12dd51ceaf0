"""Single jobs of ``hpcjobs submit`` on the real Slurm testbed: status, logs and cancel by job id, a repeated
submit, and sbatch answers that are lost after Slurm accepted the job.

The command line runs as ``python -m hpcjobs`` of this checkout in a temporary project folder (its
``hpcjobs-sweeps/jobs/`` holds the ledgers). Each test gives its jobs a name of its own, so the
number of jobs Slurm holds under that name (``sacct --name``) is the number hpcjobs submitted.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import run_hpcjobs

from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "tests" / "sites" / "hpctest.yaml"
HELLO = REPO / "examples" / "hello.yaml"
WAIT_S = 180.0




def _json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    proc = run_hpcjobs(*args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _jobs_named(name: str) -> list[str]:
    """Ids of the jobs Slurm holds under ``name`` (queue and accounting, last hour)."""
    live = run_command(["squeue", "--noheader", "--states=all", f"--name={name}", "--format=%i"]).stdout.split()
    done = run_command(["sacct", "--noheader", "--parsable2", "-X", f"--name={name}", "--starttime=now-1hour",
                        "--format=JobID"]).stdout.split()
    return sorted(set(live) | set(done))


def _wait_state(job_id: str, cwd: Path, wanted: set[str], *, exit_code: bool = False) -> dict:
    """Poll ``status JOB_ID`` until the job is in one of ``wanted`` (and, with ``exit_code``, has one:
    for seconds after a job ends only ``squeue`` knows it, without an exit code)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        job = _json("status", job_id, cwd=cwd)["job"]
        if job["state"] in wanted and (not exit_code or job["exit_code"] is not None):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(2)


def test_submit_status_logs_and_cancel_by_job_id(slurm_testbed, tmp_path: Path):
    tmp_path.chmod(0o777)
    name = f"single{os.getpid()}"
    first = _json("submit", str(HELLO), "--site", str(SITE), "--set", f"name={name}", cwd=tmp_path)
    job_id = first["job_id"]
    assert first["new"] is True and first["stdout"] == str(tmp_path / "hpcjobs-logs" / f"{name}-{job_id}.out")
    again = _json("submit", str(HELLO), "--site", str(SITE), "--set", f"name={name}", cwd=tmp_path)
    assert (again["job_id"], again["new"]) == (job_id, False)
    job = _wait_state(job_id, tmp_path, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, exit_code=True)
    assert (job["state"], job["exit_code"]) == ("COMPLETED", 0), job
    logs = run_hpcjobs("logs", job_id, cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    assert f"==> stdout of job {job_id} (COMPLETED, exit 0): " in logs.stdout
    assert "Hello from hpcjobs on " in logs.stdout, logs.stdout
    text = run_hpcjobs("status", job_id, cwd=tmp_path).stdout
    assert f"job {job_id}" in text and "COMPLETED, exit 0" in text and f"{name}-{job_id}.out" in text
    assert _jobs_named(name) == [job_id]

    long_name = f"long{os.getpid()}"
    long = _json("submit", str(HELLO), "--site", str(SITE), "--set", f"name={long_name}",
                 "--set", "command=sleep 300", cwd=tmp_path)
    _wait_state(long["job_id"], tmp_path, {"PENDING", "RUNNING"})
    done = run_hpcjobs("cancel", long["job_id"], cwd=tmp_path)
    assert done.returncode == 0 and f"cancelled 1 job(s) {long['job_id']}" in done.stdout, done.stdout + done.stderr
    job = _wait_state(long["job_id"], tmp_path, {"CANCELLED"})
    assert job["state"] == "CANCELLED"
    listed = {r["job_id"]: r["state"] for r in _json("ls", "--jobs", cwd=tmp_path)}
    assert listed == {job_id: "COMPLETED", long["job_id"]: "CANCELLED"}


def _wrapped_sbatch(folder: Path, after: str) -> dict[str, str]:
    """``PATH`` with an ``sbatch`` that runs the real one (the job is queued), then does ``after``."""
    real = shutil.which("sbatch")
    assert real is not None
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(f'#!/bin/bash\n"{real}" "$@" > "{folder}/real-answer.txt" || exit 1\n{after}\n')
    wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HPCJOBS_SUBMIT_LOOKUP_S": "30"}


def test_a_lost_answer_is_found_by_token_and_not_submitted_twice(slurm_testbed, tmp_path: Path):
    tmp_path.chmod(0o777)
    name = f"lost{os.getpid()}"
    args = ("submit", str(HELLO), "--site", str(SITE), "--set", f"name={name}")
    # Slurm accepted the job, but the answer is an error (as when slurmctld's reply times out)
    env = _wrapped_sbatch(tmp_path, "echo 'sbatch: error: Batch job submission failed: Socket timed out on "
                                    "send/recv operation' >&2; exit 1")
    out = _json(*args, cwd=tmp_path, env=env)
    real = (tmp_path / "real-answer.txt").read_text().strip().split(";")[0]
    assert (out["job_id"], out["new"]) == (real, True)
    assert _jobs_named(name) == [real]
    # the submitter is killed right after sbatch queued the job: the next run finds it by its token
    crash_name = f"crash{os.getpid()}"
    crash_args = ("submit", str(HELLO), "--site", str(SITE), "--set", f"name={crash_name}")
    (tmp_path / "bin").rename(tmp_path / "bin-lost")
    env = _wrapped_sbatch(tmp_path, "kill -9 $PPID")
    killed = run_hpcjobs(*crash_args, cwd=tmp_path, env=env)
    assert killed.returncode == -9, killed.stderr
    queued = (tmp_path / "real-answer.txt").read_text().strip().split(";")[0]
    found = run_hpcjobs(*crash_args, cwd=tmp_path)  # the real sbatch again: it is not called
    assert found.returncode == 0, found.stderr
    assert f"job {queued} " in found.stdout and "found by its token, not submitted again" in found.stdout
    assert _jobs_named(crash_name) == [queued]
    assert _json("status", queued, cwd=tmp_path)["job"]["job_id"] == queued
