"""End to end on the real Slurm: ``hpcjobs report --sweep PREFIX`` after a failed point was fixed by a resubmission.

Four points (``lr`` x ``opt``); ``lr=0.1, opt=adam`` exits 3 until a marker file exists, then the
failed point is resubmitted and completes. The report counts each point's final attempt (4 jobs, none
failed) and ``--all-attempts`` brings back the replaced one, with the failures by parameter value.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.sweep.api import resubmit_sweep, run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
#: The fields a report reads whose final values come a few seconds after the job ends.
COMPLETE = ["State", "ExitCode", "Elapsed", "Timelimit", "Partition", "ReqTRES"]


def _wait_done(sweep_id: str, root: Path, timeout: float = 300) -> dict[str, int]:
    deadline = time.monotonic() + timeout  # other tests' jobs may be queued ahead of these
    while not (st := sweep_status(sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(3)
    return st.counts


def _report(*args: str) -> dict[str, list[dict[str, object]]]:
    result = CliRunner().invoke(main, ["report", *args, "--json"])
    assert result.exit_code == 0, result.output
    tables: dict[str, list[dict[str, object]]] = json.loads(result.stdout)
    return tables


def test_report_counts_final_attempts_and_failures_by_parameter(slurm_testbed, tmp_path, monkeypatch):
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "fixed"
    exp = tmp_path / "retry.yaml"
    exp.write_text(
        "name: rpt-retry\n"
        f"description: {tmp_path}\n"
        "resources: {walltime: 2m}\n"
        f"command: 'if [ \"$lr\" = 0.1 ] && [ \"$opt\" = adam ] && [ ! -e {marker} ]; then echo boom >&2; exit 3; fi'\n"
        "sweep:\n  grid:\n    lr: [0.1, 0.01]\n    opt: [sgd, adam]\n"
    )
    root = tmp_path / "hpcjobs-sweeps"  # found from the current folder, as a user's commands find it
    prepared, _ = run_sweep(exp, site=SITE, root=root)
    sweep_id = prepared.sweep_id
    assert _wait_done(sweep_id, root) == {"COMPLETED": 3, "FAILED": 1}
    marker.touch()
    *_, reset = resubmit_sweep(sweep_id, root=root)
    assert reset == 1
    assert _wait_done(sweep_id, root) == {"COMPLETED": 4}
    with Ledger.open(prepared.folder) as ledger:
        jobs = sorted({s.job_id for s in ledger.submissions() if s.job_id})
    assert len(jobs) == 2, jobs
    slurm_testbed.wait_complete_rows(jobs, COMPLETE)

    prefix = sweep_id[:-3]
    final = _report("--sweep", prefix)
    assert {r["state"]: r["jobs"] for r in final["failures_by_state"]} == {"COMPLETED": 4}
    assert final["failures_by_exit"] == []
    points = {(r["lr"], r["opt"]): r for r in final["sweep_points"]}
    assert len(points) == 4 and {r["state"] for r in points.values()} == {"COMPLETED"}
    assert points[(0.1, "adam")]["attempts"] == 2 and points[(0.01, "sgd")]["attempts"] == 1
    by_param = final["failures_by_param"]
    assert {(r["param"], r["value"]) for r in by_param} == {("lr", "0.1"), ("lr", "0.01"), ("opt", "sgd"),
                                                            ("opt", "adam")}
    assert all(r["failed"] == 0 and r["n"] == 2 and r["failure_state"] is None for r in by_param)

    every = _report("--sweep", prefix, "--all-attempts")
    assert {r["state"]: r["jobs"] for r in every["failures_by_state"]} == {"COMPLETED": 4, "FAILED": 1}
    assert {(r["state"], r["exit_code"]) for r in every["failures_by_exit"]} == {("FAILED", 3)}
    worst = every["failures_by_param"][:2]
    assert {(r["param"], r["value"]) for r in worst} == {("lr", "0.1"), ("opt", "adam")}
    assert all(r["n"] == 3 and r["failed"] == 1 and r["failure_state"] == "FAILED" for r in worst)
    assert all(r["failed"] == 0 for r in every["failures_by_param"][2:])

    listed = _report("--sweep", prefix, "--all-attempts", "--jobs", "--columns", "job_id,state,exit")
    rows = listed["jobs"]
    assert len(rows) == 5
    replaced = [r for r in rows if r["replaced"]]
    assert len(replaced) == 1 and replaced[0]["state"] == "FAILED" and replaced[0]["attempt"] == 1
    assert (replaced[0]["lr"], replaced[0]["opt"]) == (0.1, "adam")
    assert replaced[0]["exit"] == "exit 3"
