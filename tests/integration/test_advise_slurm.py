"""Right-sizing on the real Slurm: a sweep that asks for far more memory than it uses, and one point that times out.

Four points hold 60-120 MiB for a few seconds under ``--mem=2G``; the fifth sleeps past its one-minute limit.
``hpcjobs advise SWEEP --json`` must propose much less memory and, for the timed-out point, a longer wall time;
``hpcjobs resubmit SWEEP --right-size`` must submit only that point, with the raised ``--time`` (read back from
sacct's Timelimit).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.process import run_command
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
_MIB = 2**20
_HOLD = ('if [ "$mb" = 0 ]; then sleep 600; else /usr/bin/python3 -c '
         '"import time; b = b\\"x\\" * ($mb << 20); time.sleep(5)"; fi')


_HOG = '/usr/bin/python3 -c "import time; b = b\\"x\\" * ($mb << 20); time.sleep(5)"'


def _advice(sweep_id: str, root: Path) -> dict:
    """``advise --json`` once sacct has every completed point's MaxRSS (rows are partial just after the end)."""
    deadline = time.monotonic() + 90
    while True:
        result = CliRunner().invoke(main, ["advise", sweep_id, "--root", str(root), "--min-runs", "4", "--json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        memory = next(r for r in doc["resources"] if r["resource"] == "memory")
        if doc["runs"] == 5 and doc["completed"] == 4 and memory["measured"] == 4 and doc["raises"]:
            return doc
        assert time.monotonic() < deadline, doc
        time.sleep(2)


def _efficiency_metrics_of_the_sweep(sweep_id: str, root: Path) -> None:
    """`hpcjobs metrics --efficiency`: the five points' sacct figures as histograms Prometheus' parser reads."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    result = CliRunner().invoke(main, ["metrics", sweep_id, "--root", str(root), "--efficiency"])
    assert result.exit_code == 0, result.output
    fams = {f.name: f for f in text_string_to_metric_families(result.output)}
    memory = fams["hpcjobs_sweep_point_memory_efficiency_ratio"]
    buckets = {s.labels["le"]: s.value for s in memory.samples if s.name.endswith("_bucket")}
    assert buckets["+Inf"] >= 4 and buckets["0.25"] == buckets["+Inf"], buckets  # <= 120 MiB (and Python) of 2 GiB
    walltime = fams["hpcjobs_sweep_point_walltime_efficiency_ratio"]
    time_buckets = {s.labels["le"]: s.value for s in walltime.samples if s.name.endswith("_bucket")}
    assert time_buckets["+Inf"] == 5 and time_buckets["0.5"] == 4, time_buckets  # the TIMEOUT one used it all
    print(result.output.count("\n"), "lines of metrics; memory buckets", buckets)


def test_advise_and_resubmit_right_size(slurm_testbed, tmp_path, monkeypatch):
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "rightsize.yaml"
    exp.write_text(
        "name: rightsize\n"
        f"description: {tmp_path}\n"
        "resources: {memory: 2G, walltime: 1m}\n"
        f"command: '{_HOLD}'\n"
        "sweep:\n  grid:\n    mb: [60, 80, 100, 120, 0]\n"
    )
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    (array_id,) = report.job_ids
    deadline = time.monotonic() + 400  # the sleeper is killed 60-90 s after it starts; other tests' jobs may queue
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(3)
    assert st.counts == {"COMPLETED": 4, "TIMEOUT": 1}
    slurm_testbed.wait_terminal(array_id)
    slurm_testbed.wait_complete_rows([array_id], ["Timelimit", "ReqTRES", "Partition"])

    doc = _advice(prepared.sweep_id, root)
    assert doc["enough"] and doc["group"] == {"sweeps": prepared.sweep_id}
    memory = next(r for r in doc["resources"] if r["resource"] == "memory")
    assert memory["asked"] == 2048 * _MIB
    assert 100 * _MIB < memory["used_max"] < 400 * _MIB  # the 120 MiB point, with Python itself
    assert memory["used_max"] <= memory["proposed"] < 1024 * _MIB  # far below the 2G asked
    (raised,) = doc["raises"]
    assert raised["state"] == "TIMEOUT" and raised["resource"] == "walltime" and raised["asked"] == 60
    assert raised["proposed"] == 120 and raised["proposed_text"] == "00:02:00"  # 1 min × 1.5, whole minutes
    assert doc["savings"]["core_hours_proposed"] <= doc["savings"]["core_hours_asked"]
    wait = doc["queue_wait"]  # plan's history (sacct -X --allusers by day): this sweep's five jobs at least
    assert wait["error"] is None and wait["partition"] == "debug" and wait["history_jobs"] >= 5, wait
    assert wait["walltime_asked_s"] == 60 and wait["wait_asked_jobs"] >= 5 and wait["wait_asked_p50_s"] >= 0, wait
    assert wait["class_asked"] == "<=15m" and wait["class_asked_jobs"] >= wait["wait_asked_jobs"], wait

    _efficiency_metrics_of_the_sweep(prepared.sweep_id, root)

    with Ledger.open(prepared.folder) as ledger:
        sleeper = next(p for p in ledger.points() if p.params["mb"] == 0)
    result = CliRunner().invoke(main, ["resubmit", prepared.sweep_id, "--root", str(root), "--right-size",
                                       "--min-runs", "4"])
    assert result.exit_code == 0, result.output
    print(result.output)  # what the README shows
    assert f"point {sleeper.point_id} (TIMEOUT): " in result.output
    assert "walltime 00:01:00 -> 00:02:00 (raise: TIMEOUT)" in result.output
    assert "1 point(s) reset; submitted 1 in 1 job(s)" in result.output
    with Ledger.open(prepared.folder) as ledger:
        points = {p.point_id: p for p in ledger.points()}
    again = points[sleeper.point_id]
    assert again.attempt == 2 and again.array_job_id and again.array_job_id != array_id
    assert sum(p.attempt for p in points.values()) == 6  # only the timed-out point went again
    try:
        (row,) = slurm_testbed.wait_complete_rows([again.array_job_id], ["Timelimit", "ReqMem"])
        assert row["Timelimit"] == "00:02:00"
        assert row["ReqMem"] != "2G"  # the advised memory, not the 2G asked before
    finally:
        run_command(["scancel", again.array_job_id], check=False)


def test_a_point_killed_for_memory_goes_again_with_more(slurm_testbed, tmp_path, monkeypatch):
    """Four points hold 40-70 MiB under --mem=200M; the fifth writes 600 MiB and is killed (FAILED 0:9 here)."""
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "memkill.yaml"
    exp.write_text(
        "name: memkill\n"
        f"description: {tmp_path}\n"
        "resources: {memory: 200M, walltime: 2m}\n"
        f"command: '{_HOG}'\n"
        "sweep:\n  grid:\n    mb: [40, 50, 60, 70, 600]\n"
    )
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    (array_id,) = report.job_ids
    deadline = time.monotonic() + 300
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(3)
    assert st.counts.get("COMPLETED") == 4 and sum(st.counts.values()) == 5, st.counts
    slurm_testbed.wait_terminal(array_id)
    slurm_testbed.wait_complete_rows([array_id], ["Timelimit", "ReqTRES", "Partition"])
    deadline = time.monotonic() + 90
    while True:  # the killed task's MaxRSS arrives with its step row
        result = CliRunner().invoke(main, ["advise", prepared.sweep_id, "--root", str(root), "--min-runs", "4",
                                           "--json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        if doc["raises"] and next(r for r in doc["resources"] if r["resource"] == "memory")["measured"] == 4:
            break
        assert time.monotonic() < deadline, doc
        time.sleep(2)
    (raised,) = doc["raises"]
    assert raised["resource"] == "memory" and raised["asked"] == 200 * _MIB
    assert raised["proposed"] >= 300 * _MIB  # at least the request × 1.5

    with Ledger.open(prepared.folder) as ledger:
        hog = next(p for p in ledger.points() if p.params["mb"] == 600)
    result = CliRunner().invoke(main, ["resubmit", prepared.sweep_id, "--root", str(root), "--right-size",
                                       "--min-runs", "4"])
    assert result.exit_code == 0, result.output
    print(result.output)
    assert f"point {hog.point_id} ({hog.state}): memory 200M -> {raised['proposed_text']} (raise:" in result.output
    with Ledger.open(prepared.folder) as ledger:
        again = next(p for p in ledger.points() if p.point_id == hog.point_id)
    assert again.attempt == 2 and again.array_job_id != array_id
    try:
        (row,) = slurm_testbed.wait_complete_rows([again.array_job_id], ["ReqMem"])
        assert row["ReqMem"] == raised["proposed_text"]
    finally:
        run_command(["scancel", again.array_job_id], check=False)
