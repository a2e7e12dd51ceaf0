"""Benchmark: ingest 1,000,000 sacct --parsable2 rows vs. a plain pyarrow-engine read_csv of the same text.

Rows follow the shapes seen in real output (tests/data/slurm/testbed*, the shared fixtures): job rows
followed by ``.batch``/``.extern`` steps (sometimes a ``.0`` srun step), array tasks ``A_i`` with their
own JobIDRaw, collapsed pending ranges ``A_[5-9%2]``, het components ``J+0``/``J+1``, every final
state including ``CANCELLED by <uid>``, ``Unknown``/``None`` times, ``D-HH:MM:SS`` limits,
``UNLIMITED``, ``MM:SS.mmm`` CPU times, ``K`` MaxRSS on steps, TRES with typed GPUs and hpcjobs tags.

Run: ``python benchmarks/bench_sacct_ingest.py [--rows N] [--repeat R] [--keep FILE]``. Prints figures only.
The baseline is ``pd.read_csv(path, sep="|", engine="pyarrow", dtype=str, header=None, names=fields)``: the
text has no header line, so the names are given (the same work as letting it take a first line as header).
``read_sacct_parsable2`` uses the compiled scanner when the build made it (hatch_build.py); the pure pyarrow
path it falls back to is timed as well, for comparison.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from hpcjobs.accounting.sacct import scan as sacct_scan
from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, read_sacct_parsable2

FIELDS = [f.lower() for f in SACCT_ACCOUNTING_FIELDS]
END_STATES = [("COMPLETED", "0:0"), ("COMPLETED", "0:0"), ("COMPLETED", "0:0"), ("COMPLETED", "0:0"),
              ("FAILED", "1:0"), ("FAILED", "3:0"), ("TIMEOUT", "0:0"), ("CANCELLED by 1001", "0:0"),
              ("OUT_OF_MEMORY", "0:125"), ("NODE_FAIL", "0:0"), ("FAILED", "0:9"), ("PREEMPTED", "0:0")]
USERS = [f"user{i:03d}" for i in range(200)]
ACCOUNTS = [f"proj{i:02d}" for i in range(40)]
PARTS = [("cpu", None), ("cpu", None), ("long", None), ("gpu", "a100"), ("gpu", "v100"), ("debug", None)]
LIMITS = ["00:30:00", "01:00:00", "04:00:00", "12:00:00", "1-00:00:00", "2-00:00:00", "UNLIMITED", "Partition_Limit"]


def _fmt_dur(s: int) -> str:
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:{sec:02d}" if d else f"{h:02d}:{m:02d}:{sec:02d}"


def _fmt_cpu(ms: int) -> str:
    """TotalCPU as sacct prints it: ``MM:SS.mmm`` under an hour, else ``[D-]HH:MM:SS``."""
    s, milli = divmod(ms, 1000)
    return _fmt_dur(s) if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}.{milli:03d}"


def generate(n_rows: int, seed: int = 7) -> str:
    """About ``n_rows`` realistic sacct lines in SACCT_ACCOUNTING_FIELDS order."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 11, 1)
    lines: list[str] = []
    raw = 1000
    job = 1000
    while len(lines) < n_rows:
        job += 1
        kind = rng.random()
        user, account = USERS[rng.integers(len(USERS))], ACCOUNTS[rng.integers(len(ACCOUNTS))]
        part, gpu_type = PARTS[rng.integers(len(PARTS))]
        cpus = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
        nodes = 1 if cpus <= 32 else 2
        gpus = int(rng.choice([1, 2, 4])) if gpu_type else 0
        mem_g = cpus * 4
        tres = f"billing={cpus},cpu={cpus}" + (f",gres/gpu:{gpu_type}={gpus},gres/gpu={gpus}" if gpus else "")
        tres += f",mem={mem_g}G,node={nodes}"
        limit = LIMITS[rng.integers(len(LIMITS))]
        tag = f"hpcjobs:sweep{job % 97}:{job % 5}:{job:08x}" if rng.random() < 0.3 else ""
        submit = t0 + timedelta(seconds=int(rng.integers(0, 30 * 86400)))
        n_tasks = int(rng.integers(2, 40)) if kind < 0.25 else 1
        if kind > 0.97:  # pending job, or pending remainder of an array
            ids = [(f"{job}_[{n_tasks}-{n_tasks + 9}%4]" if kind > 0.985 else str(job), str(job))]
            for jid, jraw in ids:
                vals = {"jobid": jid, "jobidraw": jraw, "jobname": f"job{job % 50}", "user": user,
                        "account": account, "partition": part, "qos": "normal", "cluster": "c1",
                        "state": "PENDING", "exitcode": "0:0", "submit": f"{submit:%Y-%m-%dT%H:%M:%S}",
                        "eligible": f"{submit:%Y-%m-%dT%H:%M:%S}", "start": "Unknown", "end": "Unknown",
                        "elapsedraw": "0", "timelimit": limit, "nnodes": str(nodes), "alloccpus": "0",
                        "reqcpus": str(cpus), "reqtres": tres, "reqmem": f"{mem_g}G", "totalcpu": "00:00:00",
                        "nodelist": "None assigned", "comment": tag}
                lines.append("|".join(vals.get(f, "") for f in FIELDS))
            continue
        het = kind > 0.95
        units = [(f"{job}+{k}", None) for k in range(2)] if het else (
            [(f"{job}_{k}", k) for k in range(n_tasks)] if n_tasks > 1 else [(str(job), None)])
        for unit_id, _task in units:
            raw += 1
            jraw = str(job) if unit_id == str(job) else str(raw)
            state, exit_code = END_STATES[rng.integers(len(END_STATES))]
            wait = int(rng.exponential(600))
            elapsed = int(rng.exponential(3600))
            cancelled_early = state.startswith("CANCELLED") and rng.random() < 0.3
            start = submit + timedelta(seconds=wait)
            end = start + timedelta(seconds=elapsed)
            start_s = "None" if cancelled_early else f"{start:%Y-%m-%dT%H:%M:%S}"
            end_s = f"{end:%Y-%m-%dT%H:%M:%S}"
            cpu_ms = int(elapsed * cpus * 1000 * rng.random())
            node = f"{part}{rng.integers(1, 400):03d}" if not cancelled_early else "None assigned"
            vals = {"jobid": unit_id, "jobidraw": jraw, "jobname": f"job{job % 50}", "user": user,
                    "account": account, "partition": part, "qos": "normal", "cluster": "c1", "state": state,
                    "exitcode": exit_code, "submit": f"{submit:%Y-%m-%dT%H:%M:%S}",
                    "eligible": f"{submit:%Y-%m-%dT%H:%M:%S}", "start": start_s, "end": end_s,
                    "elapsedraw": "0" if cancelled_early else str(elapsed), "timelimit": limit,
                    "nnodes": str(nodes), "alloccpus": "0" if cancelled_early else str(cpus), "reqcpus": str(cpus),
                    "alloctres": "" if cancelled_early else tres, "reqtres": tres, "reqmem": f"{mem_g}G",
                    "totalcpu": _fmt_cpu(cpu_ms), "nodelist": node, "comment": tag}
            lines.append("|".join(vals.get(f, "") for f in FIELDS))
            if cancelled_early:
                continue
            steps = ["batch", "extern"] + (["0"] if rng.random() < 0.2 else [])
            for step in steps:
                step_state = "CANCELLED" if state.startswith(("CANCELLED", "TIMEOUT")) and step == "batch" else (
                    state if step != "extern" else "COMPLETED")
                step_exit = "0:15" if step_state == "CANCELLED" else (exit_code if step != "extern" else "0:0")
                rss = int(rng.integers(1500, 64 * 1024 * 1024)) if step != "extern" else int(rng.integers(1400, 1800))
                svals = {"jobid": f"{unit_id}.{step}", "jobidraw": f"{jraw}.{step}", "jobname": step,
                         "cluster": "c1", "state": step_state, "exitcode": step_exit, "submit": start_s,
                         "eligible": start_s, "start": start_s, "end": end_s, "elapsedraw": str(elapsed),
                         "nnodes": str(nodes), "alloccpus": str(cpus),
                         "alloctres": f"cpu={cpus},mem={mem_g}G,node={nodes}", "maxrss": f"{rss}K",
                         "totalcpu": _fmt_cpu(cpu_ms if step == "batch" else 1), "nodelist": node}
                lines.append("|".join(svals.get(f, "") for f in FIELDS))
    return "\n".join(lines[:n_rows]) + "\n"


