"""Benchmark: the interactive HTML report of 1,000,000 sacct rows: its weight, how long it takes to
write, and how long headless Chromium takes to open it.

Goals: the page under ~5 MB, open in Chromium (navigation to the page drawn: every table and chart)
in under 2 s.

The rows are ``bench_sacct_ingest.generate``'s. ``hpcjobs report --from-file F --html P`` runs in a
fresh interpreter (wall seen from outside); then Debian's chromium, driven over the DevTools
protocol (``tests/browser/cdp.py``), opens the page ``--repeat`` times in one browser: the time to
the load event and the page's own drawing time (``window.hpcjobsReport.renderMs``, measured from its
script's first line) are printed, with the median. Also printed: the page's weight by part (inline
CSS and JS, the JSON of what it shows) and the number of table rows and chart marks it holds.

Run: ``python benchmarks/bench_report_page.py [--rows N] [--repeat R] [--keep FILE] [--page FILE]``.
Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_sacct_ingest import generate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from cdp import Browser, chromium_path  # noqa: E402


def _parts(text: str) -> dict[str, int]:
    """Bytes of the page's inline CSS, its script, and its JSON."""
    sizes = {"css": 0, "js": 0, "json": 0}
    for m in re.finditer(r"<style>(.*?)</style>", text, re.S):
        sizes["css"] += len(m.group(1).encode())
    for m in re.finditer(r"<script( type=\"application/json\" id=\"hpcjobs-data\")?>(.*?)</script>", text, re.S):
        sizes["json" if m.group(1) else "js"] += len(m.group(2).encode())
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", metavar="FILE", help="keep the generated sacct text in FILE; reuse it if it exists")
    ap.add_argument("--page", metavar="FILE", help="write the page to FILE (default: a temporary file)")
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit("chromium is not installed (apt-get install --no-install-recommends chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(args.keep or os.path.join(tmp, "sacct.txt"))
        if not source.exists():
            t = time.perf_counter()
            source.write_text(generate(args.rows))
            print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s")
        page = Path(args.page or os.path.join(tmp, "report.html"))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hpcjobs", "report", "--from-file", str(source), "--html", str(page)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        write_s = time.perf_counter() - t
        text = page.read_text(encoding="utf-8")
        data = json.loads(re.search(r'id="hpcjobs-data">(.*?)</script>', text, re.S).group(1))
        rows = sum(len(t["rows"]) for s in data["sections"] for t in s["tables"])
        charts = [c for s in data["sections"] for c in s["charts"]]
        size = page.stat().st_size
        parts = _parts(text)
        print(f"report --html of {args.rows:,} rows: {write_s:.2f} s wall (fresh interpreter)")
        print(f"page: {size / 1e6:.3f} MB (css {parts['css'] / 1e3:.1f} kB, js {parts['js'] / 1e3:.1f} kB, "
              f"json {parts['json'] / 1e6:.3f} MB); {rows:,} table rows, {len(charts)} charts "
              f"({', '.join(sorted({c['kind'] for c in charts}))})")
        loads, draws = [], []
        with Browser(width=1280, height=900) as browser:
            for _ in range(args.repeat):
                loads.append(browser.open(page))
                draws.append(float(browser.js("window.hpcjobsReport.renderMs")) / 1000)
            errors = [c for c in browser.console if c.get("type") in ("error", "assert")] + browser.exceptions
            outside = [u for u in browser.requests if u != page.resolve().as_uri()]
        print("chromium open (navigation to load event, s): " + " ".join(f"{v:.3f}" for v in loads)
              + f"; median {statistics.median(loads):.3f}")
        print("page drawing its tables and charts (s): " + " ".join(f"{v:.3f}" for v in draws)
              + f"; median {statistics.median(draws):.3f}")
        print(f"console errors: {len(errors)}; requests other than the page: {len(outside)}")


if __name__ == "__main__":
    main()
