"""Figures (matplotlib, Agg) and the self-contained HTML report, rendered in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from hpcjobs import accounting as reports
from hpcjobs.accounting.reports import html as rhtml
from hpcjobs.accounting.reports import plots
from hpcjobs.accounting.sources.pbs import read_pbs_accounting
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


def test_html_is_self_contained_and_escaped(testbed):
    nasty = pd.DataFrame({"user": ["<script>alert(1)</script>"], "wait": [pd.Timedelta(seconds=3725)],
                          "cpu_efficiency": [0.256], "max_rss_bytes": [pd.array([2**31], dtype="Int64")[0]]})
    page = rhtml.render_html("T <&>", {"waste_by_user": nasty}, plots.report_figures(testbed, "failures"),
                             summary={"jobs": "22"})
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>T &lt;&amp;&gt;</title>" in page
    assert "01:02:05" in page and "25.6%" in page and "2.00 GiB" in page
    assert re.search(r'src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', page)
    assert not re.search(r'(src|href)="(https?:)?//', page) and "@import" not in page and "url(" not in page


def test_format_cell():
    assert rhtml.format_cell(pd.NA) == "–" and rhtml.format_cell(None) == "–"
    assert rhtml.format_cell(pd.Timedelta(days=1, hours=2, seconds=3)) == "1d 02:00:03"
    assert rhtml.format_cell(0.5, "mem_efficiency") == "50.0%"
    assert rhtml.format_cell(12345.6, "core_hours") == "12,346"


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_renders_in_headless_chromium(testbed, tmp_path):
    """Render the report in Debian's chromium and check the screenshot (CI must have `chromium`)."""
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install --no-install-recommends chromium)")
        pytest.skip("chromium not installed: apt-get install --no-install-recommends chromium")
    pbs = read_pbs_accounting(DATA / "pbs" / "constructed_accounting_20221014", tz="Europe/Berlin")
    both = pd.concat([testbed, pbs], ignore_index=True)
    page = rhtml.write_html_report(tmp_path / "report.html", both, subtitle="testbed sacct.txt + PBS log")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,1600",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    from matplotlib.image import imread

    img = imread(str(shot))
    assert img.shape[:2] == (1600, 1200)
    rgb = (img[..., :3] * 255).round().astype(int)
    # the header band is the accent colour #1f5f8b
    assert tuple(rgb[30, 600]) == (0x1F, 0x5F, 0x8B)
    # the page below it is the light background, with the cards and a figure drawn on it
    assert tuple(rgb[1590, 5]) in {(0xF6, 0xF8, 0xFA), (0xFF, 0xFF, 0xFF)}
    colours = {tuple(c) for c in rgb[::8, ::8].reshape(-1, 3)}
    assert len(colours) > 50, "screenshot looks blank"
    # the histogram bars (#1f5f8b) appear below the header too
    body = rgb[200:]
    assert ((body[..., 0] == 0x1F) & (body[..., 1] == 0x5F) & (body[..., 2] == 0x8B)).sum() > 500
    keep = os.environ.get("HPCJOBS_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
