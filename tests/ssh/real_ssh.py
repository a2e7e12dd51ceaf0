"""What the tests "from a laptop" share: the SSH testbed in front of the Slurm and OpenPBS testbeds.

The "laptop" is this machine with every scheduler command shadowed on ``PATH`` by one that fails
(:func:`laptop_path`): a command hpcjobs ran here instead of over SSH would fail the test. The login
node is the SSH testbed's user ``hpcssh`` on 127.0.0.1:2222 (``tests/ssh/testbed.sh``), whose jobs the
real schedulers run. :func:`remote_site` writes a site with a ``remote:`` block and a fresh workdir, so
tests never share folders there.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from real_testbed import Testbed

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "tests" / "ssh" / "testbed.sh"
STATE = Path("/var/lib/hpcjobs-testbed/ssh")
SSH_CONFIG = STATE / "client" / "ssh_config"
HOST = "hpcjobs-ssh-testbed"
LOGIN_USER = "hpcssh"

#: Scheduler commands the laptop must never run itself.
SCHEDULER_COMMANDS = ("sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo", "sacctmgr", "sprio", "sshare",
                      "qsub", "qstat", "qdel", "qalter", "qrerun", "pbsnodes", "qmgr", "tracejob")


def remote(argv: Sequence[str], *, timeout: float = 60, check: bool = True, input: str | None = None,
           ) -> subprocess.CompletedProcess[str]:
    """Run a command as the login user over the testbed's ssh (the test's own look at the login node)."""
    import shlex

    return subprocess.run(["ssh", "-F", str(SSH_CONFIG), HOST, shlex.join(argv)], capture_output=True, text=True,
                          timeout=timeout, check=check, input=input)


def _probe(scheduler_check: Sequence[str]) -> str | None:
    if not SSH_CONFIG.is_file():
        return f"{SSH_CONFIG} is missing"
    try:
        result = remote(scheduler_check, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ssh: {exc}"
    if result.returncode == 255:
        return f"ssh to {HOST} failed: {result.stderr.strip()[:300]}"
    if result.returncode != 0:
        return f"{' '.join(scheduler_check)} on {HOST} exited {result.returncode}: {result.stderr.strip()[:300]}"
    return None


#: The Slurm testbed reached through sshd, as a laptop reaches it.
SLURM_OVER_SSH = Testbed("Slurm behind SSH", "sudo bash tests/ssh/testbed.sh start && "
                         "sudo TESTBED_USERS=hpcssh bash tests/slurm/testbed.sh start",
                         lambda: _probe(["sacct", "--noheader", "-X", "--jobs=1", "--format=JobID"]))
#: The OpenPBS testbed reached through sshd.
PBS_OVER_SSH = Testbed("OpenPBS behind SSH", "sudo bash tests/ssh/testbed.sh start && "
                       "sudo bash tests/pbs/testbed.sh start",
                       lambda: _probe(["sh", "-c", ". /etc/pbs.conf && \"$PBS_EXEC/bin/qstat\" -B"]))


def laptop_path(folder: Path) -> str:
    """A ``PATH`` whose scheduler commands fail loudly: the laptop has no scheduler."""
    fakes = folder / "no-scheduler-here"
    fakes.mkdir(exist_ok=True)
    for name in SCHEDULER_COMMANDS:
        path = fakes / name
        path.write_text(f"#!/bin/sh\necho '{name} ran on the laptop instead of the login node' >&2\nexit 99\n")
        path.chmod(0o755)
    return f"{fakes}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def remote_site(folder: Path, base: Path, *, name: str, ssh: str | None = None,
                extra: dict[str, object] | None = None) -> tuple[Path, str]:
    """A copy of site ``base`` reached over the SSH testbed, with a workdir of its own there.

    Returns:
        The site file and the workdir (relative to the login user's home).
    """
    site = yaml.safe_load(base.read_text())
    workdir = f"hpcjobs-tests/{name}-{secrets.token_hex(4)}"
    site["name"] = name
    site["remote"] = {"host": HOST, "ssh_config": str(SSH_CONFIG), "workdir": workdir, **({"ssh": ssh} if ssh else {})}
    site.update(extra or {})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(site, sort_keys=False))
    return path, workdir


def hpcjobs_cli(args: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float = 300,
                ) -> subprocess.CompletedProcess[str]:
    """``python -m hpcjobs ARGS`` on the laptop (its own process, as a person runs it)."""
    import sys

    full = {**os.environ, **env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


# -- the connection killed during submission ----------------------------------------------------------------

#: (``<&0``: a background command of a script otherwise reads /dev/null, and would send an empty script.)
#: An ssh that, on its Nth session, kills the connection: before the command is sent, while it runs, or after
#: it ran there (the answer lost); or kills the sshd serving the login user.
CUTTING_SSH = """\
#!/bin/bash
case " $* " in *" -O "*|*" -M "*) exec ssh "$@";; esac      # the master's own start, check and exit: not counted
count_file={count}
n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$count_file"
if [[ $n -ne {at} ]]; then exec ssh "$@"; fi
kill_master() {{ if pkill -KILL -f "ControlPath={folder}[^ ]*/cm .*-M -N -f"; then echo master >> {struck}; fi; }}
case {mode} in
  before) kill_master; exec ssh "$@";;
  during) ssh "$@" <&0 & pid=$!; sleep 0.0{jitter}; kill_master; wait "$pid"; exit $?;;
  after) ssh "$@" >/dev/null 2>&1; kill_master; echo "Connection to {host} closed by remote host." >&2; exit 255;;
  sshd) ssh "$@" <&0 & pid=$!; sleep 0.0{jitter}
        if pkill -KILL -u {user} -f "sshd: {user}"; then echo sshd >> {struck}; fi; wait "$pid"; exit $?;;
