"""The GPU sampler and the preemption traps, run for real on the ``local`` site (no scheduler).

On ``local`` the preemption signal comes from the script's own timer (wall time − lead time), as
on PBS/Torque; the traps are the ones every scheduler renders.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from launch.shellrun import fake_tool, render, run_bash

FAKE_NVIDIA_SMI = r'''
printf '%s\n' "$@" >"$FAKE_LOG/nvidia-smi.argv"
echo $$ >"$FAKE_LOG/nvidia-smi.pid"
echo "timestamp, index, uuid, utilization.gpu [%], utilization.memory [%], memory.used [MiB], \
memory.total [MiB], power.draw [W]"
while :; do
    echo "2026/12/02 19:00:00.000, 0, GPU-0000, 87, 40, 30000, 81559, 250.00"
    sleep 0.2
done
'''

CHECKPOINTING = r'''
import signal, sys, time
from pathlib import Path
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
step = 0
while not stop and step < 600:
    time.sleep(0.05)
    step += 1
Path("ckpt.txt").write_text(str(step))
print("checkpointed" if stop else "finished", flush=True)
'''


def _job(tmp_path: Path, **kw) -> tuple[str, dict[str, str]]:
    text = render("local", kw.pop("launch"), output_dir=str(tmp_path / "logs"), **kw)
    return text, {"HPCJOBS_JOB_ID": "55"}


def _wait_gone(pid: int, limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


def test_gpu_sampler_runs_the_documented_command_and_stops_with_the_job(tmp_path):
    bindir, log = tmp_path / "bin", tmp_path / "log"
    bindir.mkdir()
    log.mkdir()
    fake_tool(bindir, "nvidia-smi", FAKE_NVIDIA_SMI)
    text, env = _job(tmp_path, launch={"gpu_sampler": True, "gpu_sampler_interval": 7},
                     command='while [ ! -s "$FAKE_LOG/nvidia-smi.pid" ]; do sleep 0.05; done; sleep 0.5')
    proc = run_bash(text, {**env, "FAKE_LOG": str(log)}, bindir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (log / "nvidia-smi.argv").read_text().splitlines() == [
        "--query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw",
        "--format=csv,nounits", "-l", "7",
    ]
    csv = (tmp_path / "logs" / "job1-55.gpu.csv").read_text().splitlines()
    assert csv[0].startswith("timestamp, index, uuid")
    assert csv[1] == "2026/12/02 19:00:00.000, 0, GPU-0000, 87, 40, 30000, 81559, 250.00"
    assert _wait_gone(int((log / "nvidia-smi.pid").read_text())), "the sampler outlived the job"


def test_gpu_sampler_without_nvidia_smi_is_silent(tmp_path):
    text, env = _job(tmp_path, launch={"gpu_sampler": True}, command="echo ran")
    proc = run_bash(text, env, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ran\n", "")
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").iterdir())


def test_timer_signal_is_forwarded_then_checkpoint_hook_then_exit_75(tmp_path):
    (tmp_path / "prog.py").write_text(CHECKPOINTING)
    text, env = _job(tmp_path, command="python3 prog.py; echo after-program",
                     resources={"walltime": "00:06"},
                     launch={"preemptible": True, "signal_seconds": 3,
                             "checkpoint_command": 'echo "hook saw $(cat ckpt.txt)" >hook.txt'})
    assert 'hpcjobs_after 3 USR1 "$$"' in text
    proc = run_bash(text, env, cwd=tmp_path)
    assert proc.returncode == 75, proc.stderr
    step = int((tmp_path / "ckpt.txt").read_text())
    assert 0 < step < 600  # stopped by the signal, not finished
    assert (tmp_path / "hook.txt").read_text() == f"hook saw {step}\n"
    assert proc.stdout == "checkpointed\nafter-program\n"  # the program's shell went on after it
    assert "hpcjobs: SIGUSR1 at " in proc.stderr
    assert "exit status 75 asks for a resubmission" in proc.stderr


def test_a_program_without_a_handler_is_stopped_by_the_signal(tmp_path):
    text, env = _job(tmp_path, command="sleep 60; echo slept", resources={"walltime": "00:04"},
                     launch={"preemptible": True, "signal_seconds": 2, "checkpoint_command": "echo hook"})
    proc = run_bash(text, env, cwd=tmp_path)
    assert proc.returncode == 75, proc.stderr
    assert proc.stdout == "hook\n" or proc.stdout.endswith("hook\n")
    assert "slept" not in proc.stdout


def test_a_launcher_ignores_the_signal_and_its_workers_get_it(tmp_path):
    """torchrun must survive the signal (it would kill its workers); the workers checkpoint on it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "worker.py").write_text(CHECKPOINTING)
    fake_tool(bindir, "torchrun", 'python3 worker.py & wait; echo "launcher exited normally"\n')
    text, env = _job(tmp_path, resources={"walltime": "00:06", "tasks_per_node": 1},
                     launch={"launcher": "torchrun", "program": "worker.py", "preemptible": True,
                             "signal_seconds": 3})
    proc = run_bash(text, env, bindir, cwd=tmp_path)
    assert proc.returncode == 75, proc.stderr
    assert proc.stdout == "checkpointed\nlauncher exited normally\n"
    assert 0 < int((tmp_path / "ckpt.txt").read_text()) < 600


def test_term_checkpoints_without_requeue(tmp_path):
    (tmp_path / "prog.py").write_text(CHECKPOINTING.replace("SIGUSR1", "SIGTERM"))
    text, env = _job(tmp_path, command="python3 prog.py", resources={"walltime": "1h"},
                     launch={"preemptible": True, "checkpoint_command": "echo hook >hook.txt"})
    script = text + ""
    proc = run_bash(f"({script}) & pid=$!; sleep 2; kill -TERM $pid; wait $pid", env, cwd=tmp_path)
    assert proc.returncode == 143, proc.stderr
    assert (tmp_path / "hook.txt").read_text() == "hook\n"
    assert "does not requeue on SIGTERM" in proc.stderr


def test_sampler_cleanup_keeps_the_site_epilogue_and_the_exit_status(tmp_path):
    text = render("local", {"gpu_sampler": True}, site_kw={"epilogue": ["echo epilogue-ran"]},
                  output_dir=str(tmp_path / "logs"), command="echo body; exit 3")
    proc = run_bash(text, {}, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (3, "body\nepilogue-ran\n")
