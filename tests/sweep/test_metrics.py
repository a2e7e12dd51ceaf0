"""``hpcjobs metrics``: OpenMetrics text that Prometheus' own parser reads, written for node_exporter, or served.

The sweeps are real local-site sweeps (the ``local`` scheduler runs them here); the text is parsed with
``prometheus_client``'s strict OpenMetrics parser, which refuses a missing ``# EOF``, a unit not in the
name, a counter sample without ``_total`` and a badly escaped label.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from hpcjobs.sweep.api import run_sweep
from hpcjobs.sweep.metrics import Family, exposition, sweep_metrics

ROOT = Path(__file__).resolve().parents[2]


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture
def two_sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the local runner writes the jobs' logs under the submit folder
    root = tmp_path / "sweeps"
    for name, xs in (("good", [1, 2, 3]), ("half", [0, 1])):
        exp = tmp_path / f"{name}.yaml"
        exp.write_text(f"name: {name}\ncommand: test \"$x\" -ne 0\nsweep:\n  grid:\n    x: {xs}\n")
        run_sweep(exp, site="local", root=root)
    return root


def test_counts_submissions_and_times_of_every_sweep(two_sweeps: Path) -> None:
    fams = _families(sweep_metrics(two_sweeps))
    points = {(s.labels["sweep"].rsplit("-", 1)[0], s.labels["state"]): s.value
              for s in fams["hpcjobs_sweep_points"].samples}
    assert points == {("good", "COMPLETED"): 3, ("half", "COMPLETED"): 1, ("half", "FAILED"): 1}
    planned = {s.labels["sweep"].rsplit("-", 1)[0]: s.value for s in fams["hpcjobs_sweep_points_planned"].samples}
    assert planned == {"good": 3, "half": 2}
    subs = [s for s in fams["hpcjobs_sweep_submissions"].samples if s.labels["state"] == "submitted"]
    assert {s.name for s in subs} == {"hpcjobs_sweep_submissions_total"} and all(s.value >= 1 for s in subs)
    created = fams["hpcjobs_sweep_created_timestamp_seconds"]
    assert created.unit == "seconds" and all(time.time() - 600 < s.value <= time.time() for s in created.samples)
    assert "hpcjobs_poll_duration_seconds" not in fams


def test_named_sweeps_only_and_an_unknown_one_refused(two_sweeps: Path) -> None:
    fams = _families(sweep_metrics(two_sweeps, ["good"]))
    assert {s.labels["sweep"].rsplit("-", 1)[0] for s in fams["hpcjobs_sweep_points"].samples} == {"good"}
    from hpcjobs.errors import ConfigError

    with pytest.raises(ConfigError, match="no sweep 'nope'"):
        sweep_metrics(two_sweeps, ["nope"])
    with pytest.raises(ConfigError):
        sweep_metrics(two_sweeps, [""])  # an empty id would match every sweep


def test_resubmissions_are_counted(two_sweeps: Path) -> None:
    from hpcjobs.sweep.api import resubmit_sweep

    resubmit_sweep("half", root=two_sweeps)  # the failed point runs (and fails) again
    fams = _families(sweep_metrics(two_sweeps))
    got = {s.labels["sweep"].rsplit("-", 1)[0]: s.value for s in fams["hpcjobs_sweep_point_resubmissions"].samples}
    assert got == {"good": 0, "half": 1}
    assert {s.name for s in fams["hpcjobs_sweep_point_resubmissions"].samples} == {
        "hpcjobs_sweep_point_resubmissions_total"}


def test_efficiency_histograms_parse_and_count_every_finished_point(two_sweeps: Path) -> None:
    values = {"cpu_efficiency": [0.05, 0.5, 0.95, 1.7], "mem_efficiency": [0.2], "time_efficiency": []}
    fams = _families(sweep_metrics(two_sweeps, ["good"], efficiency=lambda folder: values))
    cpu = fams["hpcjobs_sweep_point_cpu_efficiency_ratio"]
    assert cpu.type == "histogram" and cpu.unit == "ratio"
    buckets = {s.labels["le"]: s.value for s in cpu.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.1": 1, "0.25": 1, "0.5": 2, "0.75": 2, "0.9": 2, "1.0": 3, "+Inf": 4}
    (count,) = [s.value for s in cpu.samples if s.name.endswith("_count")]
    (total,) = [s.value for s in cpu.samples if s.name.endswith("_sum")]
    assert count == 4 and total == pytest.approx(3.2)
    walltime = fams["hpcjobs_sweep_point_walltime_efficiency_ratio"]
    assert [s.value for s in walltime.samples if s.name.endswith("_count")] == [0]
    assert "hpcjobs_sweep_point_cpu_efficiency_ratio" not in _families(sweep_metrics(two_sweeps))


def test_polling_is_timed(two_sweeps: Path) -> None:
    fams = _families(sweep_metrics(two_sweeps, poll=True))
    (duration,) = fams["hpcjobs_poll_duration_seconds"].samples
    assert 0 <= duration.value < 60
    (calls,) = fams["hpcjobs_poll_scheduler_calls"].samples
    assert calls.value == 0  # local sweeps are not polled: their ledger is the whole truth


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=60), number=st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_any_label_value_and_number_survive_the_parser(value: str, number: float) -> None:
    text = exposition([Family("hpcjobs_test", "gauge", "h\\elp \"quoted\"\nline", samples=[({"v": value}, number)])])
    (fam,) = text_string_to_metric_families(text)
    (sample,) = fam.samples
    assert sample.labels == {"v": value} and sample.value == pytest.approx(number, rel=1e-15, abs=0)


def test_the_textfile_is_replaced_atomically_and_must_be_a_prom_file(two_sweeps: Path, tmp_path: Path) -> None:
    from helpers import run_hpcjobs

    out = tmp_path / "collector" / "hpcjobs.prom"
    done = run_hpcjobs("metrics", "--root", str(two_sweeps), "--textfile", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _families(out.read_text())["hpcjobs_sweep_points"].samples
    assert sorted(p.name for p in out.parent.iterdir()) == ["hpcjobs.prom"]  # no temporary file left
    bad = run_hpcjobs("metrics", "--root", str(two_sweeps), "--textfile", str(tmp_path / "m.txt"), cwd=tmp_path)
    assert bad.returncode == 2 and ".prom" in bad.stderr
    fifo = tmp_path / "fifo.prom"
    os.mkfifo(fifo)
    blocked = run_hpcjobs("metrics", "--root", str(two_sweeps), "--textfile", str(fifo), cwd=tmp_path, timeout=30)
    assert blocked.returncode == 2, blocked.stderr


def test_listen_serves_a_fresh_reading_per_scrape(two_sweeps: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "hpcjobs", "metrics", "--root", str(two_sweeps), "--listen",
                             "127.0.0.1:0"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        assert line.startswith("serving http://127.0.0.1:"), line
        url = line.split()[1]
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
            first = resp.read().decode()
        assert len(_families(first)["hpcjobs_sweep_points"].samples) == 3
        exp = tmp_path / "third.yaml"
        exp.write_text("name: third\ncommand: 'true'\nsweep:\n  grid:\n    x: [1]\n")
        run_sweep(exp, site="local", root=two_sweeps)
        with urllib.request.urlopen(url, timeout=30) as resp:
            second = resp.read().decode()
        assert len(_families(second)["hpcjobs_sweep_points"].samples) == 4
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_local_points_have_efficiency_from_the_runners_own_measures(two_sweeps: Path) -> None:
    from hpcjobs.analysis import point_efficiencies

    fams = _families(sweep_metrics(two_sweeps, ["good"], efficiency=point_efficiencies))
    cpu = fams["hpcjobs_sweep_point_cpu_efficiency_ratio"]
    assert [s.value for s in cpu.samples if s.name.endswith("_count")] == [3]  # every point was measured
