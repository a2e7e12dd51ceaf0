"""``hpcjobs plan`` on the real OpenPBS testbed: the queue's state and its queued and running jobs, and the history
of waits from ``qstat -x -f -F json``. Two jobs of this test (each taking the node's 2 CPUs) are running and queued
while it plans; both are deleted by id at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pbs.real import PbsServer, pbs

pytestmark = pytest.mark.pbs

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "tests" / "sites" / "openpbs-testbed.yaml"
HELLO = REPO / "examples" / "hello.yaml"


def test_plan_shows_the_queue_with_our_jobs(pbs_server: PbsServer, pbs_workdir: Path) -> None:
    name = f"plan{uuid.uuid4().hex[:6]}"
    ids: list[str] = []
    try:
        for _ in range(2):
            out = pbs(["qsub", "-N", name, "-l", "select=1:ncpus=2", "-l", "walltime=00:10:00", "-o", "/dev/null",
                       "-j", "oe", "--", "/bin/sleep", "300"]).stdout.strip()
            ids.append(out)
        env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1",
               "XDG_CACHE_HOME": str(pbs_workdir / "cache"), "HPCJOBS_DISCOVER": "0"}
        proc = subprocess.run([sys.executable, "-m", "hpcjobs", "plan", str(HELLO), "--site", str(SITE), "--json"],
                              cwd=pbs_workdir, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        plan = json.loads(proc.stdout)
        (row,) = plan["rows"]
        assert (row["partition"], row["fits"], row["queue_state"]) == ("workq", True, "enabled, started")
        assert row["queued"] + row["running"] >= 2, row  # ours at least; other tests' jobs may be there too
        assert row["expected_start"] is None and row["core_hours"] == pytest.approx(5 / 60)
        assert plan["history_error"] is None, plan
        assert plan["recommended"] == {"partition": "workq", "qos": None}
        assert plan["reason"].startswith("no start estimate; chosen among 1 partition where it fits")
    finally:
        if ids:
            pbs(["qdel", *ids], check=False)
