"""load_sweep read by column (SQLite's JSON, Arrow) gives the frame the record-by-record reading gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.accounting.reports.sweeps import sweep_frame
from hpcjobs.accounting.schema import empty_frame
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from hpcjobs.analysis import load_sweep, params_frame, sweep_points_frame
from hpcjobs.config.sweep import SweepSpec
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, experiment_sha256
from hpcjobs.sweep.points.expand import expand

TESTBED = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed"


def _reference(folder: Path, jobs: pd.DataFrame) -> pd.DataFrame:
    """load_sweep as it was written first: a record per point, parameters as dicts, a join on point_id."""
    with Ledger.open(folder) as ledger:
        points = sweep_points_frame(ledger)
    frame = sweep_frame(points, jobs)
    frame = frame.merge(points[["point_id", "ledger_state", "attempt", "ledger_exit_code"]], on="point_id", how="left")
    missing = frame["state"].isna() & frame["ledger_state"].astype("string").isin(list(frame["state"].cat.categories))
    if missing.any():
        frame.loc[missing, "state"] = frame.loc[missing, "ledger_state"].astype("string")
        frame.loc[missing, "exit_code"] = frame.loc[missing, "ledger_exit_code"]
    # its join on point_id left that column as objects; the columnar read keeps sweep_frame's "string"
    return frame.drop(columns=["ledger_exit_code"]).assign(point_id=frame["point_id"].astype("string"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: Any) -> Path:
    """Array 11 of the real testbed capture (12 tasks) carries 12 points, job 5 one more; the rest are mixed."""
    folder = tmp_path_factory.mktemp("load") / "mix-00000000"
    spec = SweepSpec.model_validate({"grid": {"lr": [0.1, 0.01, 1], "opt": ["sgd", "adam", "it's"],
                                              "seed": [1, 2]}, "union": [{"points": [{"odd": True}, {"odd": None}]}]})
    points = expand(spec)
    meta = SweepMeta("mix-00000000", "e.yaml", experiment_sha256("x"), "hpctest", "slurm", {"name": "cap-array"})
    with Ledger.create(folder, meta, points) as led:
        ids = led.pending_ids()
        led.mark_submitted(led.plan_chunk(ids[:12], 0), "11")
        led.mark_submitted(led.plan_chunk(ids[12:13], 1, array=False), "5")
        led.mark_submitted(led.plan_chunk(ids[13:20], 2), "77")  # not in the accounting data
        led.record_status([JobStatus(f"77_{i}", "RUNNING", "RUNNING", "77", i) for i in range(4)])
        led.record_status([JobStatus("77_4", "FAILED", "FAILED", "77", 4, exit_code=2)])
        led.plan_chunk(ids[20:22], 3)
    return folder


def test_without_accounting_rows(sweep: Path) -> None:
    got = load_sweep(sweep, jobs=empty_frame(), results=False)
    pd.testing.assert_frame_equal(got, _reference(sweep, empty_frame()))
    assert list(got.columns[:6]) == ["point_id", "index", "lr", "odd", "opt", "seed"]
    assert got.loc[17, "state"] == "FAILED" and got.loc[17, "exit_code"] == 2  # task 4 of job 77


def test_with_the_real_testbed_accounting(sweep: Path) -> None:
    fields = (TESTBED / "sacct_header_X.txt").read_text().splitlines()[0].split("|")
    jobs = read_sacct_parsable2(TESTBED / "sacct.txt", fields)
    got = load_sweep(sweep, jobs=jobs, results=False)
    pd.testing.assert_frame_equal(got, _reference(sweep, jobs))
    assert got["job_id"].notna().sum() == 13


def test_with_results_columns_side_by_side(sweep: Path) -> None:
    got = load_sweep(sweep, jobs=empty_frame())
    assert list(got.columns[-3:]) == ["result_error", "log_out", "log_err"]
    assert got.loc[3, "log_out"] == f"{sweep}/points/{got.loc[3, 'point_id']}/stdout.log"


scalar = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                   st.none(), st.text(max_size=6), st.sampled_from(["2020-01-01", "2020-01-01T00:00:00", "12:30"]))


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), scalar, max_size=3), min_size=1, max_size=12))
def test_parameters_read_by_arrow_are_those_read_by_python(rows: list[dict[str, Any]]) -> None:
    texts = [json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for r in rows]
    want = pd.DataFrame.from_records([json.loads(t) for t in texts], index=pd.RangeIndex(len(texts)))
    want = want.infer_objects().convert_dtypes()
    got = params_frame(texts)
    pd.testing.assert_frame_equal(got, want)
    pd.testing.assert_frame_equal(params_frame("\n".join(texts).encode()), want)
