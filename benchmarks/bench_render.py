"""Rendering throughput: 10,000 scripts in one process (goal: at most 1 s on the project's machine).

Loads and resolves one experiment per site, then renders it 10,000 times with a
different parameter value each time (what a sweep's per-point rendering costs).
Run: ``python benchmarks/bench_render.py [--count 10000]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

from hpcjobs.config.loading import load_experiment
from hpcjobs.config.sites import load_site
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="repeat and report the best and median round")
    args = parser.parse_args()
    exp, doc = load_experiment(ROOT / "examples" / "train-gpu.yaml", ["account=abc123"])
    for site_name in ("jean-zay", "derecho", "local"):
        site = load_site(site_name)
        job = resolve(exp, site, doc=doc)
        render_job(job)  # compile the templates once
        jobs = [dataclasses.replace(job, params={"lr": str(i)}) for i in range(args.count)]
        rounds = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            total = 0
            for j in jobs:
                total += len(render_job(j).text)
            rounds.append(time.perf_counter() - start)
        best, med = min(rounds), statistics.median(rounds)
        print(f"{site_name:<9} {args.count} scripts: best {best:.3f} s, median {med:.3f} s of {args.rounds} rounds "
              f"({best / args.count * 1e6:.0f} us/script, {total / 1e6:.1f} MB) (goal <= 1 s)")


if __name__ == "__main__":
    main()
