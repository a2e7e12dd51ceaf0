"""Commands that do not submit, on a login node whose scheduler hangs, vs the same on a healthy one.

Every scheduler client (``scontrol``, ``sbatch``, ``sacct``, ``qstat``, ``qsub`` ...) is replaced by
one that sleeps 60 s; ``render``, ``site list``, ``site validate``, ``sweep --dry-run`` and
``report --from-file`` are timed with those first on ``PATH`` and with the usual ``PATH`` (this
machine's own clients, answering or absent), alternated. Goal: every ratio near 1 (no command
waits on the scheduler); before the fix, ``render`` of a ``local`` example waited for
``scontrol show config`` to time out.

Run: ``python benchmarks/bench_sick_login_node.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANGING = ("scontrol", "sbatch", "squeue", "sacct", "sacctmgr", "sinfo", "qsub", "qstat", "qdel", "qmgr", "pbsnodes")
COMMANDS = {
    "render hello (local)": ["render", "examples/hello.yaml"],
    "render hello --site derecho": ["render", "examples/hello.yaml", "--site", "derecho", "--set", "account=X"],
    "site list": ["site", "list"],
    "site validate derecho": ["site", "validate", "site-configs/derecho.yaml"],
    "sweep --dry-run": ["sweep", "examples/sweep-grid.yaml", "--site", "local", "--dry-run"],
    "report --from-file": ["report", "--from-file", "tests/data/slurm/testbed/sacct_header_X.txt"],
}


def _time(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=ROOT, env=env, check=True, timeout=120,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sick_bin, healthy_bin = Path(tmp) / "sick", Path(tmp) / "healthy"
        sick_bin.mkdir()
        healthy_bin.mkdir()
        for name in HANGING:
            exe = sick_bin / name
            exe.write_text("#!/bin/sh\nexec sleep 60\n")
            exe.chmod(0o755)
        base = {**os.environ, "PYTHONPATH": str(ROOT), "HPCJOBS_SWEEP_ROOT": str(Path(tmp) / "sweeps"),
                "SLURM_CONF": str(Path(tmp) / "none.conf"), "PBS_CONF_FILE": str(Path(tmp) / "none.conf")}
        envs = {
            "sick": {**base, "PATH": f"{sick_bin}{os.pathsep}{os.environ['PATH']}", "HPCJOBS_PBS_BIN": str(sick_bin)},
            "healthy": {**base, "PATH": f"{healthy_bin}{os.pathsep}{os.environ['PATH']}"},
        }
        print(f"{'command':<30} {'healthy ms':>11} {'sick ms':>9} {'ratio':>6}")
        for label, cmd in COMMANDS.items():
            _time(cmd, envs["healthy"])  # warm the file cache
            times: dict[str, list[float]] = {"sick": [], "healthy": []}
            for _ in range(args.runs):
                for kind, env in envs.items():
                    times[kind].append(_time(cmd, env))
            healthy, sick = (statistics.median(times[k]) for k in ("healthy", "sick"))
            print(f"{label:<30} {healthy * 1000:11.0f} {sick * 1000:9.0f} {sick / healthy:6.2f}")
    print("goal: every ratio near 1.0 (a command waiting on the scheduler would take 60 s)")


if __name__ == "__main__":
    main()
