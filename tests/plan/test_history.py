"""Queue wait of similar jobs, on synthetic frames in the accounting schema, and the compact day cache."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from hpcjobs.accounting.schema import conform
from hpcjobs.plan.history import compact_history, load_history, similar_wait

T0 = pd.Timestamp("2026-12-01T10:00:00Z")


def _jobs(rows: list[dict]) -> pd.DataFrame:
    """Job rows (and a step row) in the accounting schema: partition, gpus, nodes, limit (min), wait (min), start."""
    data: dict[str, list] = {k: [] for k in ("job_id", "step", "partition", "gpus", "nodes", "time_limit", "wait",
                                             "start_time", "state")}
    for i, r in enumerate(rows):
        start = r.get("start", T0)
        data["job_id"].append(str(i))
        data["step"].append(r.get("step"))
        data["partition"].append(r["partition"])
        data["gpus"].append(r.get("gpus", 0))
        data["nodes"].append(r.get("nodes", 1))
        data["time_limit"].append(pd.Timedelta(minutes=r.get("limit", 60)))
        data["wait"].append(None if start is None else pd.Timedelta(minutes=r["wait"]))
        data["start_time"].append(start)
        data["state"].append("COMPLETED" if start is not None else "PENDING")
    df = pd.DataFrame(data)
    df["start_time"] = pd.to_datetime(df["start_time"], utc=True)
    return conform(df)


def test_median_and_p90_of_the_similar_jobs_per_partition() -> None:
    rows = [{"partition": "gpu", "gpus": 2, "wait": w} for w in range(1, 11)]          # similar: waits 1..10 min
    rows += [{"partition": "gpu", "gpus": 1, "wait": 500},                             # other GPU count
             {"partition": "gpu", "gpus": 2, "nodes": 2, "wait": 500},                 # other node count
             {"partition": "gpu", "gpus": 2, "limit": 29, "wait": 500},                # wall time below x0.5
             {"partition": "gpu", "gpus": 2, "limit": 121, "wait": 500},               # above x2
             {"partition": "gpu", "gpus": 2, "wait": 500, "step": "batch"},            # a step, not a job
             {"partition": "gpu", "gpus": 2, "wait": 500, "start": None},              # never started
             {"partition": "debug", "gpus": 2, "limit": 30, "wait": 3},                # x0.5 is similar
             {"partition": "debug", "gpus": 2, "limit": 120, "wait": 5},               # x2 is similar
             {"partition": "other", "gpus": 2, "wait": 1}]                             # not asked about
    hist = compact_history(_jobs(rows))
    assert len(hist) == 17  # of 19 rows: the step row and the pending job are not history
    stats = similar_wait(hist, gpus=2, nodes=1, walltime_s=3600, partitions=["gpu", "debug", "empty"])
    assert set(stats) == {"gpu", "debug"}
    assert stats["gpu"].jobs == 10
    assert stats["gpu"].p50_s == pytest.approx(5.5 * 60) and stats["gpu"].p90_s == pytest.approx(9.1 * 60)
    assert (stats["debug"].jobs, stats["debug"].p50_s) == (2, pytest.approx(4 * 60))


def test_no_walltime_means_any_walltime_and_none_found_is_empty() -> None:
    hist = compact_history(_jobs([{"partition": "p", "limit": 1, "wait": 2}, {"partition": "p", "limit": 900,
                                                                                "wait": 4}]))
    assert similar_wait(hist, gpus=0, nodes=1, walltime_s=None, partitions=["p"])["p"].jobs == 2
    assert similar_wait(hist, gpus=4, nodes=1, walltime_s=None, partitions=["p"]) == {}


def test_compact_history_keeps_jobs_that_started_in_the_window() -> None:
    df = _jobs([{"partition": "p", "wait": 1, "start": T0},
                {"partition": "p", "wait": 2, "start": T0 + pd.Timedelta("1D")}])
    day = compact_history(df, T0.normalize().to_pydatetime(), (T0.normalize() + pd.Timedelta("1D")).to_pydatetime())
    assert day["wait_s"].tolist() == [60.0]
    assert list(day.columns) == ["partition", "gpus", "nodes", "limit_s", "wait_s"]


def test_finished_days_are_read_from_the_compact_cache(tmp_path) -> None:
    now = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    calls: list[tuple[datetime, datetime]] = []

    def fetch(start: datetime, end: datetime) -> pd.DataFrame:
        calls.append((start, end))
        return _jobs([{"partition": "p", "wait": 1, "start": pd.Timestamp(start) + pd.Timedelta("1h")},
                      {"partition": "p", "wait": 9, "start": pd.Timestamp(start) - pd.Timedelta("1h")}])

    first = load_history(3, fetch, now=now, cache_dir=tmp_path)
    assert [c[0].day for c in calls] == [2, 3, 4] and len(first) == 3  # each day's own start counted once
    assert first["wait_s"].tolist() == [60.0, 60.0, 60.0]
    calls.clear()
    again = load_history(3, fetch, now=now, cache_dir=tmp_path)
    assert [c[0].day for c in calls] == [4]  # only the current day is asked again
    pd.testing.assert_frame_equal(first, again)
    assert len(list((tmp_path / "plan-wait").glob("*.parquet"))) == 2
    assert load_history(1, fetch, now=now + timedelta(days=1), cache_dir=tmp_path)["wait_s"].tolist() == [60.0]
