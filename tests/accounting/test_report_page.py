"""The interactive report's data: aggregated, bounded, escaped; written without matplotlib."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcjobs.accounting.reports.page import charts, page_data, render_page
from hpcjobs.accounting.reports.page.sweep import sweep_parallel
from hpcjobs.accounting.reports.page.tables import MAX_ROWS, table_spec
from hpcjobs.accounting.reports.tables import efficiency, report_tables
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data"
TESTBED = DATA / "slurm" / "testbed"
FIELDS = (TESTBED / "sacct_header_X.txt").read_text().splitlines()[0].split("|")


@pytest.fixture(scope="module")
def testbed() -> pd.DataFrame:
    return read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)


def _embedded(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="hpcjobs-data">(.*?)</script>', page, re.S)[1])


def test_the_page_holds_its_script_and_data_and_names_no_other_resource(testbed):
    tables = report_tables(testbed)
    data = page_data(testbed, tables)
    page = render_page("T", data, summary={"jobs": "22"})
    assert _embedded(page) == json.loads(json.dumps(data))
    assert [s["key"] for s in data["sections"]] == ["efficiency", "wait", "failures"]
    names = [t["name"] for s in data["sections"] for t in s["tables"]]
    assert names == list(tables)
    kinds = {c["name"]: c["kind"] for s in data["sections"] for c in s["charts"]}
    assert kinds == {"efficiency_plane": "scatter", "busy_cores_over_time": "lines", "hist_cpu_efficiency": "bars",
                     "hist_mem_efficiency": "bars", "hist_time_efficiency": "bars", "wait_over_time": "lines",
                     "jobs_by_state": "hbars"}
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page) and "@import" not in page
    assert "default-src 'none'" in page  # the page may not fetch anything, even if a value tried


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_no_value_can_end_the_data_script_or_become_markup(text):
    table = pd.DataFrame({"user": [text, f"</script><script>x({text!r})</script>"], "jobs": [1, 2]})
    data = {"sections": [{"key": "efficiency", "heading": text, "charts": [], "notes": [],
                          "tables": [table_spec("waste_by_user", text, table)]}], "state_colours": {}}
    page = render_page(text, data, summary={text: text}, subtitle=text, notes=[text])
    body = page.split('id="hpcjobs-data">', 1)[1]
    assert body.index("</script>") == len(body.split("</script>", 1)[0])  # the first </script> is its own
    data = _embedded(page)
    assert data["sections"][0]["tables"][0]["rows"][0][0] == text
    assert "<!--" not in page.split("<script", 1)[1].split("</script>", 1)[0]


def test_every_row_of_a_table_comes_with_display_text_and_sort_keys():
    df = pd.DataFrame({"user": ["b", "a", None], "core_hours": [2.5, 10.0, None],
                       "wait": pd.to_timedelta([60, None, 3600], unit="s"),
                       "mem_efficiency": pd.array([0.5, None, 1.25], dtype="Float64")})
    spec = table_spec("t", "T", df)
    assert [c["numeric"] for c in spec["columns"]] == [False, True, True, True]
    assert spec["rows"] == [["b", "2.5", "00:01:00", "50.0%"], ["a", "10", None, None],
                            [None, None, "01:00:00", "125.0%"]]
    assert spec["keys"] == [[None, 2.5, 60.0, 0.5], [None, 10.0, None, None], [None, None, 3600.0, 1.25]]
    big = pd.DataFrame({"job_id": np.arange(MAX_ROWS + 5).astype(str)})
    spec = table_spec("jobs", "Jobs", big)
    assert len(spec["rows"]) == MAX_ROWS and f"{MAX_ROWS + 5:,} rows" in spec["note"]


def test_log_links_are_regular_files_inside_the_sweep_only(tmp_path):
    sweep = tmp_path / "s"
    for p in ("p1", "p2", "p3"):
        (sweep / "points" / p).mkdir(parents=True)
    (sweep / "points" / "p1" / "stdout.log").write_text("out")
    (sweep / "points" / "p1" / "stderr.log").write_text("err")
    (tmp_path / "secret").write_text("x")
    (sweep / "points" / "p2" / "stdout.log").symlink_to(tmp_path / "secret")  # planted: leads out
    os.mkfifo(sweep / "points" / "p3" / "stdout.log")
    df = pd.DataFrame({"point_id": ["p1", "p2", "p3", None], "state": ["COMPLETED", "FAILED", "FAILED", "PENDING"]})
    spec = table_spec("sweep_points", "Points", df, log_folder=sweep)
    assert [c["name"] for c in spec["columns"]][-2:] == ["stdout", "stderr"]
    assert [r[-2:] for r in spec["rows"]] == [["stdout", "stderr"], [None, None], [None, None], [None, None]]
    assert spec["links"][0][-2:] == [(sweep / "points" / "p1" / "stdout.log").resolve().as_uri(),
                                     (sweep / "points" / "p1" / "stderr.log").resolve().as_uri()]
    assert spec["links"][1:] == [None, None, None]


def _jobs(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2026-11-01", tz="UTC") + pd.to_timedelta(rng.integers(0, 7 * 86400, n), unit="s")
    elapsed = pd.to_timedelta(rng.integers(60, 7200, n), unit="s")
    return pd.DataFrame({
        "job_id": [str(i) for i in range(n)], "user": rng.choice(["ada", "bob", "cy"], n),
        "partition": rng.choice([f"p{i}" for i in range(11)], n), "state": "COMPLETED",
        "submit_time": start - pd.to_timedelta(rng.integers(0, 3600, n), unit="s"), "start_time": start,
        "end_time": start + elapsed, "elapsed": elapsed, "cpus": pd.array(rng.integers(1, 9, n), dtype="Int64"),
        "wait": pd.to_timedelta(rng.integers(0, 3600, n), unit="s"),
        "cpu_efficiency": rng.uniform(0, 1.3, n), "mem_efficiency": rng.uniform(0, 3, n),
        "time_efficiency": rng.uniform(0, 1.1, n)})


def test_histograms_put_the_clipped_share_in_a_last_bar_and_say_it():
    eff = _jobs(1000)
    spec = charts.efficiency_histogram(eff, "mem_efficiency")
    over = (eff["mem_efficiency"] > 1.5).sum()
    assert sum(b["count"] for b in spec["bins"]) == 1000 and spec["bins"][-1] == {
        "from": "150%", "to": f"{100 * eff['mem_efficiency'].max():.0f}% (max)", "count": int(over), "over": True}
    assert len(spec["bins"]) == 31 and f"{over:,} ({100 * over / 1000:.1f}%) above 150%" in spec["note"]
    exact = charts.efficiency_histogram(pd.DataFrame({"cpu_efficiency": [1.0, 0.0, 0.99]}), "cpu_efficiency")
    assert [b["count"] for b in exact["bins"]][-1] == 2 and not any(b.get("over") for b in exact["bins"])


def test_the_plane_is_a_density_above_the_scatter_limit_and_counts_every_job():
    small = charts.efficiency_plane(_jobs(charts.SCATTER_MAX))
    assert small["kind"] == "scatter" and small["points"][0][2] == "job 0 · " + _jobs(1)["user"][0]
    big = charts.efficiency_plane(_jobs(charts.SCATTER_MAX + 1))
    assert big["kind"] == "density" and sum(map(sum, big["counts"])) == charts.SCATTER_MAX + 1
    assert len(big["counts"]) == charts.DENSITY_BINS and "drawn on the edge" in big["note"]


def test_busy_cores_are_the_average_cores_held_in_each_bin():
    t0 = pd.Timestamp("2026-11-01 00:00", tz="UTC")
    jobs = pd.DataFrame({"partition": ["a", "a", "b"], "cpus": pd.array([2, 4, 1], dtype="Int64"),
                         "start_time": [t0, t0 + pd.Timedelta(minutes=30), t0],
                         "end_time": [t0 + pd.Timedelta(hours=2), t0 + pd.Timedelta(minutes=90),
                                      t0 + pd.Timedelta(hours=2)]})
    spec = charts.busy_cores_over_time(jobs)
    assert spec["note"].startswith("average over each 1 min")
    a = dict((p[0], p[1]) for p in spec["series"][0]["points"])
    ms = t0.timestamp() * 1000
    assert a[ms + 30_000] == 2.0 and a[ms + 45 * 60_000 + 30_000] == 6.0 and a[ms + 100 * 60_000 + 30_000] == 2.0
    assert {p[1] for p in spec["series"][1]["points"]} == {1.0}


def test_time_series_are_bounded_whatever_the_jobs():
    jobs = _jobs(20_000)
    wait = charts.wait_over_time(jobs)
    assert len(wait["series"]) == charts.MAX_SERIES and "other" in [s["name"] for s in wait["series"]]
    assert all(len(s["points"]) <= charts.TIME_BINS for s in wait["series"])
    assert wait["note"].startswith("median wait of the jobs submitted in each 1 h")


def test_parallel_axes_take_numbers_and_categories():
    points = pd.DataFrame({"point_id": ["a", "b", "c"], "index": [0, 1, 2], "lr": [0.1, 0.01, None],
                           "opt": ["adam", "sgd", "adam"], "attempts": [1, 2, 1],
                           "state": ["COMPLETED", "FAILED", "PENDING"],
                           "elapsed": pd.to_timedelta([60, 120, None], unit="s"), "cpu_efficiency": [0.5, 0.1, None]})
    spec = sweep_parallel(points)
    assert [a["name"] for a in spec["axes"]] == ["lr", "opt", "elapsed (min)", "CPU eff"]
    assert spec["axes"][1]["labels"] == [[0.0, "adam"], [1.0, "sgd"]]
    assert spec["lines"][1] == {"label": "point 1 (b)", "state": "FAILED", "values": [0.01, 1.0, 2.0, 0.1],
                                "text": ["0.01", "sgd", "2", "0.1"]}
    assert spec["lines"][2]["values"] == [None, 0.0, None, None]


def test_html_needs_no_matplotlib(tmp_path):
    """`pip install .` has no plot extra: --html writes the page all the same."""
    block = "import sys; sys.modules['matplotlib'] = None\nfrom hpcjobs.cli import main\nmain()\n"
    page = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-c", block, "report", "--from-file", str(TESTBED / "sacct.txt"),
                           "--sacct-fields", ",".join(FIELDS), "--html", str(page)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert page.stat().st_mode & 0o777 == 0o644
    data = _embedded(page.read_text())
    assert sum(len(c.get("points", c.get("bins", ()))) for s in data["sections"] for c in s["charts"]) > 10


def test_efficiency_of_the_testbed_feeds_the_page(testbed):
    eff = efficiency(testbed)
    plane = charts.efficiency_plane(eff)
    assert len(plane["points"]) == int(eff.dropna(subset=["cpu_efficiency", "mem_efficiency"]).shape[0])
