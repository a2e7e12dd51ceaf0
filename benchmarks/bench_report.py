"""Benchmark: the whole ``hpcjobs report --from-file`` on 1,000,000 sacct rows vs the ingest alone.

Goal: the report (read, filters, every table of every section, JSON out) in at most 3 s wall and at most 1.5x
the peak memory of the ingest alone (``read_sacct_parsable2`` of the same file, as
``bench_sacct_ingest.py`` times it).

The rows are ``bench_sacct_ingest.generate``'s (the realistic mix of job rows, steps, array tasks,
het components, pending ranges, every final state). Each measured command runs in a fresh
interpreter, ingest and report alternated so that load changes hit both alike; wall time is seen
from outside (interpreter start and imports included), CPU time is the child's user + system time,
and peak memory is the child's own ``VmHWM`` read from ``/proc/self/status`` as it finishes. The
report's in-process phases (read, filters, tables, JSON) are printed once for where the time goes.

Run: ``python benchmarks/bench_report.py [--rows N] [--repeat R] [--keep FILE]``. Prints figures only. The
peak of one process varies by some 100 MiB from run to run (when the reader's threads allocate), so the
medians are compared and the largest peaks printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_sacct_ingest import generate

#: Run in the child: one mode (ingest, report, phases) on one file; prints a JSON line with its peak.
CHILD = r'''
import contextlib, io, json, os, sys, time

def status_kib(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0

mode, path = sys.argv[1], sys.argv[2]
out = {}
if mode == "ingest":
    from pathlib import Path
    from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, read_sacct_parsable2
    out["rows"] = len(read_sacct_parsable2(Path(path), SACCT_ACCOUNTING_FIELDS))
elif mode == "report":
    from hpcjobs.cli import main
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        main(["report", "--from-file", path, "--json"], standalone_mode=False)
    out["tables"] = len(json.loads(sink.getvalue()))
else:
    t = time.perf_counter()
    from hpcjobs import accounting as reports
    from hpcjobs.accounting.report_source import ReportFilters, apply_filters, read_saved
    from hpcjobs.commands.report import _records
    t, out["import"] = time.perf_counter(), time.perf_counter() - t
    df = read_saved(path)
    t, out["read"] = time.perf_counter(), time.perf_counter() - t
    df = apply_filters(df, ReportFilters())
    t, out["filters"] = time.perf_counter(), time.perf_counter() - t
    reports.input_warnings(df)
    tables = reports.report_tables(df)
    t, out["tables"] = time.perf_counter(), time.perf_counter() - t
    json.dumps({name: _records(table) for name, table in tables.items()}, default=str)
    out["json"] = time.perf_counter() - t
out["peak_kib"] = status_kib("VmHWM")
print(json.dumps(out))
'''


def run_child(mode: str, path: str) -> tuple[float, float, dict[str, float]]:
    """One fresh interpreter: (wall s, CPU s of the child, what the child printed)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so that its rusage is this child's alone
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    if proc.returncode:
        raise SystemExit(f"{mode} failed with exit {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="FILE", help="keep the generated text in FILE; reuse it if it exists")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or os.path.join(tmp, "sacct.txt")
        if not os.path.exists(path):
            with open(path, "w") as fh:
                fh.write(generate(args.rows))
            print(f"generated {args.rows:,} rows")
        print(f"text: {path}, {os.path.getsize(path) / 1e6:.0f} MB")
        run_child("ingest", path)  # warm the page cache
        load_before = os.getloadavg()[0]
        runs: dict[str, list[tuple[float, float, dict[str, float]]]] = {"ingest": [], "report": []}
        for _ in range(args.repeat):
            for mode in runs:
                runs[mode].append(run_child(mode, path))
        phases = run_child("phases", path)[2]
    wall = {m: statistics.median(r[0] for r in v) for m, v in runs.items()}
    best = {m: min(r[0] for r in v) for m, v in runs.items()}
    cpu = {m: statistics.median(r[1] for r in v) for m, v in runs.items()}
    peak = {m: statistics.median(r[2]["peak_kib"] for r in v) / 1024 for m, v in runs.items()}
    top = {m: max(r[2]["peak_kib"] for r in v) / 1024 for m, v in runs.items()}
    for mode, what in (("ingest", "ingest alone (read_sacct_parsable2)"), ("report", "hpcjobs report --json")):
        print(f"{what:<38} wall median {wall[mode]:.2f} s, best {best[mode]:.2f} s, CPU {cpu[mode]:.2f} s, "
              f"peak median {peak[mode]:.0f} MiB, max {top[mode]:.0f} MiB ({args.repeat} runs, interleaved, "
              "fresh interpreters)")
    print(f"report wall: median {wall['report']:.2f} s, best {best['report']:.2f} s (goal <= 3 s); "
          f"{wall['report'] / wall['ingest']:.2f}x the ingest's wall")
    print(f"report peak memory: {peak['report'] / peak['ingest']:.2f}x the ingest's peak, medians (goal <= 1.5x); "
          f"largest report peak / largest ingest peak {top['report'] / top['ingest']:.2f}x")
    print("report phases, one run in-process: " + ", ".join(
        f"{k} {v:.2f} s" for k, v in phases.items() if k != "peak_kib"))
    print(f"1-min load average: {load_before:.1f} before the runs, {os.getloadavg()[0]:.1f} after "
          f"(other processes skew wall times); cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
