"""The interactive report in a real browser: Debian's headless Chromium over the DevTools protocol.

Each test opens the page hpcjobs wrote for real accounting data (the Slurm testbed's sacct output and
an OpenPBS accounting log), uses it with real mouse and keyboard events, and checks what a person
would see: sorted and filtered rows, every row reachable by paging, a zoomed time series, hover text
naming the job, no console error and no request but the page itself. Under ``CI=true`` a machine
without chromium fails them; elsewhere they skip.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from hpcjobs.accounting.reports.page import write_page
from hpcjobs.accounting.sources.pbs import read_pbs_accounting
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from tests.browser.cdp import Browser, chromium_path

DATA = Path(__file__).resolve().parent.parent / "data"
TESTBED = DATA / "slurm" / "testbed"
FIELDS = (TESTBED / "sacct_header_X.txt").read_text().splitlines()[0].split("|")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    slurm = read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)
    pbs = read_pbs_accounting(DATA / "pbs" / "constructed_accounting_20221014", tz="Europe/Berlin")
    both = pd.concat([slurm, pbs], ignore_index=True)
    return write_page(tmp_path_factory.mktemp("page") / "report.html", both, subtitle="testbed sacct + PBS log")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if chromium_path() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install --no-install-recommends chromium)")
        pytest.skip("chromium is not installed: apt-get install --no-install-recommends chromium")
    with Browser(width=1280, height=900) as b:
        yield b


def _open(browser: Browser, page: Path) -> None:
    browser.console.clear()
    browser.exceptions.clear()
    browser.requests.clear()
    browser.open(page)
    assert browser.js("document.documentElement.dataset.ready") == "1"


def _centre(browser: Browser, selector: str) -> tuple[float, float]:
    box = browser.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                     "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                     "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    assert box is not None, selector
    return float(box[0]), float(box[1])


def _click(browser: Browser, selector: str) -> None:
    x, y = _centre(browser, selector)
    browser.mouse("mousePressed", x, y, clicks=1)
    browser.mouse("mouseReleased", x, y, clicks=1)


def _column(browser: Browser, table: str, column: str) -> list[str]:
    return browser.js(f"(() => {{ const t = document.querySelector('table[data-table={table}]');"
                      f"const i = [...t.querySelectorAll('th')].findIndex(h => h.dataset.col === '{column}');"
                      "return [...t.querySelectorAll('tbody tr')].map(r => r.children[i].textContent); })()")


def _spec(browser: Browser, table: str) -> dict:
    data = json.loads(browser.js("document.getElementById('hpcjobs-data').textContent"))
    return next(t for s in data["sections"] for t in s["tables"] if t["name"] == table)


def test_the_page_opens_with_no_error_and_no_request_and_is_screenshotted(browser, page, tmp_path):
    _open(browser, page)
    errors = [c for c in browser.console if c.get("type") in ("error", "assert", "warning")]
    assert errors == [] and browser.exceptions == []
    assert browser.requests == [page.resolve().as_uri()]
    charts = browser.js("[...document.querySelectorAll('svg[data-chart]')].map(s => s.dataset.chart)")
    assert {"efficiency_plane", "busy_cores_over_time", "wait_over_time", "jobs_by_state"} <= set(charts)
    assert browser.js("document.querySelectorAll('table[data-table]').length") >= 10
    shot = browser.screenshot(tmp_path / "report.png")  # the whole page
    assert shot.stat().st_size > 20_000
    top = browser.screenshot(tmp_path / "report-top.png", full_page=False)  # what the window shows first
    artefacts = os.environ.get("HPCJOBS_TEST_ARTEFACTS")
    if artefacts:
        shutil.copy(shot, Path(artefacts) / "report-page.png")
    keep = os.environ.get("HPCJOBS_KEEP_SCREENSHOT")  # the manual's picture (docs/images/report-page.png)
    if keep:
        shutil.copy(top, keep)


def test_a_click_on_a_heading_sorts_its_column_both_ways(browser, page):
    _open(browser, page)
    spec = _spec(browser, "worst_cpu_waste")
    col = [c["name"] for c in spec["columns"]].index("elapsed")
    pairs = [(k[col], r[col]) for k, r in zip(spec["keys"], spec["rows"], strict=True)]
    _click(browser, "table[data-table=worst_cpu_waste] th[data-col=elapsed]")
    shown = _column(browser, "worst_cpu_waste", "elapsed")
    desc = [t or "–" for _, t in sorted(pairs, key=lambda p: (p[0] is None, -(p[0] or 0)))]
    assert shown == desc[:len(shown)] and len(set(shown)) > 1
    _click(browser, "table[data-table=worst_cpu_waste] th[data-col=elapsed]")
    asc = [t or "–" for _, t in sorted(pairs, key=lambda p: (p[0] is None, p[0] or 0))]
    assert _column(browser, "worst_cpu_waste", "elapsed") == asc[:len(shown)]
    assert browser.js("document.querySelector('table[data-table=worst_cpu_waste] th[data-col=elapsed]')"
                      ".getAttribute('aria-sort')") == "ascending"


def test_typing_a_user_filters_the_rows(browser, page):
    _open(browser, page)
    total = len(_spec(browser, "waste_by_user")["rows"])
    assert total >= 4
    _click(browser, "table[data-table=waste_by_user]")  # scroll there
    browser.js("document.querySelector('table[data-table=waste_by_user]').closest('.tablebox')"
               ".querySelector('input[type=search]').focus()")
    browser.type_text("carol")
    assert _column(browser, "waste_by_user", "user") == ["carol"]
    count = browser.js("document.querySelector('table[data-table=waste_by_user]').closest('.tablebox')"
                       ".querySelector('.count').textContent")
    assert count == f"1 of {total} rows"


def test_every_row_is_reachable_by_paging(browser, page):
    _open(browser, page)
    box = "document.querySelector('table[data-table=failures_by_exit]').closest('.tablebox')"
    browser.js(f"(() => {{ const s = {box}.querySelector('.pager select'); s.value = '10';"
               "s.dispatchEvent(new Event('change')); })()")
    rows = _spec(browser, "failures_by_exit")["rows"]
    seen: list[list[str]] = []
    for _ in range(20):
        seen += browser.js(f"[...{box}.querySelectorAll('tbody tr')].map(r => [...r.children].map(c => c.textContent))")
        if browser.js(f"{box}.querySelectorAll('.pager button')[1].disabled"):
            break
        _click(browser, ".tablebox:has(table[data-table=failures_by_exit]) .pager button:nth-of-type(2)")
    assert seen == [[c or "–" for c in r] for r in rows]


def test_dragging_across_a_time_series_zooms_in_and_reset_zooms_out(browser, page):
    _open(browser, page)
    holder = "document.querySelector('svg[data-chart=busy_cores_over_time]').parentNode"
    full = [float(v) for v in browser.js(f"{holder}.dataset.view").split(",")]
    _centre(browser, "svg[data-chart=busy_cores_over_time]")
    left, top, width, height = browser.js(
        "(() => { const r = document.querySelector('svg[data-chart=busy_cores_over_time] .hit')"
        ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    y = top + height / 2
    browser.mouse("mousePressed", left + 0.25 * width, y, clicks=1)
    for f in (0.3, 0.4, 0.5, 0.6):
        browser.mouse("mouseMoved", left + f * width, y, clicks=1)
    browser.mouse("mouseReleased", left + 0.6 * width, y, clicks=1)
    zoomed = [float(v) for v in browser.js(f"{holder}.dataset.view").split(",")]
    span = full[1] - full[0]
    assert zoomed[0] == pytest.approx(full[0] + 0.25 * span, rel=0, abs=0.02 * span)
    assert zoomed[1] == pytest.approx(full[0] + 0.6 * span, rel=0, abs=0.02 * span)
    _click(browser, "button[data-reset=busy_cores_over_time]")
    assert [float(v) for v in browser.js(f"{holder}.dataset.view").split(",")] == full


def test_hovering_a_job_names_it(browser, page):
    _open(browser, page)
    x, y = _centre(browser, "svg[data-chart=efficiency_plane] circle")
    browser.mouse("mouseMoved", x, y)
    tip = browser.js("(() => { const t = document.querySelector('.tip');"
                     "return [getComputedStyle(t).display, t.textContent]; })()")
    assert tip[0] == "block" and tip[1].startswith("job ") and "state:" in tip[1]


def test_hostile_values_stay_text(browser, tmp_path):
    slurm = read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)
    evil = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    slurm["user"] = pd.array([evil] * len(slurm), dtype="string")
    slurm["job_name"] = pd.array(["<!--"] * len(slurm), dtype="string")
    path = write_page(tmp_path / "evil.html", slurm, title=evil, subtitle=evil)
    _open(browser, path)
    assert browser.js("window.__pwned === undefined")
    assert browser.js("document.title") == evil
    assert evil in _column(browser, "waste_by_user", "user")
    assert browser.requests == [path.resolve().as_uri()] and browser.exceptions == []


def test_a_narrow_window_scrolls_tables_not_the_page(page):
    if chromium_path() is None:
        pytest.skip("chromium is not installed")
    with Browser(width=420, height=800) as narrow:
        _open(narrow, page)
        widths = narrow.js("[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
                           "Math.max(...[...document.querySelectorAll('svg[data-chart]')]"
                           ".map(s => s.getBoundingClientRect().right))]")
        assert widths[0] <= widths[1] + 1 and widths[2] <= widths[1] + 1
