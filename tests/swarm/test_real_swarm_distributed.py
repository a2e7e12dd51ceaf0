"""A 2-process CPU ``torch.distributed`` (gloo) job across 2 Swarm tasks of one service on the testbed's
overlay network: each rank all-reduces rank + 1 and prints 3.0; the job is COMPLETED (about 15 s). A job
whose rank 1 exits 5 is FAILED with exit 5 and the rank in its state text (about 6 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from distributed_real import FAILING, rank_reports, write_job

from swarm.real import ROOT, docker, wait_for

pytestmark = pytest.mark.swarm


def _hpcjobs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)


def _need_network() -> None:
    if docker(["network", "inspect", "hpcjobs-testbed-net"], check=False).returncode != 0:
        pytest.skip("no overlay network hpcjobs-testbed-net: run `sudo bash tests/swarm/testbed.sh start`")


def test_torch_allreduce_across_two_tasks(swarm: None, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    _need_network()
    exp, site = write_job(tmp_path, "swarm")
    res = _hpcjobs("submit", str(exp), "--site", str(site), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sub = json.loads(res.stdout)
    job_id = sub["job_id"]
    try:
        assert job_id.split("-")[-2] == "2n"  # one point of 2 tasks

        def ended() -> str | None:
            st = _hpcjobs("status", job_id, cwd=tmp_path)
            return next((s for s in ("COMPLETED", "FAILED", "TIMEOUT") if s in st.stdout), None)
        state = wait_for("the job to end", ended, timeout=90, every=1)
        err = Path(sub["stderr"]).read_text()
        assert state == "COMPLETED", err[-3000:]
        assert rank_reports(Path(sub["stdout"]).read_text()) == {0: 3.0, 1: 3.0}, err[-3000:]
        assert "rank 0 of 2 at" in err and "rank 1 of 2 at" in err
    finally:
        docker(["service", "scale", "--detach", f"{job_id}=0"], check=False)
        docker(["service", "rm", job_id], check=False)


def test_a_failing_rank_fails_the_job(swarm: None, tmp_path: Path) -> None:
    _need_network()
    exp = tmp_path / "dfail.yaml"
    exp.write_text(FAILING)
    site = str(ROOT / "tests" / "sites" / "swarm-dist.yaml")
    res = _hpcjobs("submit", str(exp), "--site", site, "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    job_id = json.loads(res.stdout)["job_id"]
    try:
        def ended() -> dict[str, object] | None:
            st = _hpcjobs("status", job_id, "--json", cwd=tmp_path)
            point = json.loads(st.stdout)["points"][0] if st.returncode == 0 else None
            return point if point and point["state"] not in ("PENDING", "RUNNING", "SUBMITTED") else None
        point = wait_for("the job to end", ended, timeout=90, every=1)
        assert (point["state"], point["exit_code"]) == ("FAILED", 5)
        assert str(point["state_raw"]).startswith("rank 1 of 2: ")
    finally:
        docker(["service", "scale", "--detach", f"{job_id}=0"], check=False)
        docker(["service", "rm", job_id], check=False)
