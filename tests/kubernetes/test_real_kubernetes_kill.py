"""kill -9 of ``hpcjobs sweep`` at random moments on the real Kubernetes testbed, then a resume: every point
runs once, and every Job labelled with the sweep's experiment is a chunk the ledger accepted (or a stray)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from k8s_real import ROOT, delete_chunks, kubectl
from real_testbed import wait_for

from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV

pytestmark = pytest.mark.kubernetes


def _site(folder: Path) -> Path:
    """The shipped k8s-testbed site with arrays of at most 2 tasks: 8 points are 4 chunks."""
    text = (ROOT / "site-configs" / "k8s-testbed.yaml").read_text()
    path = folder / "k8s-kill.yaml"
    path.write_text(text.replace("name: k8s-testbed", "name: k8s-kill") + "limits: {max_array_size: 3}\n")
    return path


def _labelled(name: str) -> set[str]:
    """``<namespace>/<chunk>`` of every Job labelled ``hpcjobs/name=<name>``."""
    items = json.loads(kubectl(["get", "jobs", "--all-namespaces", "-l", f"hpcjobs/name={name}", "-o",
                                "json"]).stdout)["items"]
    return {f"{j['metadata']['namespace']}/{j['metadata']['labels']['hpcjobs/chunk']}" for j in items}


def test_kill_9_at_random_moments_then_resume(kubernetes: None, tmp_path: Path) -> None:
    rng = random.Random(20261204)
    root = tmp_path / "sweeps"
    name = f"killk{os.getpid()}"  # the label the cluster is searched by: unique to this run
    exp = tmp_path / "killed.yaml"
    exp.write_text(f"name: {name}\ndescription: run in {tmp_path}\nresources: {{cpus_per_task: 1, memory: 64M, "
                   'walltime: 5m}\ncommand: echo "$HPCJOBS_POINT_ID" >> "$HPCJOBS_SWEEP_DIR/runs.log"\n'
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5, 6, 7]\n")
    argv = [sys.executable, "-m", "hpcjobs", "sweep", str(exp), "--site", str(_site(tmp_path)), "--root", str(root),
            "--json"]
    # a submission killed before its answer is looked up by its tag; the create command died with the submitter
    # (same process group), so 8 s is ample here (the default of 60 s is for slow servers)
    env = {**os.environ, "PYTHONPATH": str(ROOT), LOOKUP_ENV: "8"}
    kills = 0
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
        sweep_id = next(d.name for d in root.iterdir() if d.name.startswith(f"{name}-"))

        seen: list[object] = []

        def done() -> bool:
            status = sweep_status(sweep_id, root=root)
            seen[:] = [status.counts]
            return status.done
        try:
            wait_for("the sweep to finish", done, timeout=150, every=1.0)
        except AssertionError as exc:  # say where it stood: the counts, the submissions, the cluster's Jobs
            with Ledger.open(root / sweep_id) as ledger:
                subs = [(s.chunk, s.state, s.job_id) for s in ledger.submissions(with_points=False)]
            raise AssertionError(f"{exc}; counts {seen}; submissions {subs}; labelled {_labelled(name)}") from exc
        with Ledger.open(root / sweep_id) as ledger:
            assert ledger.summary() == {"COMPLETED": 8}, ledger.summary()
            assert ledger.check_invariants() == []
            ids = {p.point_id for p in ledger.points()}
            accepted = {s.job_id for s in ledger.submissions() if s.state == "submitted"}
            strays = {s.job_id for s in ledger.strays()}
        runs = Counter((root / sweep_id / "runs.log").read_text().split())
        assert set(runs) == ids and set(runs.values()) == {1}, runs
        labelled = _labelled(name)
        assert accepted <= labelled <= accepted | strays, (labelled, accepted, strays)
    finally:
        delete_chunks([c.split("/")[1] for c in _labelled(name)])
    assert kills >= 1