def _ours(path: str) -> int:
    return len(read_sacct_parsable2(__import__("pathlib").Path(path), SACCT_ACCOUNTING_FIELDS))


def _ours_pyarrow(path: str) -> int:
    """The same call with the compiled scanner switched off: the pure pyarrow path."""
    ext = sacct_scan._ext
    sacct_scan._ext = None
    try:
        return _ours(path)
    finally:
        sacct_scan._ext = ext


def _baseline(path: str) -> int:
    names = list(SACCT_ACCOUNTING_FIELDS)
    return len(pd.read_csv(path, sep="|", engine="pyarrow", dtype=str, header=None, names=names))


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _peak_child(fn: Callable[[str], int], path: str, queue: mp.Queue[tuple[int, int, int, str]]) -> None:
    import pyarrow as pa

    before = _status_kib("VmRSS")
    try:  # reset the peak-RSS mark to the current RSS (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        peak_source = "VmHWM"
    except OSError:
        peak_source = "ru_maxrss"
    fn(path)
    peak = _status_kib("VmHWM") if peak_source == "VmHWM" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((before, peak, pa.default_memory_pool().max_memory(), peak_source))


def peak_memory_mib(fn: Callable[[str], int], path: str) -> tuple[float, float, float, str]:
    """Run ``fn`` once in a fresh process: (RSS before, peak RSS during, arrow pool peak) in MiB."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_child, args=(fn, path, queue))
    proc.start()
    before, peak, pool, source = queue.get()
    proc.join()
    return before / 1024, peak / 1024, pool / 2**20, source


Runs = dict[str, list[tuple[float, float]]]


def timed_interleaved(fns: dict[str, Callable[[str], int]], path: str, repeat: int) -> Runs:
    """Run each function ``repeat`` times, alternating, so load changes hit both alike: (wall, cpu) seconds."""
    out: Runs = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn(path)
            out[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", metavar="FILE", help="keep the generated text in FILE; reuse it if it exists")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or os.path.join(tmp, "sacct.txt")
        if not os.path.exists(path):
            t = time.perf_counter()
            text = generate(args.rows)
            gen_s = time.perf_counter() - t
            with open(path, "w") as fh:
                fh.write(text)
            del text
            print(f"generated {args.rows:,} rows in {gen_s:.1f} s")
        size_mb = os.path.getsize(path) / 1e6
        print(f"text: {path}, {size_mb:.0f} MB")
        _ours(path), _baseline(path)  # warm the page cache and imports
        assert _baseline(path) == _ours(path) == args.rows, "rows read differ from --rows"
        fns: dict[str, Callable[[str], int]] = {"baseline": _baseline, "ours": _ours}
        if sacct_scan.AVAILABLE:
            fns["pyarrow"] = _ours_pyarrow
        else:
            print("the C scanner is not built: 'read_sacct_parsable2' below is the pure pyarrow path")
        load_before = os.getloadavg()[0]
        runs = timed_interleaved(fns, path, args.repeat)
        med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        best = {k: min(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        print(f"pandas.read_csv(engine='pyarrow', dtype=str): median {med['baseline']:.3f} s, "
              f"best {best['baseline']:.3f} s, CPU {cpu['baseline']:.3f} s ({args.repeat} runs, interleaved)")
        print(f"read_sacct_parsable2 (typed schema):         median {med['ours']:.3f} s, best {best['ours']:.3f} s,"
              f" CPU {cpu['ours']:.3f} s")
        print(f"ratio: median {med['ours'] / med['baseline']:.2f}x, best {best['ours'] / best['baseline']:.2f}x, "
              f"CPU {cpu['ours'] / cpu['baseline']:.2f}x  (goal <= 1.5x)")
        if "pyarrow" in runs:
            print(f"  without the C scanner (pure pyarrow path): median {med['pyarrow']:.3f} s, "
                  f"ratio {med['pyarrow'] / med['baseline']:.2f}x, CPU {cpu['pyarrow'] / cpu['baseline']:.2f}x")
        print(f"1-min load average: {load_before:.1f} before the timed runs, {os.getloadavg()[0]:.1f} after "
              f"(other processes skew wall times)")
        for name, fn in (("read_csv baseline", _baseline), ("read_sacct_parsable2", _ours),
                         ("read_sacct_parsable2, pyarrow path", _ours_pyarrow)):
            before, peak, pool, source = peak_memory_mib(fn, path)
            print(f"peak memory {name}: {peak:.0f} MiB RSS ({source}; {before:.0f} MiB before the call, "
                  f"+{peak - before:.0f} MiB), arrow pool peak {pool:.0f} MiB")
        print(f"cpus available: {os.cpu_count()}")


if __name__ == "__main__":
    main()
