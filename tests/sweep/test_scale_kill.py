"""kill -9 during the plan and submission of a 200,000-point sweep, then the same command again: every
point is queued exactly once, against the counting fake Slurm of ``benchmarks/bench_sweep_calls.py``
(its queue kept in a file, so that the killed process and the resuming one see the same jobs)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcjobs.states import parse_job_tag
from hpcjobs.sweep.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "sites" / "hpctest.yaml"
POINTS = 200_000

_RUN = """
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from counting_slurm import CountingSlurm
from hpcjobs import process

work = Path(sys.argv[1])
process.run_command = CountingSlurm(1001, journal=work / "queue")  # the seam every scheduler call goes through
from hpcjobs.sweep.api import run_sweep

os.chdir(work)
print("started", flush=True)
prepared, report = run_sweep(work / "big.yaml", site=sys.argv[3], root=work / "sweeps")
print("done", prepared.sweep_id, report.points_submitted, flush=True)
"""


def _env(work: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "HPCJOBS_SUBMIT_LOOKUP_S": "1", "HPCJOBS_CACHE_DIR": str(work / "cache")}


def _argv(work: Path) -> list[str]:
    return [sys.executable, "-c", _RUN, str(work), str(ROOT / "benchmarks"), str(SITE)]


@pytest.mark.slow
def test_kill_9_during_a_200000_point_plan_then_resume_submits_every_point_once(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_text(
        "name: big\ncommand: echo $x $seed\nsweep:\n  grid:\n"
        f"    x: {list(range(1000))}\n    seed: {list(range(POINTS // 1000))}\n")
    rng = random.Random(20261204)
    child = subprocess.Popen(_argv(tmp_path), stdout=subprocess.PIPE, env=_env(tmp_path))
    assert child.stdout is not None and child.stdout.readline().strip() == b"started"
    time.sleep(rng.uniform(0.5, 3.0))  # planning (expansion, the ledger, chunk files) or submitting
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.communicate()
    queue = tmp_path / "queue"
    print(f"killed with {len(queue.read_text().splitlines()) if queue.exists() else 0} job(s) queued; "
          f"{'after' if b'done' in out else 'before'} the run ended")
    done = subprocess.run(_argv(tmp_path), capture_output=True, env=_env(tmp_path), check=True, timeout=600)
    assert b"done" in done.stdout, done.stderr.decode()[-2000:]

    folder = next((tmp_path / "sweeps").iterdir())
    jobs = [line.split("|") for line in queue.read_text().splitlines()]
    with Ledger.open(folder) as led:
        assert led.check_invariants() == []
        assert led.summary() == {"SUBMITTED": POINTS}
        assert led.strays() == [] and led.unresolved_submissions() == []
        accepted = {s.token: s for s in led.submissions() if s.state == "submitted"}
        seen: list[str] = []
        for job_id, comment, size in jobs:  # every job the scheduler holds is an accepted submission
            tag = parse_job_tag(comment)
            assert tag is not None and tag.token in accepted, comment
            sub = accepted[tag.token]
            assert sub.job_id == job_id and len(sub.point_ids) == int(size)
            ids = (folder / "chunks" / f"{sub.chunk}.ids").read_text().split()
            assert ids == list(sub.point_ids)  # the file the array's tasks read names the submitted points
            seen += sub.point_ids
        assert len(accepted) == len(jobs)
        assert len(seen) == len(set(seen)) == POINTS  # each point in one queued job, once
        assert set(seen) == set(led.point_columns(["point_id"])["point_id"])
