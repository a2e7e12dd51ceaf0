"""Reading the results of a 10,000-point sweep (one small ``metrics.json`` each): cold, warm, one changed.

Builds a sweep folder with ``points/<id>/metrics.json`` under a temporary directory and times
:func:`hpcjobs.sweep.results.results_frame`: a cold read (no cache: every file opened and parsed),
warm reads (the cache: one ``stat`` per file, nothing opened), and a read after 100 files changed.
Run: ``python benchmarks/bench_sweep_results.py [--points 10000] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from hpcjobs.config.results import ResultSource
from hpcjobs.sweep.results import RESULTS_CACHE_FILE, results_frame


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sources = [ResultSource(file="metrics.json")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ids = [f"{i:012x}" for i in range(args.points)]
        for i, pid in enumerate(ids):
            run = folder / "points" / pid
            run.mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps({"acc": i / args.points, "loss": 1 - i / args.points,
                                                          "epoch": i % 50, "val": {"f1": 0.5}}))
        cold = []
        for _ in range(args.runs):
            (folder / RESULTS_CACHE_FILE).unlink(missing_ok=True)
            cold.append(_timed(lambda: results_frame(folder, ids, sources=sources)))
        warm = [_timed(lambda: results_frame(folder, ids, sources=sources)) for _ in range(args.runs)]
        for pid in ids[:100]:
            (folder / "points" / pid / "metrics.json").write_text(json.dumps({"acc": 2.0, "loss": 0.0}))
        changed = _timed(lambda: results_frame(folder, ids, sources=sources))
        no_cache = [_timed(lambda: results_frame(folder, ids, sources=sources, cache=False)) for _ in range(args.runs)]
        frame = results_frame(folder, ids, sources=sources)
        assert frame["acc"].notna().all() and (frame["acc"] == 2.0).sum() == 100
        size = (folder / RESULTS_CACHE_FILE).stat().st_size
    print(f"{args.points} points, {len(frame.columns)} columns, cache {size / 1e6:.2f} MB")
    print(f"cold (no cache file, writes it): median {statistics.median(cold):.3f} s  min {min(cold):.3f} s")
    print(f"warm (cache, nothing changed):   median {statistics.median(warm):.3f} s  min {min(warm):.3f} s")
    print(f"warm, 100 files changed:         {changed:.3f} s")
    print(f"cache=False (every file read):   median {statistics.median(no_cache):.3f} s")


if __name__ == "__main__":
    main()