esac
"""


TRIAL_EXPERIMENT = """\
name: {name}
resources: {{walltime: 5m}}
command: echo "$acc $tag"
sweep:
  grid: {{acc: [1, 2, 3], tag: [a, b]}}
"""
TRIAL_POINTS = 6
MODES = ("before", "during", "after", "sshd")


def cut_connection_trials(laptop: Path, base_site: Path, *, trials: int, held: dict[str, object],
                          tasks_of: Callable[[str], dict[str, int]], name: str) -> list[tuple]:
    """Sweeps of 6 points in chunks of 2 whose first submission has its connection killed at a random session.

    Each trial: ``hpcjobs sweep`` through :data:`CUTTING_SSH` (mode by turn, session at random), then the same
    command with the user's own ssh until it succeeds; then the scheduler's own count of the sweep's array
    tasks per submission token (``tasks_of``) must be 6 (never a point twice, never one lost) and the ledger
    must hold every point as queued. ``held`` (site keys) keeps the jobs queued so every task is counted.
    Returns one outcome per trial; fails at the first broken one.
    """
    rng = random.Random(int(os.environ.get("HPCJOBS_TRIAL_SEED", "2026")))
    # the sweep ids differ from run to run: held jobs that an earlier, interrupted run of these trials left
    # in the testbed's queue (its cancel never came) are not counted as this run's duplicates
    run = secrets.token_hex(3)
    outcomes = []
    for trial in range(trials):
        folder = laptop / f"trial{trial}"
        folder.mkdir()
        mode, at = MODES[trial % len(MODES)], rng.randint(2, 9)
        wrapper = folder / "cutting-ssh"
        wrapper.write_text(CUTTING_SSH.format(count=folder / "sessions", struck=folder / "struck", at=at, mode=mode,
                                              jitter=rng.randint(1, 9), host=HOST, user=LOGIN_USER,
                                              folder="/tmp/hpcjobs-ssh-"))
        wrapper.chmod(0o755)
        site, _workdir = remote_site(folder, base_site, name=f"{name}{trial}", ssh=str(wrapper),
                                     extra={"limits": {"max_array_size": 3}, **held})  # 2 tasks a chunk
        plain_site = folder / "plain.yaml"  # the same site and workdir, with the user's own ssh
        plain_site.write_text(site.read_text().replace(f"  ssh: {wrapper}\n", ""))
        assert "cutting-ssh" in site.read_text() and "cutting-ssh" not in plain_site.read_text()
        (folder / "exp.yaml").write_text(TRIAL_EXPERIMENT.format(name=f"{name}-{run}-{trial}"))
        started = time.monotonic()
        env = {"HPCJOBS_SUBMIT_LOOKUP_S": "20"}
        first = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=folder, env=env)
        first_s = time.monotonic() - started
        sweep_id = None
        for _attempt in range(4):  # the same command again, as a person would, until it says all is submitted
            again = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(plain_site), "--json"], cwd=folder, env=env)
            if again.returncode == 0:
                sweep_id = json.loads(again.stdout)["sweep_id"]
                break
            time.sleep(2)
        assert sweep_id is not None, f"trial {trial} ({mode} at session {at}): {first.stderr}\n{again.stderr}"
        try:
            _check_trial(trial, mode, at, folder, sweep_id, first, started, first_s, tasks_of, outcomes)
        finally:  # held jobs never run: cancel them even when the trial failed
            hpcjobs_cli(["cancel", sweep_id], cwd=folder, env={})
    struck_trials = [o for o in outcomes if o[4]]
    assert len(struck_trials) >= trials * 3 // 4, f"the connection was cut in {len(struck_trials)} trials: {outcomes}"
    return outcomes


def _check_trial(trial: int, mode: str, at: int, folder: Path, sweep_id: str, first: Any, started: float,
                 first_s: float, tasks_of: Callable[[str], dict[str, int]], outcomes: list[tuple]) -> None:
    """One trial's checks: the scheduler holds each point once, the ledger has every point queued."""
    status = json.loads(hpcjobs_cli(["status", sweep_id, "--json"], cwd=folder, env={}).stdout)
    tasks = tasks_of(sweep_id)
    struck = (folder / "struck").read_text().split() if (folder / "struck").exists() else []
    outcomes.append((trial, mode, at, first.returncode, struck, tasks))
    last = first.stderr.strip().splitlines()[-1][:160] if first.stderr.strip() else ""
    print(f"trial {trial}: {mode} at session {at}: struck {struck or 'nothing'}, first run exit {first.returncode} "
          f"in {first_s:.1f} s, all submitted after {time.monotonic() - started:.1f} s; {last}")
    assert sum(tasks.values()) == TRIAL_POINTS, (
        f"trial {trial} ({mode} at session {at}, first run exit {first.returncode}): tasks per token {tasks}; "
        f"first run: {first.stderr[-2000:]}")
    queued = status["total"] - status["finished"]  # held in the queue: none finished, none lost
    assert status["total"] == TRIAL_POINTS and queued == TRIAL_POINTS, status
