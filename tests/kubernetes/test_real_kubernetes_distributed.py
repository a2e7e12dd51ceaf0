"""A 2-process CPU ``torch.distributed`` (gloo) job across 2 pods of the Kubernetes testbed (no
cluster DNS: rank 0's pod IP through the mounted run folder): each rank all-reduces rank + 1 and
prints 3.0; the job is COMPLETED (about 13 s). A job whose rank 1 exits 5 is FAILED with exit 5 and the
rank in its state text (about 5 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from distributed_real import FAILING, rank_reports, write_job
from k8s_real import ROOT, delete_chunks
from real_testbed import wait_for

pytestmark = pytest.mark.kubernetes


def _hpcjobs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)


def test_torch_allreduce_across_two_pods(kubernetes: None, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    exp, site = write_job(tmp_path, "kubernetes")
    res = _hpcjobs("submit", str(exp), "--site", str(site), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sub = json.loads(res.stdout)
    job_id = sub["job_id"]
    chunk = job_id.split("/")[1]
    try:
        assert chunk.split("-")[-2] == "2n"  # one point of 2 pods

        def ended() -> str | None:
            st = _hpcjobs("status", job_id, cwd=tmp_path)
            return next((s for s in ("COMPLETED", "FAILED", "TIMEOUT") if s in st.stdout), None)
        state = wait_for("the job to end", ended, timeout=90, every=1)
        err = Path(sub["stderr"]).read_text()
        assert state == "COMPLETED", err[-3000:]
        assert rank_reports(Path(sub["stdout"]).read_text()) == {0: 3.0, 1: 3.0}, err[-3000:]
        assert "rank 0 of 2 at" in err and "rank 1 of 2 at" in err
    finally:
        delete_chunks([chunk])


def test_a_failing_rank_fails_the_job(kubernetes: None, tmp_path: Path) -> None:
    exp = tmp_path / "dfail.yaml"
    exp.write_text(FAILING)
    site = str(ROOT / "tests" / "sites" / "k8s-dist.yaml")
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
        delete_chunks([job_id.split("/")[1]])
