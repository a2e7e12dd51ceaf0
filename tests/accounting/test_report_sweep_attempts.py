"""``hpcjobs report --sweep``: each point counted by its final attempt, parameter columns, failures by parameter.

The accounting rows are real: a 4-point sweep of the Slurm testbed whose point ``lr=0.1, opt=adam``
failed (task 9569_1, exit 3) and completed when resubmitted (array 9573;
``tests/data/slurm/testbed/sacct_sweep_resubmitted.txt``, tests/data/SOURCES.md). The ledger is made
here with the same job ids, as the sweep's own ledger recorded them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hpcjobs.accounting.report_source import ReportFilters, read_saved
from hpcjobs.accounting.reports.sweeps import (
    failures_by_param,
    final_attempts,
    label_attempts,
    sweep_jobs_table,
    sweep_points_table,
    sweep_report_tables,
)
from hpcjobs.analysis import load_sweep_report, sweep_attempts_frame
from hpcjobs.cli import main
from hpcjobs.config.sweep import SweepSpec
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, experiment_sha256
from hpcjobs.sweep.points.expand import expand

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed" / "sacct_sweep_resubmitted.txt"
SWEEP = "rpt-retry-6bd68623"


def _make_ledger(root: Path, sweep_id: str = SWEEP) -> Path:
    """The ledger of the captured sweep: array 9569 (task 1 FAILED, exit 3), then the failed point as array 9573."""
    folder = root / sweep_id
    points = expand(SweepSpec.model_validate({"grid": {"lr": [0.1, 0.01], "opt": ["sgd", "adam"]}}))
    meta = SweepMeta(sweep_id, "retry.yaml", experiment_sha256("x"), "hpctest", "slurm", {"name": "rpt-retry"})
    with Ledger.create(folder, meta, points) as led:
        ids = led.pending_ids()
        led.mark_submitted(led.plan_chunk(ids, 0), "9569")
        led.record_status([JobStatus(f"9569_{i}", "COMPLETED", "COMPLETED", "9569", i, exit_code=0) for i in (0, 2, 3)])
        led.record_status([JobStatus("9569_1", "FAILED", "FAILED", "9569", 1, exit_code=3)])
        assert led.reset_for_resubmit([ids[1]]) == 1
        led.mark_submitted(led.plan_chunk([ids[1]], 1), "9573")
        led.record_status([JobStatus("9573_0", "COMPLETED", "COMPLETED", "9573", 0, exit_code=0)])
    return folder


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder holding the sweep's ledger under ``hpcjobs-sweeps/``, and the current folder."""
    _make_ledger(tmp_path / "hpcjobs-sweeps")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    return tmp_path


@pytest.fixture
def attempts(project: Path) -> pd.DataFrame:
    with Ledger.open(project / "hpcjobs-sweeps" / SWEEP) as ledger:
        return sweep_attempts_frame(ledger)


def test_the_attempts_frame_has_every_attempt_and_the_parameters(attempts: pd.DataFrame) -> None:
    assert list(attempts.columns[-2:]) == ["lr", "opt"]
    assert str(attempts["lr"].dtype) == "Float64" and str(attempts["opt"].dtype) == "string"
    rows = attempts[["index", "attempt", "final", "job_id", "ledger_state"]].astype(object).values.tolist()
    assert rows == [[0, 1, True, "9569_0", "COMPLETED"], [1, 1, False, "9569_1", "FAILED"],
                    [1, 2, True, "9573_0", "COMPLETED"], [2, 1, True, "9569_2", "COMPLETED"],
                    [3, 1, True, "9569_3", "COMPLETED"]]


def test_final_attempts_drop_the_replaced_job_and_its_steps(attempts: pd.DataFrame) -> None:
    df = read_saved(CAPTURE)
    labels = label_attempts(df, attempts)
    replaced = set(df.loc[labels["replaced"].to_numpy(), "job_id"].astype(str))
    assert replaced == {"9569_1"}
    kept = final_attempts(df, attempts)
    assert len(kept) == len(df) - 3  # the job row and its .batch/.extern steps
    jobs = kept[kept["step"].isna()]
    assert sorted(jobs["job_id"].astype(str)) == ["9569_0", "9569_2", "9569_3", "9573_0"]
    assert set(jobs["state"].astype(str)) == {"COMPLETED"}
    assert labels.loc[df["job_id"].astype(str).eq("9573_0").to_numpy(), "attempt"].tolist() == [2, 2, 2]


