"""Sweeps too large to build are refused from their spec (exit 2 with the count), before anything is built.

Each case runs the real command line (``hpcjobs sweep X.yaml --dry-run --site local``) and checks
the exit code, the count and the limit in the message, the file:line of the sweep, and that the
Python allocations stayed small (a generous bound, not a timing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.config.sweep import parse_sweep
from hpcjobs.config.sweep_size import DEFAULT_MAX_POINTS, MAX_POINTS_ENV, count_points, range_count
from hpcjobs.sweep.points.expand import expand

PEAK_BYTES = 200 * 1024 * 1024


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(MAX_POINTS_ENV, raising=False)
    monkeypatch.setenv("HPCJOBS_SWEEP_ROOT", str(tmp_path / "sweeps"))


def _experiment(tmp_path: Path, sweep_yaml: str, name: str = "exp") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ncommand: echo hi\nsweep:\n" + textwrap.indent(textwrap.dedent(sweep_yaml), "  "))
    return path


def _sweep(path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """Run ``hpcjobs sweep PATH ARGS --dry-run --site local``: (exit code, output, peak traced bytes)."""
    tracemalloc.start()
    try:
        result = CliRunner().invoke(main, ["sweep", str(path), *args, "--dry-run", "--site", "local"], env=env)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result.exit_code, " ".join(result.output.split()), peak


def _refused(path: Path, *args: str, count: str, env: dict[str, str] | None = None) -> str:
    code, out, peak = _sweep(path, *args, env=env)
    assert code == 2, out
    assert count in out, out
    assert "Traceback" not in out
    assert peak < PEAK_BYTES, f"peak {peak / 2**20:.0f} MiB"
    return out


def test_grid_of_ten_to_the_twelve_is_refused_from_its_spec(tmp_path: Path) -> None:
    values = "[" + ", ".join(map(str, range(1000))) + "]"
    path = _experiment(tmp_path, f"grid:\n  a: {values}\n  b: {values}\n  c: {values}\n  d: {values}\n")
    out = _refused(path, count="1,000,000,000,000 points")
    assert f"{path}:4:3" not in out and f"{path}:3:1: sweep:" in out  # the line of the sweep: key
    assert "1,000,000" in out and "max_points" in out and MAX_POINTS_ENV in out


def test_filter_does_not_bypass_the_limit_and_says_so(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1, 2]\nfilter: 'a < 0'\n")
    out = _refused(path, "b=range(1000)", "c=range(1000)", count="2,000,000 points")
    assert "filter drop points only after the product is built" in out


def test_native_random_samples_are_capped(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        random:
          seed: 0
          samples: 1e9
          parameters:
            x: {distribution: uniform, min: 0, max: 1}
    """)
    out = _refused(path, count="1000000000")
    assert "sweep.random.samples" in out and "100,000,000" in out and f"{path}:" in out


def test_native_random_samples_over_the_limit_but_under_the_ceiling(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        random:
          seed: 0
          samples: 2000000
          parameters:
            x: {distribution: uniform, min: 0, max: 1}
    """)
    _refused(path, count="2,000,000 points")


def test_wandb_run_cap_is_capped(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        method: random
        run_cap: 1e9
        parameters:
          lr: {min: 0.0, max: 1.0}
    """)
    out = _refused(path, count="1000000000")
    assert "sweep.run_cap" in out


def test_wandb_grid_of_three_times_ten_to_the_twelve(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        method: grid
        parameters:
          a: {values: [1, 2, 3]}
          b: {min: 1, max: 1000000000000}
    """)
    _refused(path, count="3,000,000,000,000 points")


def test_wandb_q_uniform_with_no_finite_count(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        method: grid
        parameters:
          a: {distribution: q_uniform, min: -1.0e308, max: 1.0e308, q: 1.0e-300}
    """)
    out = _refused(path, count="max - min is not a finite number")  # refused with the distribution's numbers
    assert f"{path}:" in out


def test_sweep_arguments_three_ranges_of_a_thousand(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1]\n")
    out = _refused(path, "x=range(1000)", "y=range(1000)", "z=range(1000)", count="1,000,000,000 points")
    assert "command-line 1000 × 1000 × 1000" in out


@pytest.mark.parametrize(("arg", "count"), [
    ("x=range(0,1e300,1e-300)", "does not have a finite number of values"),
    ("x=range(0,1e300,1)", "about 10^300 values"),
    ("x=range(0," + "9" * 90 + ")", "about 10^89 values"),
    ("x=range(2000000)", "2,000,000 values"),
])
def test_range_count_is_arithmetic(tmp_path: Path, arg: str, count: str) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1]\n")
    _refused(path, arg, count=count)


def test_max_points_key_raises_and_lowers_the_limit(tmp_path: Path) -> None:
    lists = "grid:\n  a: [" + ", ".join(map(str, range(40))) + "]\n  b: [" + ", ".join(map(str, range(50))) + "]\n"
    low = _experiment(tmp_path, "max_points: 1000\n" + lists, name="low")
    out = _refused(low, count="2,000 points")
    assert "over the limit of 1,000 points" in out
    high = _experiment(tmp_path, "max_points: 3000\n" + lists, name="high")
    code, out, _ = _sweep(high, "c=1,2,3", env={MAX_POINTS_ENV: "10"})  # the file's key wins over the environment
    assert code == 2 and "6,000 points" in out and "limit of 3,000 points" in out
    code, out, _ = _sweep(high)
    assert code == 0, out
    assert "2000 points" in out or "2,000" in out, out


