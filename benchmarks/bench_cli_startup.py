"""How much slower is ``hpcjobs --help`` than a bare click application? (goal: at most 1.5x)

Both run with the same interpreter, alternated, several times; medians are printed
with their ratio. Run: ``python benchmarks/bench_cli_startup.py [--runs 15]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE_CLICK = '''
import click

@click.group()
@click.version_option("0")
def main():
    """A bare click app."""

@main.command()
@click.argument("x")
def render(x):
    """Render."""

main()
'''


def _time(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(BARE_CLICK)
        commands = {
            "bare click --help": [sys.executable, str(bare), "--help"],
            "hpcjobs --help": [sys.executable, "-m", "hpcjobs", "--help"],
        }
        for argv in commands.values():  # warm the file cache
            _time(argv)
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                times[name].append(_time(argv))
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, value in med.items():
        print(f"{name:<22} median {value * 1000:7.1f} ms over {args.runs} runs")
    print(f"ratio hpcjobs/bare: {med['hpcjobs --help'] / med['bare click --help']:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