def test_points_table_and_failures_by_parameter(attempts: pd.DataFrame) -> None:
    df = read_saved(CAPTURE)
    points = sweep_points_table(final_attempts(df, attempts), attempts)
    assert list(points.columns[:4]) == ["point_id", "index", "lr", "opt"]
    assert points["attempts"].tolist() == [1, 2, 1, 1]
    assert points["job_id"].tolist() == ["9569_0", "9573_0", "9569_2", "9569_3"]
    assert set(points["state"].astype(str)) == {"COMPLETED"}
    none_failed = failures_by_param(points, ["lr", "opt"])
    assert none_failed["failed"].tolist() == [0, 0, 0, 0] and none_failed["failure_state"].isna().all()

    every = sweep_report_tables(df, attempts, "failures", all_attempts=True)
    by_param = every["failures_by_param"]
    assert by_param[["param", "value", "n", "failed", "failure_state"]].astype(str).values.tolist()[:2] == [
        ["lr", "0.1", "3", "1", "FAILED"], ["opt", "adam", "3", "1", "FAILED"]]  # a tie: parameter order
    assert by_param["failure_rate"].iloc[0] == pytest.approx(1 / 3)
    assert by_param["failed"].iloc[2:].tolist() == [0, 0]
    assert {r.state: r.jobs for r in every["failures_by_state"].itertuples()} == {"COMPLETED": 4, "FAILED": 1}


def test_failure_state_is_the_most_common_failure() -> None:
    points = pd.DataFrame({"seed": [1, 1, 1, 2, 2], "state": ["TIMEOUT", "FAILED", "TIMEOUT", "COMPLETED", "FAILED"]})
    table = failures_by_param(points, ["seed"])
    assert table[["value", "n", "failed", "failure_state"]].astype(str).values.tolist() == [
        ["1", "3", "3", "TIMEOUT"], ["2", "2", "1", "FAILED"]]


def test_jobs_table_gains_point_attempt_and_parameters(attempts: pd.DataFrame) -> None:
    df = read_saved(CAPTURE)
    table = sweep_jobs_table(df, attempts, ["job_id", "state", "exit"])
    assert list(table.columns) == ["job_id", "point_id", "attempt", "replaced", "lr", "opt", "state", "exit"]
    first = table[table["job_id"] == "9569_1"].iloc[0]
    assert bool(first["replaced"]) and first["attempt"] == 1 and first["exit"] == "exit 3"
    assert (first["lr"], first["opt"]) == (0.1, "adam")
    assert not table.loc[table["job_id"] == "9573_0", "replaced"].iloc[0]


def test_load_sweep_report_resolves_a_prefix_and_counts_final_attempts(project: Path) -> None:
    data = load_sweep_report(ReportFilters(sweep="rpt-retry-6b"), from_file=str(CAPTURE))
    assert data.sweep_id == SWEEP and data.attempts is not None and not data.all_attempts
    assert data.jobs["step"].isna().sum() == 4
    every = load_sweep_report(ReportFilters(sweep=SWEEP), all_attempts=True, from_file=str(CAPTURE))
    assert every.jobs["step"].isna().sum() == 5


def _cli(*args: str) -> object:
    return CliRunner().invoke(main, ["report", "--from-file", str(CAPTURE), *args])


