"""Whatever a point writes as its metrics, ``results`` reads it or names the problem, never a crash.

Classes: a metric named like a column of the table (``index``, ``state``, ``point_id``,
``result_error``, ``log_out``: the join crashed, or a column was written over), JSON nested deeper than
Python's recursion limit, and files with very many metrics or columns (slow, unusable tables).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.sweep.results import MAX_METRICS, ResultSource, join_results, results_frame

COLUMNS = ["index", "point_id", "x", "state", "exit_code", "job_id", "attempt", "ledger_state", "result_error",
           "log_out", "log_err", "result_index", "result_result_error"]


def _sweep(tmp_path: Path, payloads: dict[str, bytes], name: str = "metrics.json") -> Path:
    folder = tmp_path / "sweep"
    for pid, data in payloads.items():
        run = folder / "points" / pid
        run.mkdir(parents=True, exist_ok=True)
        (run / name).write_bytes(data)
    return folder


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.one_of(st.sampled_from(COLUMNS), st.text(min_size=1, max_size=8)), min_size=1,
                      max_size=8, unique=True))
def test_metric_names_never_collide_with_the_table(tmp_path_factory, names: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("m")
    metrics = {n: i for i, n in enumerate(names)}
    folder = _sweep(tmp, {"p1": json.dumps(metrics).encode(), "p2": json.dumps(metrics).encode()})
    results = results_frame(folder, ["p1", "p2"], sources=[ResultSource(file="metrics.json")], cache=False)
    assert results.columns.is_unique
    assert list(results["point_id"]) == ["p1", "p2"]
    left = pd.DataFrame({c: pd.array(["p1", "p2"] if c == "point_id" else [1, 2], dtype="string" if c == "point_id"
                                     else "Int64") for c in COLUMNS})
    joined = join_results(left, results)
    assert joined.columns.is_unique and len(joined) == 2
    assert list(joined["point_id"]) == ["p1", "p2"]
    assert sorted(int(v) for v in joined.iloc[0][len(left.columns):len(left.columns) + len(names)]) == \
        sorted(metrics.values())  # every metric is there once, under some name


def test_hostile_metric_files_give_an_error_for_the_point(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    deep_obj = b'{"a":' * 5_000 + b"1" + b"}" * 5_000
    wide = json.dumps({f"m{i}": i for i in range(MAX_METRICS + 1)}).encode()
    folder = _sweep(tmp_path, {"deep": deep, "deepobj": deep_obj, "wide": wide, "ok": b'{"loss": 1}'})
    res = results_frame(folder, ["deep", "deepobj", "wide", "ok"], sources=[ResultSource(file="metrics.json")],
                        cache=False)
    errors = dict(zip(res["point_id"], res["result_error"], strict=True))
    assert "nested too deeply" in errors["deep"] or "expected a JSON object" in errors["deep"]
    assert "nested" in errors["deepobj"]
    assert f"more than {MAX_METRICS:,} metrics" in errors["wide"]
    assert errors["ok"] is pd.NA and list(res["loss"].dropna()) == [1]


def test_a_csv_with_too_many_columns_is_refused(tmp_path: Path) -> None:
    header = ",".join(f"c{i}" for i in range(MAX_METRICS + 1))
    folder = _sweep(tmp_path, {"p": (header + "\n" + ",".join("1" * (MAX_METRICS + 1)) + "\n").encode()},
                    name="m.csv")
    res = results_frame(folder, ["p"], sources=[ResultSource(file="m.csv")], cache=False)
    assert "columns" in str(res["result_error"][0])
