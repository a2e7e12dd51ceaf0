"""A local sweep is measured: the runner records each point's start, end, exit, CPU time and peak memory.

Real local-site sweeps; the points allocate and touch a known amount of memory and keep a CPU busy,
and :func:`hpcjobs.load_sweep` must show what a Slurm sweep shows from ``sacct``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import hpcjobs
from hpcjobs.accounting.sources.local import local_usage_rows
from hpcjobs.sweep.api import resubmit_sweep, run_sweep
from hpcjobs.sweep.local_procs import LocalFiles

BURN = """\
import os, sys, time
b = bytearray(int(sys.argv[1]) << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
t = time.process_time()
while time.process_time() - t < 0.5:
    pass
marker = "tried-" + os.environ["HPCJOBS_POINT_ID"]
if sys.argv[1] == "150" and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(5)
"""


@pytest.fixture
def measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "burn.py").write_text(BURN)
    exp = tmp_path / "use.yaml"
    exp.write_text("name: use\ncommand: python3 burn.py \"$mb\"\n"
                   "resources: {cpus_per_task: 2, memory: 1G, walltime: 10m}\nsweep:\n  grid: {mb: [20, 150]}\n")
    root = tmp_path / "sweeps"
    run_sweep(exp, site="local", root=root)
    return root


def test_load_sweep_has_elapsed_cpu_and_memory_of_local_points(measured: Path) -> None:
    frame = hpcjobs.load_sweep("use", root=measured)
    by_mb = {int(r["mb"]): r for _, r in frame.iterrows()}
    assert by_mb[20]["state"] == "COMPLETED" and by_mb[150]["state"] == "FAILED" and by_mb[150]["exit_code"] == 5
    for mb, row in by_mb.items():
        assert row["elapsed"].total_seconds() >= 0.5  # half a second of CPU at least
        assert row["start_time"] < row["end_time"] and row["node_list"]
        assert row["max_rss_bytes"] >= mb << 20  # the touched bytearray is resident
        assert row["mem_efficiency"] == pytest.approx(row["max_rss_bytes"] / (1 << 30), rel=0.01)
        assert 0 < row["cpu_efficiency"] <= 0.55  # 2 CPUs asked, one used at most
        assert 0 < row["time_efficiency"] < 0.1  # seconds of 10 minutes
    assert str(frame["elapsed"].dtype) == "timedelta64[ns]" and str(frame["cpu_efficiency"].dtype) == "Float64"


def test_a_resubmitted_local_point_shows_its_last_attempt(measured: Path) -> None:
    first = hpcjobs.load_sweep("use", root=measured)
    _prepared, _report, reset = resubmit_sweep("use", root=measured)
    assert reset == 1
    again = hpcjobs.load_sweep("use", root=measured)
    row = again[again["mb"] == 150].iloc[0]
    assert row["state"] == "COMPLETED" and row["attempt"] == 2
    assert row["end_time"] > first[first["mb"] == 150].iloc[0]["end_time"]


def test_records_that_cannot_be_trusted_are_left_out(measured: Path, tmp_path: Path) -> None:
    (folder,) = measured.iterdir()
    files = LocalFiles(folder)
    good = files.usages()
    assert len(good) == 2
    local = folder / "local"
    target = tmp_path / "forged.json"
    target.write_text(json.dumps({**good[0], "job_id": "forged"}))
    (local / "x.0.usage.json").symlink_to(target)
    (local / "x.1.usage.json").write_text("{" * 5000)
    (local / "x.2.usage.json").write_text(json.dumps({**good[0], "job_id": "backwards", "end": 1.0, "start": 2.0}))
    (local / "x.3.usage.json").write_text(json.dumps({**good[0], "job_id": "odd", "cpus": "many", "state": "NOPE",
                                                      "max_rss_bytes": True}))
    os.mkfifo(local / "x.4.usage.json")
    rows = local_usage_rows(files.usages())
    assert "forged" not in set(rows["job_id"]) and "backwards" not in set(rows["job_id"])
    odd = rows[rows["job_id"] == "odd"].iloc[0]
    assert pd.isna(odd["cpus"]) and pd.isna(odd["state"]) and pd.isna(odd["max_rss_bytes"])  # not a guess


def test_the_sweep_page_links_each_points_logs_and_draws_its_points(measured: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from hpcjobs.cli import main

    monkeypatch.setenv("HPCJOBS_SWEEP_ROOT", str(measured))
    page = tmp_path / "sweep.html"
    result = CliRunner().invoke(main, ["report", "--sweep", "use", "--html", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    data = json.loads(text.split('id="hpcjobs-data">', 1)[1].split("</script>", 1)[0])
    assert "<title>hpcjobs sweep report: use-" in text
    failures = next(s for s in data["sections"] if s["key"] == "failures")
    charts = {c["name"]: c for c in failures["charts"]}
    assert charts["sweep_parallel"]["axes"][0]["name"] == "mb"
    assert sorted(line["state"] for line in charts["sweep_parallel"]["lines"]) == ["COMPLETED", "FAILED"]
    points = next(t for t in failures["tables"] if t["name"] == "sweep_points")
    folder = next(measured.iterdir())
    for row, links in zip(points["rows"], points["links"], strict=True):
        point = row[0]
        assert links[-2:] == [(folder / "points" / point / "stdout.log").resolve().as_uri(),
                              (folder / "points" / point / "stderr.log").resolve().as_uri()]


def test_the_sweep_page_puts_the_result_metrics_beside_the_parameters(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from hpcjobs.cli import main

    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "fit.yaml"
    exp.write_text("name: fit\nresults: {file: metrics.json}\nsweep:\n  grid: {lr: [0.1, 0.5]}\n"
                   "command: |\n  printf '{\"loss\": %s, \"note\": \"x\"}' \"$lr\""
                   " > \"$HPCJOBS_RUN_DIR/metrics.json\"\n")
    root = tmp_path / "sweeps"
    run_sweep(exp, site="local", root=root)
    monkeypatch.setenv("HPCJOBS_SWEEP_ROOT", str(root))
    page = tmp_path / "fit.html"
    result = CliRunner().invoke(main, ["report", "--sweep", "fit", "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = json.loads(page.read_text().split('id="hpcjobs-data">', 1)[1].split("</script>", 1)[0])
    failures = next(s for s in data["sections"] if s["key"] == "failures")
    parallel = next(c for c in failures["charts"] if c["name"] == "sweep_parallel")
    assert [a["name"] for a in parallel["axes"]][:2] == ["lr", "loss"]  # the text metric "note" is no axis
    by_lr = {line["text"][0]: line["text"][1] for line in parallel["lines"]}
    assert by_lr == {"0.1": "0.1", "0.5": "0.5"}
    points = next(t for t in failures["tables"] if t["name"] == "sweep_points")
    assert [c["name"] for c in points["columns"]][2:4] == ["lr", "loss"]
