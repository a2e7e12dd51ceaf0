"""Sweep expansion and ledger throughput (goal: expanding 10,000 points well under 0.1 s).

Times, best and median of several rounds: expanding 10,000 points from several sweep shapes
(a 4-parameter grid, grid × zip with exclude and filter (10,000 before filtering), native random, a W&B random file,
a grid with Hydra overrides), writing the env file text of every point, creating a fresh ledger
with them (one transaction, ``synchronous=FULL``), planning and marking 10 chunks of 1,000, and
applying one status poll of 10,000 records. CPU time is printed beside wall time, and a
calibration line, because the project's machine is shared.
Run: ``python benchmarks/bench_sweep_expand.py [--count 10000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcjobs.config.sweep import SweepSpec
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, choose_journal_mode, experiment_sha256
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import point_env_file_text


def _timed(fn: Callable[[], Any], rounds: int) -> tuple[float, float, float, Any]:
    """Best wall time, median wall time, best CPU time (``process_time``), and the result."""
    times, cpu, result = [], [], None
    for _ in range(rounds):
        start, cstart = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cstart)
    return min(times), statistics.median(times), min(cpu), result


def _report(label: str, best: float, med: float, cpu: float, n: int, goal: str = "") -> None:
    print(f"{label:<46} best {best * 1e3:6.1f} ms, median {med * 1e3:6.1f} ms, cpu {cpu * 1e3:6.1f} ms "
          f"({best / max(n, 1) * 1e6:4.1f} us/point){goal}")


def shapes(count: int) -> dict[str, tuple[SweepSpec, list[str]]]:
    """Sweep shapes giving ``count`` points (before filtering, for the filtered one)."""
    side = round(count ** 0.25)
    grid = {f"p{i}": list(range(side)) for i in range(4)}
    return {
        f"grid {side}^4": (SweepSpec.model_validate({"grid": grid}), []),
        "grid x zip, exclude, filter": (SweepSpec.model_validate({
            "grid": {"lr": [0.1, 0.01, 0.001, 0.0001], "model.depth": list(range(count // 40 or 1))},
            "zip": {"seed": list(range(10)), "tag": [f"t{i}" for i in range(10)]},
            "exclude": [{"lr": 0.1, "seed": [1, 2]}],
            "filter": "lr < 0.05 or model.depth % 2 == 0"}), []),
        "native random": (SweepSpec.model_validate({"random": {"seed": 1, "samples": count, "parameters": {
            "lr": {"distribution": "log_uniform", "min": 1e-5, "max": 1e-1},
            "layers": {"distribution": "int_uniform", "min": 2, "max": 12},
            "act": {"distribution": "choice", "values": ["relu", "gelu", "silu"]}}}}), []),
        "W&B random": (SweepSpec.model_validate({"method": "random", "run_cap": count, "parameters": {
            "lr": {"distribution": "log_uniform_values", "min": 1e-5, "max": 1e-1},
            "bs": {"values": [16, 32, 64]}, "opt": {"parameters": {"m": {"min": 0.5, "max": 0.99}}}}}), []),
        "grid + Hydra overrides": (SweepSpec.model_validate({"grid": {"a": list(range(count // 100))}}),
                                   ["lr=0.1,0.01,0.001,0.0001", f"seed=range(0,{25})"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="repeat and report the best and median round")
    args = parser.parse_args()
    best, _, cpu, _ = _timed(lambda: [{"a": i} for i in range(1_000_000)], args.rounds)
    print(f"{'calibration: 1e6 one-key dicts':<46} best {best * 1e3:6.1f} ms, cpu {cpu * 1e3:6.1f} ms "
          "(about 60-100 ms on an idle modern core)")
    points = []
    for label, (spec, overrides) in shapes(args.count).items():
        best, med, cpu, points_here = _timed(lambda s=spec, o=overrides: expand(s, o), args.rounds)
        _report(f"expand {label} ({len(points_here)})", best, med, cpu, len(points_here), " (goal < 100 ms)")
        if label.startswith("grid "):
            points = points_here
    best, med, cpu, _ = _timed(lambda: [point_env_file_text(p) for p in points], args.rounds)
    _report(f"env file text x {len(points)}", best, med, cpu, len(points))

    with tempfile.TemporaryDirectory(prefix="hpcjobs-bench-") as tmp:
        base = Path(tmp)
        meta = SweepMeta("bench", "bench.yaml", experiment_sha256("bench"), "local", "slurm")
        counter = iter(range(10**6))

        def create() -> Ledger:
            ledger = Ledger.create(base / f"s{next(counter)}", meta, points)
            ledger.close()
            return ledger

        best, med, cpu, _ = _timed(create, args.rounds)
        _report(f"Ledger.create, {len(points)} points ({choose_journal_mode(base)})", best, med, cpu, len(points))

        ledger = Ledger.create(base / "work", meta, points)
        ids = [p.point_id for p in points]
        size = 1000
        start = time.perf_counter()
        for c in range(0, len(ids), size):
            token = ledger.plan_chunk(ids[c:c + size], c // size)
            ledger.mark_submitted(token, str(100 + c // size))
        chunks = (len(ids) + size - 1) // size
        took = time.perf_counter() - start
        print(f"{'plan_chunk + mark_submitted':<44} {took * 1e3:7.1f} ms for {chunks} chunks of {size} "
              f"({took / chunks * 1e3:.1f} ms/chunk: two fsync'd transactions)")
        records = [JobStatus(f"{100 + i // size}_{i % size}", "RUNNING", "R", str(100 + i // size), i % size)
                   for i in range(len(ids))]
        best, med, cpu, changed = _timed(lambda: ledger.record_status(records), 1)
        _report(f"record_status, {len(records)} records ({changed} changed)", best, med, cpu, len(records))
        start = time.perf_counter()
        summary = ledger.summary()
        pending = ledger.pending_points()
        took = time.perf_counter() - start
        print(f"{'summary + pending_points':<44} {took * 1e3:7.1f} ms ({summary}, {len(pending)} pending)")
        ledger.close()


if __name__ == "__main__":
    main()
