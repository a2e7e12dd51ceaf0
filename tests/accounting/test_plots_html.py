"""Figures (matplotlib, Agg) for --plot, and how cells read (the page: test_report_page.py, tests/browser)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from hpcjobs import accounting as reports
from hpcjobs.accounting.reports import html as rhtml
from hpcjobs.accounting.reports import plots
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2

DATA = Path(__file__).resolve().parent.parent / "data"
TESTBED = DATA / "slurm" / "testbed"
FIELDS = (TESTBED / "sacct_header_X.txt").read_text().splitlines()[0].split("|")


@pytest.fixture(scope="module")
def testbed() -> pd.DataFrame:
    return read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)


def test_report_figures_and_saving(testbed, tmp_path):
    figs = plots.report_figures(testbed)
    assert list(figs) == ["efficiency_histograms", "efficiency_scatter", "wait_by_partition", "failures_by_state"]
    hist = figs["efficiency_histograms"]
    assert [ax.get_title() for ax in hist.axes] == ["CPU efficiency", "memory efficiency", "time used / limit"]
    bars = figs["failures_by_state"].axes[0].patches
    assert sorted(int(b.get_width()) for b in bars) == [1, 2, 2, 17]  # TIMEOUT, CANCELLED, FAILED, COMPLETED
    png = plots.save_figure(figs["wait_by_partition"], tmp_path / "w.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plots.save_figure(figs["wait_by_partition"], tmp_path / "sub" / "w.svg")
    assert "<svg" in svg.read_text()[:500]
    with pytest.raises(ValueError):
        plots.save_figure(figs["wait_by_partition"], tmp_path / "w.pdf")
    assert len(figs["wait_by_partition"].axes[0].get_xticklabels()) == 2  # debug and gpu


def test_figures_of_empty_data(testbed):
    empty = testbed.iloc[0:0]
    for fig in plots.report_figures(empty).values():
        assert plots.figure_bytes(fig)[:4] == b"\x89PNG"


def test_sweep_outcome_plot(testbed):
    points = pd.DataFrame({"point_id": list("abc"), "index": [0, 1, 2], "lr": [0.1, 0.1, 0.01],
                           "job_id": ["4", "5", "6"]})
    frame = reports.sweep_frame(points, testbed)
    fig = plots.plot_sweep_outcome(frame, "lr")
    ax = fig.axes[0]
    bars = sorted((round(p.get_x(), 2), p.get_y(), p.get_height()) for p in ax.patches if p.get_height() > 0)
    assert bars == [(-0.4, 0.0, 1.0), (0.6, 0.0, 1.0), (0.6, 1.0, 1.0)]  # 0.01: TIMEOUT; 0.1: COMPLETED + FAILED
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.1"]


def test_format_cell():
    assert rhtml.format_cell(pd.NA) == "–" and rhtml.format_cell(None) == "–"
    assert rhtml.format_cell(pd.Timedelta(days=1, hours=2, seconds=3)) == "1d 02:00:03"
    assert rhtml.format_cell(0.5, "mem_efficiency") == "50.0%"
    assert rhtml.format_cell(12345.6, "core_hours") == "12,346"
