"""Benchmark: the history part of ``hpcjobs plan`` on 1,000,000 jobs of accounting history.

Synthetic job rows in the normalised accounting schema (:mod:`hpcjobs.accounting.schema`), spread over
14 days and 8 partitions (GPU counts 0-8, 1-8 nodes, wall times 10 min to 2 days, log-normal waits), are
stored as the finished-day parquet windows ``query_sacct`` caches (the files ``hpcjobs report`` and
``plan`` read instead of asking sacct again). Then, in one process:

1. the first read: :func:`hpcjobs.plan.history.load_history` reads every day's full window through
   ``query_sacct`` and writes its compact wait columns (the first ``plan`` after ``report`` filled the cache);
2. the cached reads: ``load_history`` from the compact day files, plus :func:`similar_wait` for a request on
   every partition: what each further ``hpcjobs plan`` spends on history (median of ``--repeat`` runs).

The current day is asked of a stand-in sacct that returns nothing. Run:
``python benchmarks/bench_plan.py [--rows N] [--repeat R]``. Prints figures only.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from hpcjobs.accounting.cache import WindowCache, window_key
from hpcjobs.accounting.schema import conform
from hpcjobs.accounting.sources.slurm import SACCT_QUERY_FIELDS, sacct_accounting_argv
from hpcjobs.plan.history import load_history, sacct_fetch, similar_wait
from hpcjobs.process import CommandResult

DAYS = 14
PARTITIONS = ["cpu", "long", "gpu-a100", "gpu-v100", "debug", "bigmem", "preempt", "interactive"]


def synthetic(rows: int, first_day: datetime, seed: int = 7) -> pd.DataFrame:
    """``rows`` finished jobs in the accounting schema, started evenly over ``DAYS`` days from ``first_day``."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp(first_day) + pd.to_timedelta(rng.integers(0, DAYS * 86400, rows), unit="s")
    wait = pd.to_timedelta(np.minimum(rng.lognormal(5.0, 2.0, rows), 5 * 86400).astype("int64"), unit="s")
    limit = pd.to_timedelta(rng.choice([600, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 2 * 86400], rows), unit="s")
    elapsed = pd.to_timedelta((limit.total_seconds().to_numpy() * rng.random(rows)).astype("int64"), unit="s")
    df = pd.DataFrame({
        "scheduler": "slurm", "job_id": np.arange(rows).astype(str), "job_id_raw": np.arange(rows).astype(str),
        "partition": rng.choice(PARTITIONS, rows), "state": "COMPLETED",
        "submit_time": start - wait, "eligible_time": start - wait, "start_time": start, "end_time": start + elapsed,
        "wait": wait, "elapsed": elapsed, "time_limit": limit,
        "nodes": rng.choice([1, 1, 1, 1, 2, 4, 8], rows), "cpus": rng.choice([1, 4, 16, 64], rows),
        "gpus": rng.choice([0, 0, 0, 1, 2, 4, 8], rows),
    })
    return conform(df)


def fill_cache(df: pd.DataFrame, cache_dir: Path, first_day: datetime) -> None:
    """Store ``df`` as the finished-day windows ``query_sacct(-X --allusers)`` reads (keys as it computes them)."""
    store = WindowCache(cache_dir / "sacct")
    shape = sacct_accounting_argv(all_users=True, steps=False, fields=SACCT_QUERY_FIELDS)
    for d in range(DAYS):
        ws = first_day + timedelta(days=d)
        we = ws + timedelta(days=1)
        day = df[(df["start_time"] >= pd.Timestamp(ws)) & (df["start_time"] < pd.Timestamp(we))]
        store.store(window_key(shape, ws, we), day.reset_index(drop=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    now = datetime(2026, 12, 4, 9, 0, tzinfo=timezone.utc)
    first_day = datetime(2026, 11, 20, tzinfo=timezone.utc)  # 14 finished days, then today
    t0 = time.perf_counter()
    df = synthetic(args.rows, first_day)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        fill_cache(df, cache, first_day)
        made = time.perf_counter() - t0
        del df

        def no_sacct(argv: list[str], **_: object) -> CommandResult:
            return CommandResult(tuple(argv), 0, "", "", 0.0)

        fetch = sacct_fetch(runner=no_sacct, now=now, cache_dir=cache)
        t = time.perf_counter()
        hist = load_history(DAYS + 1, fetch, now=now, cache_dir=cache)
        first = time.perf_counter() - t
        loads, stats_t, totals = [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            hist = load_history(DAYS + 1, fetch, now=now, cache_dir=cache)
            t1 = time.perf_counter()
            stats = similar_wait(hist, gpus=2, nodes=1, walltime_s=4 * 3600, partitions=PARTITIONS)
            t2 = time.perf_counter()
            loads.append(t1 - t)
            stats_t.append(t2 - t1)
            totals.append(t2 - t)
        print(f"history rows: {len(hist):,} jobs over {DAYS} days ({made:.1f} s to make and store them)")
        print(f"first read (full sacct windows -> compact day files): {first:.3f} s")
        print(f"cached read, median of {args.repeat}: load {statistics.median(loads):.3f} s, "
              f"similar_wait over {len(PARTITIONS)} partitions {statistics.median(stats_t):.3f} s, "
              f"total {statistics.median(totals):.3f} s (min {min(totals):.3f}, max {max(totals):.3f})")
        print(f"ratio first/cached: {first / statistics.median(totals):.1f}x")
        name, one = next(iter(stats.items()))
        print(f"e.g. {name}: {one.jobs} similar jobs, p50 {one.p50_s:.0f} s, p90 {one.p90_s:.0f} s")


if __name__ == "__main__":
    main()
