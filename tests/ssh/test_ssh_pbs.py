"""A sweep "from a laptop" on the OpenPBS testbed: every command over SSH to its login user, nothing run here.

As ``test_ssh_slurm.py``: the laptop's scheduler commands are shadowed by failing ones, the login node is
the SSH testbed's user, whose jobs the OpenPBS testbed runs. On the login node hpcjobs runs PBS's own
``qsub`` from ``$PBS_EXEC/bin`` (as its ``/etc/pbs.conf`` says), never a Slurm wrapper of the same name.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from pbs.real import PbsServer
from ssh.real_ssh import (
    LOGIN_USER,
    PBS_OVER_SSH,
    ROOT,
    cut_connection_trials,
    hpcjobs_cli,
    laptop_path,
    remote,
    remote_site,
)

from hpcjobs.states import parse_job_tag

pytestmark = pytest.mark.ssh

BASE_SITE = ROOT / "tests" / "sites" / "openpbs-sweeps.yaml"

EXPERIMENT = """\
name: {name}
resources: {{walltime: 5m}}
command: |
  printf '{{"loss": %s}}\\n' "$loss" > "$HPCJOBS_RUN_DIR/metrics.json"
  echo "loss=$loss as $(id -un)"
results:
  - {{file: metrics.json}}
sweep:
  grid: {{loss: [0.3, 0.1, 0.2]}}
"""


@pytest.fixture
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    PBS_OVER_SSH.require()
    folder = tmp_path / "laptop"
    folder.mkdir()
    monkeypatch.setenv("PATH", laptop_path(tmp_path))
    monkeypatch.chdir(folder)
    return folder


def test_a_pbs_sweep_from_the_laptop_runs_there_and_its_results_come_back(laptop: Path) -> None:
    site, _workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-pbs")
    (laptop / "exp.yaml").write_text(EXPERIMENT.format(name="pbs-from-laptop"))
    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    sweep = json.loads(sub.stdout)["sweep_id"]
    deadline = time.monotonic() + 300
    while True:
        status = json.loads(hpcjobs_cli(["status", sweep, "--json"], cwd=laptop, env={}).stdout)
        if status["finished"] == status["total"] == 3:
            break
        assert time.monotonic() < deadline, status
        time.sleep(2)
    assert status["counts"] == {"COMPLETED": 3}, status
    res = hpcjobs_cli(["results", sweep, "--json", "--sort", "loss"], cwd=laptop, env={})
    assert res.returncode == 0, res.stderr
    assert [r["loss"] for r in json.loads(res.stdout)] == [0.1, 0.2, 0.3]
    logs = hpcjobs_cli(["logs", sweep, "--index", "1"], cwd=laptop, env={})
    assert logs.returncode == 0 and f"loss=0.1 as {LOGIN_USER}" in logs.stdout, logs.stdout + logs.stderr
    assert remote(["true"]).returncode == 0


def held_subjobs(sweep: str) -> dict[str, int]:
    """Subjobs per submission token the server holds for ``sweep`` (``qstat -t``, run here as the test's own look)."""
    tasks: dict[str, int] = {}
    for job_id, attrs in PbsServer().jobs(subjobs=True).items():
        tag = parse_job_tag(str((attrs.get("Variable_List") or {}).get("HPCJOBS_TAG", "")))
        if tag is not None and tag.sweep_id == sweep and re.search(r"\[\d+\]", job_id):
            tasks[tag.token] = tasks.get(tag.token, 0) + 1
    return tasks


def test_a_connection_killed_during_a_pbs_submission_never_duplicates_or_loses_a_point(laptop: Path) -> None:
    """Eight trials, each way of cutting the connection twice (the Slurm test runs twenty)."""
    cut_connection_trials(laptop, BASE_SITE, trials=8, held={"directives": ["-h"]}, tasks_of=held_subjobs, name="pcut")
