"""``hpcjobs why`` on the real OpenPBS testbed: each waiting case made for real, then explained.

A job held by its owner (``qsub -h``), one waiting for it (``-W depend=afterok``: a system hold), one asked
to start in an hour (``qsub -a``), a queue of this test's own that lets a user run one job at a time
(``max_run = [u:PBS_GENERIC=1]``), and a job that needs both CPUs of the node while another holds one.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers import run_hpcjobs

from pbs.real import pbs

pytestmark = pytest.mark.pbs

SITE = Path(__file__).resolve().parents[1] / "sites" / "openpbs-testbed.yaml"
QUEUE = "hpcjobswhy"


def _qsub(*options: str) -> str:
    return pbs(["qsub", "-o", "/dev/null", "-e", "/dev/null", "-l", "walltime=00:05:00", *options, "--",
                "/bin/sleep", "120"]).stdout.strip()


@pytest.fixture
def own_queue(pbs_server):
    pbs(["qmgr", "-c", f"create queue {QUEUE} queue_type=execution,enabled=true,started=true"], check=False)
    pbs(["qmgr", "-c", f"set queue {QUEUE} max_run = [u:PBS_GENERIC=1]"])
    yield QUEUE
    pbs(["qmgr", "-c", f"delete queue {QUEUE}"], check=False)


def _reason_of(job_id: str, cwd: Path, want: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        done = run_hpcjobs("why", job_id, "--site", str(SITE), "--json", "--fresh", cwd=cwd)
        assert done.returncode == 0, done.stdout + done.stderr
        answer = json.loads(done.stdout)
        found = [p for p in answer["pending"] if p["reason"] == want]
        if found:
            assert len(answer["calls"]) <= 2, answer["calls"]
            return found[0]
        assert time.monotonic() < deadline, f"{job_id}: {answer}"
        time.sleep(2)


def test_held_dependent_delayed_limited_and_waiting_jobs(own_queue, pbs_workdir: Path):
    jobs: list[str] = []
    try:
        held = _qsub("-h")
        jobs.append(held)
        jobs.append(waiting := _qsub("-W", f"depend=afterok:{held}"))
        jobs.append(later := _qsub("-a", (datetime.now() + timedelta(hours=1)).strftime("%H%M")))
        jobs.append(_qsub("-q", own_queue))
        jobs.append(limited := _qsub("-q", own_queue))
        job = _reason_of(held, pbs_workdir, "HeldUser")
        assert job["kind"] == "hold" and "qrls" in job["action"]
        job = _reason_of(waiting, pbs_workdir, "Dependency")
        assert job["dependency"].startswith(f"afterok:{held}"), job
        job = _reason_of(later, pbs_workdir, "ExecutionTime")
        assert job["expected_start"], job
        job = _reason_of(limited, pbs_workdir, "RunLimit")
        assert job["kind"] == "limit" and "running job limit" in job["detail"], job
        assert f"queue {own_queue}: max_run [u:PBS_GENERIC=1]" in job["limits"], job
        jobs.append(big := _qsub("-l", "select=1:ncpus=2"))  # the node has 2 CPUs; the first queue job holds one
        job = _reason_of(big, pbs_workdir, "InsufficientResource")
        assert job["kind"] == "wait" and "ncpus" in job["detail"], job
    finally:
        pbs(["qdel", "-W", "force", *jobs], check=False)
