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


def _submit_and_wait(exp: Path, tmp_path: Path) -> dict[str, str]:
    """Submit the one job and wait until hpcjobs reports it over; its submission record.

    Swarm's constraint enforcer may refuse the task of a job it had placed ("assigned node no longer
    meets constraints", seen on the 2-core testbed beside the Slurm and OpenPBS tests) and then starts
    no other task: hpcjobs must report that as a failure that says so, and this test then submits
    once more.
    """
    for attempt in (1, 2):
        res = _hpcjobs("submit", str(exp), "--site", SITE, "--json", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        sub = json.loads(res.stdout)
        job_id = sub["job_id"]
        last: list[str] = []

        def over(job_id: str = job_id, last: list[str] = last) -> bool:
            st = _hpcjobs("status", job_id, cwd=tmp_path)
            last[:] = [st.stdout + st.stderr]
            return st.returncode == 0 and ("COMPLETED" in st.stdout or "FAILED" in st.stdout)
        try:
            wait_for("the job to be over", over, timeout=240, every=1)
        except BaseException:
            tasks = subprocess.run(["docker", "service", "ps", "--no-trunc", job_id], capture_output=True,
                                   text=True, check=False)
            print(f"last status:\n{''.join(last)}\ndocker service ps:\n{tasks.stdout}{tasks.stderr}")
            subprocess.run(["docker", "service", "rm", job_id], capture_output=True, check=False)
            raise
        if "COMPLETED, exit 0" in last[0]:
            return sub
        subprocess.run(["docker", "service", "rm", job_id], capture_output=True, check=False)
        assert attempt == 1 and "(Swarm starts no other task)" in last[0], last[0]
        print(f"Swarm refused the task of {job_id} after placing it; submitting again:\n{last[0]}")
    raise AssertionError("unreachable")


def test_single_job_logs_are_the_printed_files(swarm: None, tmp_path: Path) -> None:
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\nresources: {cpus_per_task: 1, memory: 128M, walltime: 5m}\n"
                   "command: |\n  echo out-line\n  echo err-line >&2\n")
    sub = _submit_and_wait(exp, tmp_path)
    job_id = sub["job_id"]
    try:
        assert sub["stdout"] == str(tmp_path / "hpcjobs-logs" / f"one-{job_id}.out")
        assert Path(sub["stdout"]).read_text() == "out-line\n"
        assert Path(sub["stderr"]).read_text() == "err-line\n"
        logs = _hpcjobs("logs", job_id, cwd=tmp_path)
        assert logs.returncode == 0, logs.stderr
        assert "out-line" in logs.stdout and "err-line" in logs.stdout and sub["stdout"] in logs.stdout
    finally:
        subprocess.run(["docker", "service", "rm", job_id], capture_output=True, check=False)


def test_a_job_swarm_refuses_and_never_retries_is_failed_with_swarms_reason(swarm: None, tmp_path: Path) -> None:
    """A bind mount whose source does not exist: Swarm rejects the one task and makes no other one."""
    text = (ROOT / "site-configs" / "swarm-testbed.yaml").read_text()
    site = tmp_path / "swarm-bad-mount.yaml"
    site.write_text(text.replace("name: swarm-testbed", "name: swarm-bad-mount").replace(
        "    - {source: /etc, target: /etc, readonly: true}\n",
        "    - {source: /etc, target: /etc, readonly: true}\n"
        f"    - {{source: {tmp_path / 'no-such-folder'}, target: /data, readonly: true}}\n"))
    exp = tmp_path / "refused.yaml"
    exp.write_text("name: refused\nresources: {cpus_per_task: 1, memory: 128M, walltime: 5m}\ncommand: echo ran\n")
    res = _hpcjobs("submit", str(exp), "--site", str(site), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    job_id = json.loads(res.stdout)["job_id"]
    try:
        last: list[str] = []

        def over() -> bool:
            st = _hpcjobs("status", job_id, "--json", cwd=tmp_path)
            last[:] = [st.stdout + st.stderr]
            return st.returncode == 0 and json.loads(st.stdout)["job"]["state"] == "FAILED"
        wait_for("Swarm to refuse the task", over, timeout=120, every=1)
        record = json.loads(last[0])["job"]
        assert record["exit_code"] is None, record
        assert record["state_raw"].startswith("Rejected: ") and record["state_raw"].endswith(
            "(Swarm starts no other task)"), record  # Swarm's reason kept in the ledger, as the service goes
        assert "bind source path does not exist" in record["state_raw"], record
        shown = _hpcjobs("status", job_id, cwd=tmp_path)
        assert "FAILED" in shown.stdout and "bind source path does not exist" in shown.stdout, shown.stdout
    finally:
        subprocess.run(["docker", "service", "rm", job_id], capture_output=True, check=False)
