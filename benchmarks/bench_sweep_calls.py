"""Scheduler calls and time of a 5,000-point sweep, against a counting fake Slurm (no cluster needed).

Goals: ceil(N / (MaxArraySize - 1)) sbatch calls, one sacct call per status poll,
and expanding + rendering 10,000 points in at most 1 s. Prints figures; asserts nothing.
Run: ``python benchmarks/bench_sweep_calls.py [--points 5000] [--max-array-size 1001]``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from hpcjobs import process
from hpcjobs.process import CommandResult

ROOT = Path(__file__).resolve().parent.parent


class CountingSlurm:
    """Answers sbatch/sacct/scontrol like a healthy Slurm and counts every call."""

    def __init__(self, max_array_size: int) -> None:
        self.max_array_size = max_array_size
        self.calls: Counter[str] = Counter()
        self.jobs: dict[str, tuple[str, int]] = {}

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = list(argv)
        self.calls[argv[0]] += 1
        out = ""
        if argv[0] == "sbatch":
            job = str(1000 + len(self.jobs))
            comment = next(a.split("=", 1)[1] for a in argv if a.startswith("--comment="))
            size = int(re.search(r"--array=0-(\d+)", Path(argv[-1]).read_text()).group(1)) + 1
            self.jobs[job] = (comment, size)
            out = job + "\n"
        elif argv[0] == "scontrol":
            out = f"ClusterName = bench\nMaxArraySize = {self.max_array_size}\n"
        elif argv[0] == "sacct":
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            state = "RUNNING" if self.calls["sacct"] < 3 else "COMPLETED"  # the sweep finishes at the 3rd poll
            out = "".join(f"{j}_{i}|{j}|{state}|0:0|None|bench|{self.jobs[j][0]}\n"
                          for j in ids for i in range(self.jobs[j][1]))
        return CommandResult(tuple(argv), 0, out, "", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=5000)
    parser.add_argument("--max-array-size", type=int, default=1001)
    args = parser.parse_args()
    from hpcjobs.sweep.api import run_sweep, sweep_status

    fake = CountingSlurm(args.max_array_size)
    process.run_command = fake  # type: ignore[assignment]  # the seam every scheduler call goes through
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        exp = Path(tmp) / "bench.yaml"
        exp.write_text(f"name: bench\ncommand: echo $x\nsweep:\n  grid:\n    x: {list(range(args.points))}\n")
        site = str(ROOT / "tests" / "sites" / "hpctest.yaml")
        start = time.perf_counter()
        prepared, _report = run_sweep(exp, site=site, root=Path(tmp) / "sweeps")
        submit_s = time.perf_counter() - start
        goal = math.ceil(args.points / (args.max_array_size - 1))
        print(f"{args.points} points, MaxArraySize {args.max_array_size}: {fake.calls['sbatch']} sbatch calls "
              f"(goal {goal}); planned the ledger, wrote the chunk files and submitted in {submit_s:.2f} s")
        polls = []
        for _ in range(4):
            before = fake.calls["sacct"]
            st = sweep_status(prepared.sweep_id, root=Path(tmp) / "sweeps")
            polls.append((fake.calls["sacct"] - before, st.finished))
        print("status polls (sacct calls, points finished): "
              + ", ".join(f"({n}, {done})" for n, done in polls)
              + " — one call per poll while points are active, none once all are finished")
        print(f"other scheduler calls: {dict((k, v) for k, v in fake.calls.items() if k not in ('sbatch', 'sacct'))}")

    from hpcjobs.render.script import render_job
    from hpcjobs.sweep.expand import expand, point_env_file_text
    from hpcjobs.sweep.prepare import array_job_for_chunk
    from hpcjobs.sweep.spec import SweepSpec

    spec = SweepSpec.model_validate({"grid": {"lr": [10.0 ** -i for i in range(10)], "depth": list(range(10)),
                                              "seed": list(range(100))}})
    start = time.perf_counter()
    points = expand(spec)
    env_texts = [point_env_file_text(p) for p in points]
    job = array_job_for_chunk(prepared, 0, 1000, None)
    script = render_job(job).text
    elapsed = time.perf_counter() - start
    print(f"expanding {len(points)} points + their env files + the array script: {elapsed:.3f} s (goal <= 1 s); "
          f"{sum(map(len, env_texts)) / 1e6:.1f} MB of env files, script {len(script)} bytes")


if __name__ == "__main__":
    main()