def test_environment_variable_sets_the_limit(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1, 2, 3, 4]\n  b: [1, 2, 3]\n")
    _refused(path, count="12 points", env={MAX_POINTS_ENV: "10"})
    code, out, _ = _sweep(path, env={MAX_POINTS_ENV: "12"})
    assert code == 0, out
    for bad in ("ten", "0", "1" + "0" * 40):
        code, out, _ = _sweep(path, env={MAX_POINTS_ENV: bad})
        assert code == 2 and MAX_POINTS_ENV in out, out


def test_max_points_itself_is_capped(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "max_points: 1000000000\ngrid:\n  a: [1]\n")
    out = _refused(path, count="1000000000")
    assert "sweep.max_points" in out


def test_union_sizes_add_up(tmp_path: Path) -> None:
    union = [{"grid": {"a": [1, 2, 3]}}, {"zip": {"b": [1, 2], "c": [3, 4]}},
             {"method": "grid", "parameters": {"d": {"min": 1, "max": 4}}}]
    spec = parse_sweep({"grid": {"s": [1, 2]}, "union": union})
    assert count_points(spec) == 2 * (3 + 2 + 4) == len(expand(spec))
    assert count_points(spec, {"x": [1, 2, 3]}) == 54 == len(expand(spec, {"x": [1, 2, 3]}))


def test_range_count_matches_python_range() -> None:
    for args in [(0, 10, 1), (0, 10, 3), (10, 0, -3), (5, 5, 1), (5, 0, 1), (-7, 8, 4), (3, -9, -5)]:
        assert range_count(*args) == len(range(*args))
    assert range_count(0, 1, 0.25) == 4 and range_count(0.0, 1.0, 0.3) == 4
    assert DEFAULT_MAX_POINTS == 1_000_000


# ------------------------------------------------------------------- expansion errors carry file:line


def test_filter_with_unknown_name_names_the_file_and_line(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1, 2]\nfilter: 'a < nope'\n")
    code, out, _ = _sweep(path)
    assert code == 2 and f"{path}:6:3: sweep.filter: filter names 'nope'" in out, out


def test_filter_failing_on_a_point_names_the_file_and_line(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1, x]\nfilter: 'a < 2'\n")
    code, out, _ = _sweep(path)
    assert code == 2 and f"{path}:6:3: sweep.filter: filter 'a < 2' fails" in out, out


def test_exclude_rule_and_union_items_name_their_own_line(tmp_path: Path) -> None:
    path = _experiment(tmp_path, """
        grid:
          a: [1, 2]
        exclude:
          - {a: 1}
          - {zz: 1}
    """)
    code, out, _ = _sweep(path)
    assert code == 2 and f"{path}:9:7: sweep.exclude.1: exclude rule 1 names 'zz'" in out, out
    path = _experiment(tmp_path, """
        union:
          - grid: {a: [1, 2]}
          - grid: {b: [1, 2]}
            filter: "c > 1"
    """, name="u")
    code, out, _ = _sweep(path)
    assert code == 2 and f"{path}:8:7: sweep.union.1.filter" in out, out


def test_command_line_problems_stay_on_the_command_line(tmp_path: Path) -> None:
    path = _experiment(tmp_path, "grid:\n  a: [1]\n")
    code, out, _ = _sweep(path, "x=range(0,1,0)")
    assert code == 2 and "override 'x=range(0,1,0)': range() step cannot be 0" in out, out


#: Runs ``python -m hpcjobs`` under a 4 GiB address-space limit (a regression fails with MemoryError instead of
#: filling the machine) and writes the peak RSS of its own address space (VmHWM) to ``$PEAK_FILE`` at exit.
#: Not ``ru_maxrss``: Linux carries the RSS of the process a child was forked from (here: pytest) into it.
_PEAK_DRIVER = """
import atexit, os, resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
def _peak():
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    with open(os.environ["PEAK_FILE"], "w") as f:
        f.write(hwm.split()[1])
atexit.register(_peak)
sys.argv = ["hpcjobs", *sys.argv[1:]]
runpy.run_module("hpcjobs", run_name="__main__")
"""


def test_peak_memory_of_the_real_command(tmp_path: Path) -> None:
    """The real command in its own process: its peak resident memory stays small."""
    values = "[" + ", ".join(map(str, range(1000))) + "]"
    path = _experiment(tmp_path, f"grid:\n  a: {values}\n  b: {values}\n  c: {values}\n")
    peak_file = tmp_path / "peak"
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_DRIVER, "sweep", str(path), "x=range(1000)", "--dry-run", "--site", "local"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PEAK_FILE": str(peak_file)},
        check=False)
    out = " ".join(proc.stdout.decode().split())
    assert proc.returncode == 2 and "1,000,000,000,000 points" in out, out
    peak_kib = int(peak_file.read_text())
    assert peak_kib * 1024 < PEAK_BYTES, f"peak RSS {peak_kib / 1024:.0f} MiB"