def test_cli_json_counts_final_attempts_by_prefix(project: Path) -> None:
    out = _cli("--sweep", "rpt-re", "--json")
    assert out.exit_code == 0, out.output
    tables = json.loads(out.stdout)
    assert {r["state"]: r["jobs"] for r in tables["failures_by_state"]} == {"COMPLETED": 4}
    assert [(r["lr"], r["opt"], r["attempts"]) for r in tables["sweep_points"]] == [
        (0.1, "sgd", 1), (0.1, "adam", 2), (0.01, "sgd", 1), (0.01, "adam", 1)]
    assert {(r["param"], r["value"], r["failed"]) for r in tables["failures_by_param"]} == {
        ("lr", "0.1", 0), ("lr", "0.01", 0), ("opt", "sgd", 0), ("opt", "adam", 0)}
    every = json.loads(_cli("--sweep", "rpt-retry", "--all-attempts", "--json").stdout)
    assert {r["state"]: r["jobs"] for r in every["failures_by_state"]} == {"COMPLETED": 4, "FAILED": 1}
    assert every["failures_by_param"][0]["failure_state"] == "FAILED"


def test_cli_csv_has_the_failures_by_parameter_table(project: Path) -> None:
    out = _cli("--sweep", SWEEP, "--all-attempts", "--section", "failures", "--csv")
    assert out.exit_code == 0, out.output
    parts = dict(p.split("\n", 1) for p in out.stdout.strip().split("# ")[1:])
    rows = list(csv.DictReader(io.StringIO(parts["failures_by_param"])))
    assert list(rows[0]) == ["param", "value", "n", "failed", "failure_rate", "failure_state"]
    assert (rows[0]["failed"], rows[0]["n"], rows[0]["failure_state"]) == ("1", "3", "FAILED")
    points = list(csv.DictReader(io.StringIO(parts["sweep_points"])))
    assert [p["attempts"] for p in points] == ["1", "2", "1", "1"]


def test_cli_jobs_all_attempts_marks_the_replaced_one(project: Path) -> None:
    out = _cli("--sweep", "rpt-retry", "--jobs", "--all-attempts", "--columns", "job_id,state", "--json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["jobs"]
    assert [(r["job_id"], r["attempt"], r["replaced"], r["state"]) for r in rows if r["opt"] == "adam"
            and r["lr"] == 0.1] == [("9569_1", 1, True, "FAILED"), ("9573_0", 2, False, "COMPLETED")]
    final = json.loads(_cli("--sweep", "rpt-retry", "--jobs", "--json").stdout)["jobs"]
    assert len(final) == 4 and "replaced" not in final[0]


def test_cli_terminal_html_and_plots(project: Path, tmp_path: Path) -> None:
    out = _cli("--sweep", "rpt-retry", "--all-attempts", "--section", "failures")
    assert out.exit_code == 0, out.output
    assert "failures by param" in out.stdout and "sweep points" in out.stdout
    html_file = tmp_path / "r.html"
    plots = tmp_path / "plots"
    out = _cli("--sweep", "rpt-retry", "--all-attempts", "--section", "failures", "--html", str(html_file),
               "--plot", str(plots))
    assert out.exit_code == 0, out.output
    page = html_file.read_text()
    assert "Failures by param" in page and "Sweep points" in page and "FAILED" in page
    assert {p.name for p in plots.iterdir()} >= {"failures_by_param.png", "sweep_outcome_lr.png",
                                                  "sweep_outcome_opt.png"}


def test_cli_refuses_unknown_ambiguous_and_lone_all_attempts(project: Path) -> None:
    _make_ledger(project / "hpcjobs-sweeps", "rpt-other-00000000")
    unknown = _cli("--sweep", "nosuch")
    assert unknown.exit_code == 2
    assert "no sweep 'nosuch'" in unknown.output and SWEEP in unknown.output
    ambiguous = _cli("--sweep", "rpt-")
    assert ambiguous.exit_code == 2
    assert "ambiguous" in ambiguous.output and SWEEP in ambiguous.output and "rpt-other-00000000" in ambiguous.output
    lone = _cli("--all-attempts")
    assert lone.exit_code == 2 and "--all-attempts goes with --sweep" in lone.output


def test_a_saved_file_without_the_ledger_counts_every_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    out = _cli("--sweep", "rpt-retry", "--section", "failures", "--json")
    assert out.exit_code == 0, out.output
    assert "not on this machine" in out.stderr
    tables = json.loads(out.stdout)
    assert {r["state"]: r["jobs"] for r in tables["failures_by_state"]} == {"COMPLETED": 4, "FAILED": 1}
    assert "sweep_points" not in tables
