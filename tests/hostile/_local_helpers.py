"""Helpers for the local-runner tests: a sweep whose points log their runs, runners as real processes.

Each point appends ``start <pid>`` and ``end <pid>`` to ``$HPCJOBS_RUN_DIR/log`` and holds an
``flock`` on ``$HPCJOBS_RUN_DIR/overlap.lock`` while it runs (the ``flock`` utility, util-linux):
a second run of the same point that starts while the first is alive writes ``OVERLAP`` into the log.
The script ignores SIGTERM from just before it writes ``end``: a run that logged ``end`` then exits 0,
so a SIGTERM between its last line and its exit (a run the runner rightly records as killed) cannot
look like a finished run done twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hpcjobs.sweep.ledger.store import Ledger, PointRecord

#: Seven short points (0.05-0.3 s each).
DURATIONS = (0.05, 0.3, 0.1, 0.25, 0.15, 0.2, 0.08)

POINT_SCRIPT = """\
exec 7>>"$HPCJOBS_RUN_DIR/overlap.lock"
flock -n 7 || echo OVERLAP >> "$HPCJOBS_RUN_DIR/log"
echo "start $$" >> "$HPCJOBS_RUN_DIR/log"
{before}sleep "$dur"
trap '' TERM
echo "end $$" >> "$HPCJOBS_RUN_DIR/log"
"""


def write_experiment(folder: Path, durations: tuple[float, ...] = DURATIONS, *, before: str = "",
                     name: str = "lr") -> Path:
    """An experiment of ``len(durations)`` points on the local site; ``before`` is shell run before the sleep."""
    script = POINT_SCRIPT.format(before=before)
    body = "\n".join(f"  {line}" for line in script.splitlines())
    xs = ", ".join(str(i) for i in range(len(durations)))
    ds = ", ".join(str(d) for d in durations)
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\nsite: local\nscript: |\n{body}\nsweep:\n  zip:\n    x: [{xs}]\n    dur: [{ds}]\n")
    return path


def runner_argv(experiment: Path, *args: str, workers: int = 3) -> list[str]:
    """``hpcjobs sweep EXPERIMENT --site local`` as a command line."""
    return [sys.executable, "-m", "hpcjobs", "sweep", str(experiment), "--site", "local", "--json",
            "--workers", str(workers), *args]


def start_runner(experiment: Path, *args: str, workers: int = 3) -> subprocess.Popen[bytes]:
    """Start a runner in the experiment's folder (its own process group, like a shell's job)."""
    return subprocess.Popen(runner_argv(experiment, *args, workers=workers), cwd=experiment.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def run_runner(experiment: Path, *args: str, workers: int = 3) -> subprocess.CompletedProcess[bytes]:
    """Run a runner to the end."""
    return subprocess.run(runner_argv(experiment, *args, workers=workers), cwd=experiment.parent,
                          capture_output=True, timeout=180, check=False)


def sweep_dirs(folder: Path) -> list[Path]:
    """The sweep folders under ``folder/hpcjobs-sweeps``."""
    root = folder / "hpcjobs-sweeps"
    return sorted(d for d in root.iterdir() if (d / "ledger.sqlite").is_file()) if root.is_dir() else []


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def sweep_processes(sweep_dir: Path) -> list[int]:
    """Live (non-zombie) processes of a sweep's points: started from its scripts, or with its sweep folder exported."""
    marker_env = f"HPCJOBS_SWEEP_DIR={sweep_dir}".encode()
    marker_cmd = f"{sweep_dir}/scripts/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except (OSError, IndexError):
            continue
        if marker_env in env or marker_cmd in cmd:
            found.append(int(entry))
    return found


def kill_sweep_processes(sweep_dir: Path) -> None:
    """Clean-up after a failed test: SIGKILL whatever of the sweep is left."""
    for pid in sweep_processes(sweep_dir):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def point_logs(sweep_dir: Path) -> dict[str, list[str]]:
    """Each point's log lines, by point id (points that never started have none)."""
    out = {}
    for d in sorted((sweep_dir / "points").glob("*")) if (sweep_dir / "points").is_dir() else []:
        log = d / "log"
        out[d.name] = log.read_text().splitlines() if log.is_file() else []
    return out


def started_points(sweep_dir: Path) -> int:
    """How many point logs have a ``start`` line."""
    return sum(1 for lines in point_logs(sweep_dir).values() if any(ln.startswith("start") for ln in lines))


def mid_run_points(sweep_dir: Path) -> int:
    """Points whose last log line is a ``start`` (running, or killed while running)."""
    return sum(1 for lines in point_logs(sweep_dir).values() if lines and lines[-1].startswith("start"))


def ledger_view(sweep_dir: Path) -> tuple[list[PointRecord], dict[str, list[dict[str, object]]]]:
    """The points and every point's earlier attempts."""
    with Ledger.open(sweep_dir) as ledger:
        points = ledger.points()
        return points, {p.point_id: ledger.attempts(p.point_id) for p in points}
