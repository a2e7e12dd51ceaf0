"""End to end on the real Slurm: a sweep with known outcomes, then ``hpcjobs report --sweep`` and ``load_sweep``.

The four points complete, exit 3, run past a one-minute limit, and get cancelled while running.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import hpcjobs
from hpcjobs.cli import main
from hpcjobs.process import run_command
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")


def test_report_shows_a_sweeps_outcomes(slurm_testbed, tmp_path, monkeypatch):
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "fates.yaml"
    exp.write_text(
        "name: fates\n"
        f"description: {tmp_path}\n"
        "resources: {walltime: 1m}\n"
        "command: 'case \"$mode\" in ok) true;; fail) exit 3;; *) sleep 600;; esac'\n"
        "sweep:\n  grid:\n    mode: [ok, fail, timeout, cancel]\n"
    )
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    (array_id,) = report.job_ids
    with Ledger.open(prepared.folder) as ledger:
        index = {p.params["mode"]: p.array_index for p in ledger.points()}
    deadline = time.monotonic() + 60
    task = f"{array_id}_{index['cancel']}"
    while run_command(["squeue", "-h", "-j", task, "-o", "%T"], check=False).stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    run_command(["scancel", task])
    deadline = time.monotonic() + 240
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(3)
    assert st.counts == {"COMPLETED": 1, "FAILED": 1, "TIMEOUT": 1, "CANCELLED": 1}
    time.sleep(6)  # sacct rows are complete a few seconds after the jobs end (tests/slurm/README.md)

    result = CliRunner().invoke(main, ["report", "--sweep", prepared.sweep_id, "--since", "1d",
                                       "--section", "failures", "--json"])
    assert result.exit_code == 0, result.output
    tables = json.loads(result.stdout)  # stderr warns that the ledger (under sweeps/, not found from here) is not used
    assert {row["state"]: row["jobs"] for row in tables["failures_by_state"]} == {
        "COMPLETED": 1, "FAILED": 1, "TIMEOUT": 1, "CANCELLED": 1}
    exits = {(row["state"], row["exit_code"]) for row in tables["failures_by_exit"]}
    assert ("FAILED", 3) in exits

    df = hpcjobs.load_sweep(prepared.sweep_id, root=root, cache=False)
    fate = dict(zip(df["mode"], df["state"].astype(str), strict=True))
    assert fate == {"ok": "COMPLETED", "fail": "FAILED", "timeout": "TIMEOUT", "cancel": "CANCELLED"}
    assert int(df.loc[df["mode"] == "fail", "exit_code"].iloc[0]) == 3
    assert df["wait"].notna().all() and (df.loc[df["mode"] == "timeout", "elapsed"] >= "55s").all()
