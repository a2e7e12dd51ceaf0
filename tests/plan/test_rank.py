"""The recommendation rule: earliest expected start, then historical median wait, then cost, then site order."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hpcjobs.plan.rank import PlanRow, recommend

NOW = datetime(2026, 12, 4, 15, 0, 0, tzinfo=timezone.utc)


def _row(name: str, start_min: float | None = None, p50: float | None = None, cost: float | None = 1.0,
         fits: bool = True, jobs: int = 10) -> PlanRow:
    return PlanRow(name, fits=fits, why_not=() if fits else ("too big",),
                   start=None if start_min is None else NOW + timedelta(minutes=start_min),
                   wait_jobs=jobs if p50 is not None else 0, wait_p50_s=p50, wait_p90_s=p50,
                   billing_hours=cost, core_hours=cost)


def test_earliest_expected_start_wins_over_wait_and_cost() -> None:
    best, reason = recommend([_row("a", 30, p50=1, cost=1), _row("b", 5, p50=9000, cost=100)], NOW)
    assert best is not None and best.partition == "b"
    assert reason == "expected to start in 5m (sbatch --test-only), the earliest of 2 partitions where it fits"


def test_a_row_that_does_not_fit_is_never_chosen() -> None:
    best, _ = recommend([_row("a", 0, fits=False), _row("b", 60)], NOW)
    assert best is not None and best.partition == "b"


def test_starts_in_the_same_minute_tie_and_the_median_wait_decides() -> None:
    # the estimates of two calls a few seconds apart are the same start
    rows = [_row("a", 0.1, p50=600), _row("b", 0.0, p50=60), _row("c", 0.5, p50=None)]
    best, reason = recommend(rows, NOW)
    assert best is not None and best.partition == "b"
    assert reason == ("expected to start now (sbatch --test-only), the earliest of 3 partitions where it fits "
                      "(tied with a, c); median wait of 10 similar jobs 1m (next best 10m)")


def test_no_estimates_falls_back_to_wait_then_cost() -> None:
    best, reason = recommend([_row("a", p50=300), _row("b", p50=120), _row("c")], NOW)
    assert best is not None and best.partition == "b"
    assert reason.startswith("no start estimate; chosen among 3 partitions where it fits by historical wait and cost")
    best, reason = recommend([_row("a", cost=8.0), _row("b", cost=2.0)], NOW)
    assert best is not None and best.partition == "b"
    assert reason.endswith("lowest cost 2 CPU-hours")


def test_a_start_estimate_beats_a_row_without_one() -> None:
    best, _ = recommend([_row("a", p50=1), _row("b", 120, p50=9999)], NOW)
    assert best is not None and best.partition == "b"


def test_full_tie_keeps_the_sites_order() -> None:
    best, _ = recommend([_row("x", 0, p50=5, cost=1), _row("y", 0, p50=5, cost=1)], NOW)
    assert best is not None and best.partition == "x"


def test_nothing_fits_names_every_reason() -> None:
    best, reason = recommend([_row("a", fits=False), _row("b", fits=False)], NOW)
    assert best is None
    assert reason == "the request fits no partition of the site: a: too big; b: too big"


def test_qos_rows_are_labelled_partition_slash_qos() -> None:
    assert PlanRow("gpu", "high").label == "gpu/high" and PlanRow("gpu").label == "gpu"


def test_reason_of_a_full_tie_says_the_sites_order_decided() -> None:
    _, reason = recommend([_row("x", 0, cost=1), _row("y", 0, cost=1)], NOW)
    assert reason.endswith("(tied with y); no history of similar jobs; same cost: first in the site's order")
    _, reason = recommend([_row("x", 0, cost=2), _row("y", 0, cost=1)], NOW)
    assert reason.endswith("(tied with x); no history of similar jobs; lowest cost 1 CPU-hours")
