"""``hpcjobs plan`` and ``submit --partition auto`` on the real Slurm testbed, with the node held by a job of our own.

The testbed has one node (8 CPUs) shared by its two partitions (tests/slurm/README.md). A filler job of this test
takes all 8 CPUs for 20 minutes, so ``sbatch --test-only`` must put the planned job after it, on both partitions.
Other tests' jobs may be queued too: the start is only asserted to be after the filler's time-limit end (minus
slack), never equal to it. Every job this test submits has a name of its own and is cancelled by id at the end.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import run_hpcjobs

from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "tests" / "sites" / "hpctest.yaml"
HELLO = REPO / "examples" / "hello.yaml"
FILL_MINUTES = 20


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``hpcjobs ARGS`` with caches under ``cwd`` and discovery off (the plan reads the live scheduler)."""
    return run_hpcjobs(*args, cwd=cwd, env={"XDG_CACHE_HOME": str(cwd / "cache"), "HPCJOBS_DISCOVER": "0"})


def _squeue_start(job_id: str) -> datetime | None:
    out = run_command(["squeue", "--noheader", f"--jobs={job_id}", "--format=%T|%S"],
                      env={"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}, check=False).stdout.strip()
    state, _, start = out.partition("|")
    if state != "RUNNING":
        return None
    return datetime.fromisoformat(start).replace(tzinfo=timezone.utc)


@pytest.fixture
def filled_node(slurm_testbed, slurm_workdir: str):  # type: ignore[no-untyped-def]
    """A job of ours holding all 8 CPUs of the node, RUNNING; cancelled afterwards (by id)."""
    job = slurm_testbed.submit("--job-name", f"plan-fill-{uuid.uuid4().hex[:8]}", "-c", "8", "--mem=512M",
                               f"--time={FILL_MINUTES}", wrap="sleep 1200", workdir=slurm_workdir)
    ours = [job.job_id]
    try:
        slurm_testbed.wait_squeue_state(job.job_id, "RUNNING", timeout=300.0)
        started = _squeue_start(job.job_id)
        assert started is not None
        yield started, ours
    finally:
        run_command(["scancel", *ours], check=False)


def test_plan_puts_the_job_after_ours_and_auto_submits_there(filled_node, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started, ours = filled_node
    after_filler = started + timedelta(minutes=FILL_MINUTES) - timedelta(seconds=30)

    proc = _cli("plan", str(HELLO), "--site", str(SITE), "--days", "1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads(proc.stdout)
    rows = {r["partition"]: r for r in plan["rows"]}
    assert set(rows) == {"debug", "gpu"}
    for row in rows.values():
        assert row["fits"] and row["estimate_error"] is None, row
        start = datetime.fromisoformat(row["expected_start"])
        assert start >= after_filler, (row, started)
        assert row["start_nodes"] == "vm"
        assert row["core_hours"] == pytest.approx(5 / 60)
    assert plan["history_error"] is None and plan["history_days"] == 1
    assert plan["recommended"]["partition"] in rows
    assert plan["reason"].startswith("expected to start in ")

    # the same request with a GPU: only `gpu` fits, by hpcjobs' own limit check
    proc = _cli("plan", str(HELLO), "--site", str(SITE), "--days", "0", "--set", "resources.gpus_per_node=1",
                "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads(proc.stdout)
    debug, gpu = plan["rows"]
    assert not debug["fits"] and debug["why_not"] == ["1 GPUs per node requested, the limit is 0"]
    assert gpu["fits"] and datetime.fromisoformat(gpu["expected_start"]) >= after_filler
    assert plan["recommended"] == {"partition": "gpu", "qos": None}

    # submit --partition auto: the choice on stderr in one line, the job queued on it (behind ours)
    name = f"plan-auto-{uuid.uuid4().hex[:8]}"
    proc = _cli("submit", str(HELLO), "--site", str(SITE), "--set", f"name={name}", "--set",
                "resources.gpus_per_node=1", "--partition", "auto", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = json.loads(proc.stdout.splitlines()[-1])["job_id"]
    ours.append(job_id)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("--partition auto:")]
    assert len(lines) == 1 and lines[0].startswith("--partition auto: gpu: expected to start in "), proc.stderr
    part = run_command(["squeue", "--noheader", f"--jobs={job_id}", "--format=%P|%T"]).stdout.strip()
    assert part in ("gpu|PENDING", "gpu|RUNNING"), part


def test_a_request_slurm_cannot_place_fits_nowhere(slurm_testbed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # 8 CPUs per task and 2 tasks: 16 CPUs on the one 8-CPU node. The site file says cpus_per_node 8, so
    # hpcjobs' own check refuses it first; with the limit lifted from a copy of the site, Slurm refuses it.
    site = tmp_path / "wide.yaml"
    site.write_text(SITE.read_text().replace("cpus_per_node: 8", "cpus_per_node: 64").replace(
        "name: hpctest", "name: wide"))
    proc = _cli("plan", str(HELLO), "--site", str(site), "--days", "0", "--set", "resources.cpus_per_task=8",
                "--set", "resources.tasks_per_node=2", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["recommended"] is None
    for row in plan["rows"]:
        assert row["why_not"] == ["Slurm: More processors requested than permitted"], row
