"""Single jobs (``hpcjobs submit``) on the real one-node Docker Swarm testbed: the log paths ``submit``
prints are the files the job writes, ``status JOB_ID`` follows the service, ``logs JOB_ID`` shows them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swarm.real import ROOT, SITE, wait_for

pytestmark = pytest.mark.swarm


def _hpcjobs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)


def test_single_job_logs_are_the_printed_files(swarm: None, tmp_path: Path) -> None:
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\nresources: {cpus_per_task: 1, memory: 128M, walltime: 5m}\n"
                   "command: |\n  echo out-line\n  echo err-line >&2\n")
    res = _hpcjobs("submit", str(exp), "--site", SITE, "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sub = json.loads(res.stdout)
    job_id = sub["job_id"]
    try:
        assert sub["stdout"] == str(tmp_path / "hpcjobs-logs" / f"one-{job_id}.out")

        last: list[str] = []

        def done() -> bool:
            st = _hpcjobs("status", job_id, cwd=tmp_path)
            last[:] = [st.stdout + st.stderr]
            return st.returncode == 0 and "COMPLETED, exit 0" in st.stdout
        # the first service of the run, beside the Slurm and OpenPBS tests on 2 cores: once over 90 s
        try:
            wait_for("the job to complete", done, timeout=240, every=1)
        except BaseException:
            tasks = subprocess.run(["docker", "service", "ps", "--no-trunc", job_id], capture_output=True,
                                   text=True, check=False)
            print(f"last status:\n{''.join(last)}\ndocker service ps:\n{tasks.stdout}{tasks.stderr}")
            raise
        assert Path(sub["stdout"]).read_text() == "out-line\n"
        assert Path(sub["stderr"]).read_text() == "err-line\n"
        logs = _hpcjobs("logs", job_id, cwd=tmp_path)
        assert logs.returncode == 0, logs.stderr
        assert "out-line" in logs.stdout and "err-line" in logs.stdout and sub["stdout"] in logs.stdout
    finally:
        subprocess.run(["docker", "service", "rm", job_id], capture_output=True, check=False)
