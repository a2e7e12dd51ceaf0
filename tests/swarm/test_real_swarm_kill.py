"""kill -9 of ``hpcjobs sweep`` at random moments on the real Swarm testbed, then a resume: every point runs
once, and every service labelled with the sweep's tag is one the ledger accepted (or recorded as a stray)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV
from swarm.real import ROOT, remove_services, services_of, wait_for

pytestmark = pytest.mark.swarm


def _site(folder: Path) -> Path:
    """The shipped swarm-testbed site with arrays of at most 2 tasks: 8 points are 4 services."""
    text = (ROOT / "site-configs" / "swarm-testbed.yaml").read_text()
    path = folder / "swarm-kill.yaml"
    path.write_text(text.replace("name: swarm-testbed", "name: swarm-kill") + "limits: {max_array_size: 3}\n")
    return path


def test_kill_9_at_random_moments_then_resume(swarm: None, tmp_path: Path) -> None:
    rng = random.Random(20261204)
    root = tmp_path / "sweeps"
    exp = tmp_path / "killed.yaml"
    exp.write_text(f"name: killed\ndescription: run in {tmp_path}\nresources: {{cpus_per_task: 1, memory: 128M, "
                   'walltime: 5m}\ncommand: echo "$HPCJOBS_POINT_ID" >> "$HPCJOBS_SWEEP_DIR/runs.log"\n'
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5, 6, 7]\n")
    argv = [sys.executable, "-m", "hpcjobs", "sweep", str(exp), "--site", str(_site(tmp_path)), "--root", str(root),
            "--json"]
    # a submission killed before its answer is looked up by its tag; the create command died with the submitter
    # (same process group), so 8 s is ample here (the default of 60 s is for slow servers)
    env = {**os.environ, "PYTHONPATH": str(ROOT), LOOKUP_ENV: "8"}
    kills = 0
    sweep_id = None
    try:
        for _ in range(4):
            proc = subprocess.Popen(argv, cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.4, 1.6))  # from the plan to past a submission or two
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait()
        final = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert final.returncode == 0, final.stderr
        sweep_id = next(d.name for d in root.iterdir() if d.name.startswith("killed-"))

        def done() -> bool:
            return sweep_status(sweep_id, root=root).done
        try:
            wait_for("the sweep to finish", done, timeout=120, every=1.0)
        except AssertionError as exc:  # say where it stood: which points, which services (a rare stall under load)
            st = sweep_status(sweep_id, root=root, points_limit=None)
            stuck = [(p.point_id, p.state, p.state_raw, p.job_id) for p in st.points if p.state != "COMPLETED"]
            raise AssertionError(f"{exc}; counts {st.counts}; not completed {stuck}; services "
                                 f"{sorted(services_of(sweep_id))}; submitter stderr: {final.stderr[-2000:]}") from None
        with Ledger.open(root / sweep_id) as ledger:
            assert ledger.summary() == {"COMPLETED": 8}, ledger.summary()
            assert ledger.check_invariants() == []
            ids = {p.point_id for p in ledger.points()}
            accepted = {s.job_id for s in ledger.submissions() if s.state == "submitted"}
            strays = {s.job_id for s in ledger.strays()}
        runs = Counter((root / sweep_id / "runs.log").read_text().split())
        assert set(runs) == ids and set(runs.values()) == {1}, runs
        # by label: every service of the sweep still there, and every one removed after it finished, is accepted
        # by the ledger or recorded as a stray (scaled to 0 before any task ran)
        saved = {p.stem for p in (root / sweep_id / "scheduler-records").glob("*.json")}
        labelled = set(services_of(sweep_id)) | saved
        assert labelled and labelled <= accepted | strays, (labelled, accepted, strays)
        assert accepted <= labelled
    finally:
        if sweep_id is not None:
            remove_services(sweep_id)
    assert kills >= 1
