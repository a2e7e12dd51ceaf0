"""``hpcjobs watch``: the view of a sweep (shapes, throughput, running points, failures), drawn or in lines.

The sweeps are real local-site sweeps; GPU use is read from real ``nvidia-smi`` sampler files
(``tests/data/gpu``). The live view in a terminal is tested in tmux on the Slurm testbed
(``tests/integration/test_watch_slurm.py``).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcjobs.sweep.api import run_sweep
from hpcjobs.sweep.watch import Watcher, last_start, latest_gpu_use, view_lines

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tests" / "data" / "gpu"


def _wait(what, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not after {timeout:.0f} s")


# ------------------------------------------------------------------------------------- the files


def test_the_last_start_header_gives_job_host_and_time():
    text = ("=== hpcjobs: job 41 on n1 at 2026-12-07T10:00:00Z ===\nsome output\n"
            "=== hpcjobs: job 41 on n7 at 2026-12-07T10:05:30Z ===\nmore\n"
            "=== hpcjobs: job 41 on \x1b[31m at not-a-time ===\n")
    assert last_start(text) == ("41", "n7", 1796637930.0)
    assert last_start("no header here\n") is None


def test_gpu_use_from_real_sampler_files(tmp_path):
    two = latest_gpu_use(GPU / "tkjunsei-OpenAD_gpu_usage_2gpu_units.csv", GPU)
    assert two is not None and two.gpus == 2  # rows of one sample differ by a millisecond
    lines = (GPU / "tkjunsei-OpenAD_gpu_usage_2gpu_units.csv").read_text().splitlines()
    last = {line.split(", ")[1]: line.split(", ") for line in lines[1:] if line.strip()}
    util = sum(float(r[3].split()[0]) for r in last.values()) / 2
    assert two.utilization_pct == pytest.approx(util)
    assert two.memory_used_bytes == sum(int(r[6].split()[0]) for r in last.values()) * 2**20
    na = latest_gpu_use(GPU / "constructed_sampler_nounits_na.csv", GPU)
    assert na is not None and na.gpus == 2
    repeated = latest_gpu_use(GPU / "AkshayRoyal-gpu-usage_gpu_usage_repeated-header.csv", GPU)
    assert repeated is not None and repeated.gpus >= 1


def test_gpu_file_cut_mid_line_link_out_or_fifo_gives_what_is_whole_or_nothing(tmp_path):
    import os

    text = (GPU / "constructed_sampler_nounits_na.csv").read_text()
    cut = tmp_path / "cut.gpu.csv"
    cut.write_text(text + "2024/11/23 12:23:39.954, 0, GPU-4b9a, 1")  # the sampler was writing
    whole = latest_gpu_use(GPU / "constructed_sampler_nounits_na.csv", GPU)
    assert latest_gpu_use(cut, tmp_path) == whole
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x-1.gpu.csv").symlink_to(GPU / "constructed_sampler_nounits_na.csv")
    assert latest_gpu_use(tmp_path / "logs" / "x-1.gpu.csv", tmp_path / "logs") is None
    os.mkfifo(tmp_path / "logs" / "y-2.gpu.csv")
    assert latest_gpu_use(tmp_path / "logs" / "y-2.gpu.csv", tmp_path / "logs") is None
    (tmp_path / "logs" / "z-3.gpu.csv").write_text("")
    assert latest_gpu_use(tmp_path / "logs" / "z-3.gpu.csv", tmp_path / "logs") is None


# ------------------------------------------------------------------------------------- a sweep


@pytest.fixture
def finished_sweep(tmp_path, monkeypatch):
    """A finished local sweep of two shapes; the points with x=0 fail after writing an escape sequence."""
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "mixed.yaml"
    exp.write_text("name: mixed\n"
                   "command: 'printf \"step\\\\n\\\\033[2J boom x=%s\\\\n\" \"$x\" >&2; test \"$x\" -ne 0'\n"
                   "sweep:\n  grid:\n    x: [0, 1, 2]\n    resources.cpus_per_task: [1, 2]\n")
    run_sweep(exp, site="local", root=tmp_path / "sweeps")
    return tmp_path / "sweeps"


def test_the_view_of_a_finished_sweep(finished_sweep):
    view = Watcher("mixed", root=finished_sweep).poll()
    assert view.done and view.total == 6 and view.finished == 6
    assert view.counts == {"COMPLETED": 4, "FAILED": 2}
    labels = {s.label: s.counts for s in view.shapes}
    assert labels == {"resources.cpus_per_task=1": {"COMPLETED": 2, "FAILED": 1},
                      "resources.cpus_per_task=2": {"COMPLETED": 2, "FAILED": 1}}
    assert len(view.failures) == 2 and all(f.state == "FAILED" and f.exit_code == 1 for f in view.failures)
    assert all(f.tail.splitlines()[-1] == "\x1b[2J boom x=0" for f in view.failures)
    assert view.failures[0].ended >= view.failures[1].ended  # the latest first
    assert view.running == [] and view.poll_seconds >= 0
    data = json.loads(json.dumps(view.as_dict()))
    assert data["done"] and data["failures"][0]["tail"].endswith("boom x=0")


def test_plain_lines_and_new_failures_only_once(finished_sweep):
    watcher = Watcher("mixed", root=finished_sweep)
    first = watcher.poll()
    lines = view_lines(first)
    assert "mixed-" in lines[0] and "6/6 finished (COMPLETED 4, FAILED 2)" in lines[0] and "done" in lines[0]
    assert len(lines) == 3 and all("FAILED exit 1" in line for line in lines[1:])
    assert view_lines(watcher.poll(), first)[1:] == []  # the same failures are not printed again


def test_throughput_and_finish_from_the_poll_history(tmp_path):
    from hpcjobs.sweep.watch import RATE_WINDOW_S

    now = [1000.0]
    w = Watcher("x", clock=lambda: now[0])
    assert w._rate(now[0], 0, 990.0) is None  # nothing finished yet
    assert w._rate(now[0] + 60, 10, 990.0) == pytest.approx(10.0)  # 10 points in the minute since the first poll
    assert w._rate(now[0] + 120, 10, 990.0) == pytest.approx(5.0)
    late = now[0] + 120 + RATE_WINDOW_S + 60
    assert w._rate(late, 40, 990.0) == pytest.approx(30 / (late - (now[0] + 120)) * 60)  # old polls dropped


def test_watch_command_without_a_terminal_and_as_json(finished_sweep):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    plain = subprocess.run([sys.executable, "-m", "hpcjobs", "watch", "mixed", "--root", str(finished_sweep)],
                           capture_output=True, text=True, env=env, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert "6/6 finished" in plain.stdout and plain.stdout.count("FAILED exit 1") == 2
    assert "\x1b" not in plain.stdout and "\\x1b[2J boom x=0" in plain.stdout  # shown escaped
    js = subprocess.run([sys.executable, "-m", "hpcjobs", "watch", "mixed", "--root", str(finished_sweep), "--json"],
                        capture_output=True, text=True, env=env, timeout=60)
    assert js.returncode == 0 and json.loads(js.stdout.splitlines()[0])["finished"] == 6


def test_the_drawn_view_escapes_what_the_logs_hold(finished_sweep):
    from rich.console import Console

    from hpcjobs.commands.watch import render_view

    view = Watcher("mixed", root=finished_sweep).poll()
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=False, color_system=None).print(
        render_view(view, ("failed point", view.failures[0]), "err", time.time()))
    text = out.getvalue()
    assert "\x1b" not in text and "\\x1b[2J boom x=0" in text
    assert "points by job shape" in text and "latest failures" in text and "resources.cpus_per_task=2" in text


def test_running_points_with_their_host_and_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = tmp_path / "go"
    exp = tmp_path / "slow.yaml"
    exp.write_text(f"name: slow\ncommand: 'while [ ! -e {release} ]; do sleep 0.2; done'\n"
                   "sweep:\n  grid:\n    x: [1, 2]\n")
    root = tmp_path / "sweeps"
    run_sweep(exp, site="local", root=root, detach=True)
    watcher = Watcher("slow", root=root)
    try:
        view = _wait("both points running", lambda: (v := watcher.poll()).counts.get("RUNNING") == 2 and v, 60)
        assert {p.index for p in view.running} == {0, 1}
        assert all(p.host and p.started and abs(p.started - time.time()) < 120 for p in view.running)
        assert not view.done and view.finish_at is None  # nothing finished: no rate yet
    finally:
        release.touch()
    _wait("the sweep finished", lambda: watcher.poll().done, 60)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_keys_open_a_points_log_in_a_terminal(finished_sweep, tmp_path):
    """In a real terminal (tmux): the view, then key 1 opens the first failure's log, q quits."""
    session = f"hpcjobs-watch-{time.monotonic_ns()}"
    command = (f"cd {tmp_path} && PYTHONPATH={ROOT} {sys.executable} -m hpcjobs watch mixed --root {finished_sweep} "
               "--interval 1; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "180", "-y", "50", command], check=True)
    try:
        def pane() -> str:
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                  check=True).stdout

        _wait("the view", lambda: "latest failures" in pane(), 30)
        subprocess.run(["tmux", "send-keys", "-t", session, "1"], check=True)
        def log_pane() -> str:
            text = pane()
            return text if "FAILED point" in text and "boom x=0" in text.split("FAILED point", 1)[1] else ""

        shown = _wait("the log pane", log_pane, 30)
        assert "\\x1b[2J boom x=0" in shown
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        _wait("watch quit", lambda: "point(s) finished" in pane(), 30)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
