"""``hpcjobs watch`` in a real terminal (tmux) on the real Slurm testbed, updating as points finish.

A 4-point sweep: point 0 fails at once with a message, the others run 6, 12 and 18 s. Each job runs
the GPU sampler (``launch: {gpu_sampler: true}``); the testbed has no GPU, so the job's PATH holds a
stand-in ``nvidia-smi`` that prints what the real one prints for ``--format=csv,nounits -l 1`` (the
rows of ``tests/data/gpu/constructed_sampler_nounits_na.csv``), which is what the view reads back
through the job id of the point's log header. The pane is captured (``tmux capture-pane``) until the
running points show their host, elapsed time and GPU use, a key opens the failure's log, the finished
count grows and the sweep ends; ``q`` quits.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from real_testbed import wait_for

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")

FAKE_NVIDIA_SMI = """#!/bin/bash
# what nvidia-smi --query-gpu=... --format=csv,nounits -l 1 prints on a 2-GPU node, once a second
echo 'timestamp, index, uuid, utilization.gpu [%], utilization.memory [%], memory.used [MiB], '\\
'memory.total [MiB], power.draw [W]'
while :; do
    now=$(date '+%Y/%m/%d %H:%M:%S.000')
    echo "$now, 0, GPU-4b9a2c1e-0f3d-4e5a-9b7c-1d2e3f405162, 92, 73, 25073, 49140, 210.55"
    echo "$now, 1, GPU-8c7d6e5f-1a2b-4c3d-8e9f-a0b1c2d3e4f5, 40, 0, 15, 49140, [N/A]"
    sleep 1
done
"""


@pytest.fixture
def tmux() -> str:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (tests/slurm/testbed.sh install puts it in)")
    return "tmux"


def test_watch_shows_a_running_sweep_and_follows_it_to_the_end(slurm_testbed, tmux, tmp_path):
    tmp_path.chmod(0o777)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    exp = tmp_path / "watched.yaml"
    exp.write_text("name: watched\nresources: {walltime: 5m}\n"
                   "command: 'if [ \"$d\" = 0 ]; then echo \"no data for d=$d\" >&2; exit 4; fi; sleep \"$d\"'\n"
                   "launch: {gpu_sampler: true, gpu_sampler_interval: 1}\n"
                   "sweep:\n  grid:\n    d: [0, 6, 12, 18]\n")
    env = f"PATH={bindir}:$PATH PYTHONPATH={ROOT}"
    root = tmp_path / "sweeps"
    submitted = subprocess.run(
        ["bash", "-c", f"{env} {sys.executable} -m hpcjobs sweep {exp} --site {SITE} --root {root}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    sweep_id = re.search(r"sweep (watched-[0-9a-f]+)", submitted.stdout + submitted.stderr)[1]
    session = f"hpcjobs-watch-{time.monotonic_ns()}"
    command = f"cd {tmp_path} && {env} {sys.executable} -m hpcjobs watch {sweep_id} --root {root} --interval 1"
    subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "60", command + "; sleep 60"],
                   check=True)

    def pane() -> str:
        return subprocess.run([tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                              check=True).stdout

    def pane_with(text: str) -> str | None:
        shown = pane()
        return shown if text in shown else None

    def finished() -> int:
        m = re.search(r"(\d+)/4 finished", pane())
        return int(m[1]) if m else -1

    try:
        gpu_row = wait_for("a running point with its host, elapsed time and GPU use", lambda: next(
            (line for line in pane().splitlines() if re.search(r"\b0:00:\d\d\b", line) and "66%" in line), None),
            timeout=180, every=0.5)
        assert re.search(r"\b2\b .*66%.*24\.5/96\.0", gpu_row), gpu_row  # 2 GPUs, mean of 92 and 40, MiB summed
        seen = wait_for("the failure", lambda: pane_with("latest failures"), 120, every=0.5)
        assert "no data for d=0" in seen and "FAILED" in seen
        counts = [finished()]
        wait_for("a point to finish while watched", lambda: counts.append(finished()) or counts[-1] > counts[0],
                 timeout=120, every=0.5)
        rows = [line for line in pane().splitlines() if "FAILED" in line and "no data" in line]
        key = rows[0].split()[0]
        subprocess.run([tmux, "send-keys", "-t", session, key], check=True)
        wait_for("the failed point's log", lambda: "─ FAILED point 0" in pane(), timeout=30, every=0.5)
        end = wait_for("the sweep to end", lambda: pane_with("4/4 finished"), 180, every=1)
        assert "all points finished" in end
        subprocess.run([tmux, "send-keys", "-t", session, "q"], check=True)
        done = wait_for("watch to quit", lambda: pane_with("all 4 point(s) finished"), 30)
        assert "COMPLETED 3, FAILED 1" in done
        print(f"finished counts seen while watching: {sorted(set(counts))}")
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], check=False)
