"""The local site's runner under kill -9, SIGTERM/SIGINT and ``hpcjobs cancel``: real runners, real bash points.

Each point logs ``start``/``end`` and holds an flock while it runs (see ``_local_helpers``), so a
second run of a point that overlaps the first is seen in its log, whatever the ledger says.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcjobs import states
from hpcjobs.errors import LedgerError
from hpcjobs.sweep.api import run_sweep
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.local import RUNNER_DIED
from hpcjobs.sweep.local_procs import LocalFiles, ProcRecord, process_start_time
from tests.hostile._local_helpers import (
    kill_sweep_processes,
    ledger_view,
    mid_run_points,
    point_logs,
    run_runner,
    start_runner,
    started_points,
    sweep_dirs,
    sweep_processes,
    wait_until,
    write_experiment,
)

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
    pytest.mark.skipif(shutil.which("flock") is None, reason="needs the flock utility (util-linux)"),
]

TRIALS = 20


def _trial_dir(folder: Path, trial: int) -> Path | None:
    """The sweep folder of one trial (the ``trial=N`` sweep argument), once its ledger has points."""
    for d in sweep_dirs(folder):
        with contextlib.suppress(LedgerError, IndexError), Ledger.open(d) as ledger:
            if json.loads(ledger.points()[0].params_json).get("trial") == trial:
                return d
    return None


def _assert_exactly_once(sweep_dir: Path, n_points: int) -> None:
    """Every point COMPLETED, its log shows one complete run and no overlap, no earlier attempt completed."""
    points, attempts = ledger_view(sweep_dir)
    assert len(points) == n_points
    assert {p.state for p in points} == {states.COMPLETED}, [(p.point_id, p.state, p.state_raw) for p in points]
    logs = point_logs(sweep_dir)
    for p in points:
        lines = logs[p.point_id]
        assert "OVERLAP" not in lines, (p.point_id, lines)
        assert sum(ln.startswith("end") for ln in lines) == 1, (p.point_id, lines)
        assert lines[-1].startswith("end"), (p.point_id, lines)
        assert all(a["state"] != states.COMPLETED for a in attempts[p.point_id]), attempts[p.point_id]
        # a run that ended with "end" is the recorded one: every earlier run was cut short
        ends = [i for i, ln in enumerate(lines) if ln.startswith("end")]
        assert ends == [len(lines) - 1]


def _kill9_trial(folder: Path, exp: Path, trial: int, rng: random.Random) -> tuple[bool, bool]:
    """One trial: kill -9 the runner at a random moment, then rerun to completion and check exactly once.

    Returns:
        Whether a point was mid-run at the kill, and whether one had already finished.
    """
    proc = start_runner(exp, f"trial={trial}")
    try:
        def begun() -> bool:
            d = _trial_dir(folder, trial)
            return (d is not None and started_points(d) > 0) or proc.poll() is not None

        assert wait_until(begun)
        time.sleep(rng.uniform(0.0, 0.45))
    finally:
        proc.kill()
        proc.wait()
    sweep_dir = _trial_dir(folder, trial)
    assert sweep_dir is not None
    mid_run = mid_run_points(sweep_dir) > 0
    finished = any(ln and ln[-1].startswith("end") for ln in point_logs(sweep_dir).values())
    try:
        # the runner's death takes its points with it: nothing of the sweep is left running
        assert wait_until(lambda: not sweep_processes(sweep_dir), timeout=10), sweep_processes(sweep_dir)
        if trial % 4 == 3:  # now and then the rerun is killed too
            again = start_runner(exp, f"trial={trial}")
            time.sleep(rng.uniform(0.3, 0.9))
            again.kill()
            again.wait()
            assert wait_until(lambda: not sweep_processes(sweep_dir), timeout=10)
        # the rerun to completion, in this process (the same library call as `hpcjobs sweep`)
        _, report = run_sweep(exp, site="local", sweep_args=[f"trial={trial}"], workers=3)
        assert report.points_submitted <= 7
        _assert_exactly_once(sweep_dir, 7)
    finally:
        kill_sweep_processes(sweep_dir)
    return mid_run, finished


def test_kill9_loop_every_point_runs_to_completion_exactly_once(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exp = write_experiment(tmp_path)
    rng = random.Random(20240611)
    outcomes = [_kill9_trial(tmp_path, exp, trial, rng) for trial in range(TRIALS)]
    mid_run_kills = sum(mid for mid, _ in outcomes)
    finished_before_kill = sum(fin for _, fin in outcomes)
    # the kills landed where they matter: while points ran, and after some had finished
    assert mid_run_kills >= 3 and finished_before_kill >= 3, (mid_run_kills, finished_before_kill)


def test_point_that_survives_a_dead_runner_is_adopted_not_run_again(tmp_path: Path) -> None:
    # the point ignores SIGTERM (and so does its sleep), so it outlives the runner it belongs to
    exp = write_experiment(tmp_path, (1.5, 0.05), before="trap '' TERM\n")
    proc = start_runner(exp, workers=2)
    try:
        assert wait_until(lambda: bool(sweep_dirs(tmp_path)) and started_points(sweep_dirs(tmp_path)[0]) == 2)
        sweep_dir = sweep_dirs(tmp_path)[0]
        assert wait_until(lambda: sum(ln[-1:] == ["end " + ln[0].split()[1]]
                                      for ln in point_logs(sweep_dir).values() if ln) >= 1)
    finally:
        proc.kill()
        proc.wait()
    try:
        assert sweep_processes(sweep_dir), "the slow point should still be running"
        # `status` while it runs: the live point stays RUNNING, not "runner died"
        from hpcjobs.sweep.api import sweep_status

        st = sweep_status(sweep_dir)
        assert st.counts.get(states.RUNNING) == 1 and st.counts.get(states.COMPLETED) == 1, st.counts
        done = run_runner(exp, workers=2)
        assert done.returncode == 0, done.stderr.decode()
        assert json.loads(done.stdout)["points_submitted"] == 0  # nothing started again
        _assert_exactly_once(sweep_dir, 2)
    finally:
        kill_sweep_processes(sweep_dir)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_runner_death_or_stop_signal_leaves_no_orphans(tmp_path: Path, sig: signal.Signals) -> None:
    exp = write_experiment(tmp_path, (30, 30, 30, 30, 30))
    proc = start_runner(exp, workers=3)
    sweep_dir = None
    try:
        assert wait_until(lambda: bool(sweep_dirs(tmp_path)) and started_points(sweep_dirs(tmp_path)[0]) == 3)
        sweep_dir = sweep_dirs(tmp_path)[0]
        assert len(sweep_processes(sweep_dir)) >= 6  # wrapper, script and sleep of each point
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        assert wait_until(lambda: not sweep_processes(sweep_dir), timeout=10), sweep_processes(sweep_dir)
        points, _ = ledger_view(sweep_dir)
        if sig == signal.SIGKILL:
            assert rc == -signal.SIGKILL
            # the dead runner could not record anything; `status` settles it from the files
            from hpcjobs.sweep.api import sweep_status

            st = sweep_status(sweep_dir)
            assert st.counts == {states.FAILED: 5}, st.counts
            assert {p.state_raw for p in st.points} == {RUNNER_DIED}
        else:
            assert rc == 128 + sig, proc.stderr.read().decode() if proc.stderr else rc
            # a stop signal is not a cancel: every point is pending again, for the same command
            assert {p.state for p in points} == {"PLANNED"}, [(p.state, p.state_raw) for p in points]
            _, attempts = ledger_view(sweep_dir)
            stopped = [a for hist in attempts.values() for a in hist]
            assert len(stopped) == 5 and all(sig.name in str(a.get("state_raw")) for a in stopped), stopped
        assert all(not any(ln.startswith("end") for ln in lines) for lines in point_logs(sweep_dir).values())
    finally:
        proc.kill()
        proc.wait()
        if sweep_dir is not None:
            kill_sweep_processes(sweep_dir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_sweep_resumes_with_the_same_command(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C (or a closed terminal, or a stop) of a foreground local sweep, then the same command again:
    every point runs to its end exactly once, none is left cancelled."""
    durations = (0.05, 5, 5, 0.05, 0.05, 0.05)
    exp = write_experiment(tmp_path, durations)
    proc = start_runner(exp, workers=2)
    try:
        assert wait_until(lambda: bool(sweep_dirs(tmp_path)) and mid_run_points(sweep_dirs(tmp_path)[0]) == 2)
        sweep_dir = sweep_dirs(tmp_path)[0]
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 128 + sig
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert "will run when the same command runs again" in err and "hpcjobs cancel" in err, err
        assert not sweep_processes(sweep_dir) or wait_until(lambda: not sweep_processes(sweep_dir), timeout=10)
        points, _ = ledger_view(sweep_dir)
        assert states.CANCELLED not in {p.state for p in points}, [(p.state, p.state_raw) for p in points]
    finally:
        proc.kill()
        proc.wait()
    again = run_runner(exp, workers=2)
    assert again.returncode == 0, again.stderr.decode()
    points, _ = ledger_view(sweep_dir)
    assert {p.state for p in points} == {states.COMPLETED}, [(p.state, p.state_raw) for p in points]
    ends = {pid: sum(ln.startswith("end") for ln in lines) for pid, lines in point_logs(sweep_dir).items()}
    assert sorted(ends.values()) == [1] * len(durations), ends  # each point finished exactly once


def _unrelated_sleep() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "120"], start_new_session=True)


def _forge_reused_pid(sweep_dir: Path, victim: subprocess.Popen[bytes], how: str = "start time") -> None:
    """Point one running task's record at an unrelated process, as a reused pid, a record of an earlier boot,
    a hand-written record or one of an older hpcjobs would (the victim lacks the task's secret)."""
    files = LocalFiles(sweep_dir)
    procs = sorted(files.dir.glob("*.proc"))
    assert procs
    token, index, _ = procs[0].name.split(".")
    rec = files.read_proc(token, int(index))
    assert rec is not None and rec.boot and rec.secret
    real_start = process_start_time(victim.pid)
    assert real_start is not None
    forged = {
        "start time": ProcRecord(victim.pid, real_start - 1, rec.point_id, rec.boot, rec.secret),
        "earlier boot": ProcRecord(victim.pid, real_start, rec.point_id, "0" * 8 + rec.boot[8:], rec.secret),
        "secret": ProcRecord(victim.pid, real_start, rec.point_id, rec.boot, rec.secret),
        "older record": ProcRecord(victim.pid, real_start, rec.point_id),
    }[how]
    files.write_proc(token, int(index), forged)


def _cancel(sweep_dir: Path) -> subprocess.CompletedProcess[bytes]:
    import sys

    return subprocess.run([sys.executable, "-m", "hpcjobs", "cancel", str(sweep_dir)], capture_output=True,
                          timeout=120, check=False)


def test_cancel_with_a_live_runner_started_by_a_shell_with_ampersand(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path, (30, 30, 30, 30, 30))
    import sys

    # the shell that started the sweep with `&` is the runner's process group leader
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} -m hpcjobs sweep {exp.name} --site local --workers 3 "
                                            ">/dev/null 2>&1 & wait; sleep 60"],
                             cwd=tmp_path, start_new_session=True)
    victim = _unrelated_sleep()
    sweep_dir = None
    try:
        assert wait_until(lambda: bool(sweep_dirs(tmp_path)) and started_points(sweep_dirs(tmp_path)[0]) == 3)
        sweep_dir = sweep_dirs(tmp_path)[0]
        _forge_reused_pid(sweep_dir, victim)
        done = _cancel(sweep_dir)
        assert done.returncode == 0, done.stderr.decode()
        assert wait_until(lambda: not sweep_processes(sweep_dir), timeout=10), sweep_processes(sweep_dir)
        assert victim.poll() is None, "a process whose start time did not match was signalled"
        assert shell.poll() is None, "the shell that started the sweep was signalled"
        points, _ = ledger_view(sweep_dir)
        assert {p.state for p in points} == {states.CANCELLED}, [(p.state, p.state_raw) for p in points]
    finally:
        for p in (victim, shell):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if sweep_dir is not None:
            kill_sweep_processes(sweep_dir)


@pytest.mark.parametrize("forged", ["start time", "earlier boot", "secret", "older record"])
def test_cancel_after_the_runner_died_signals_only_recorded_processes(tmp_path: Path, forged: str) -> None:
    exp = write_experiment(tmp_path, (30, 30, 30, 30))
    proc = start_runner(exp, workers=2)
    victim = _unrelated_sleep()
    sweep_dir = None
    try:
        assert wait_until(lambda: bool(sweep_dirs(tmp_path)) and started_points(sweep_dirs(tmp_path)[0]) == 2)
        sweep_dir = sweep_dirs(tmp_path)[0]
        proc.kill()
        proc.wait()
        assert wait_until(lambda: not sweep_processes(sweep_dir), timeout=10)
        _forge_reused_pid(sweep_dir, victim, forged)
        done = _cancel(sweep_dir)
        assert done.returncode == 0, done.stderr.decode()
        assert victim.poll() is None, f"a process that did not match the record ({forged}) was signalled"
        points, _ = ledger_view(sweep_dir)
        # nothing is left SUBMITTED or RUNNING: the two that ran and the two that never started are cancelled
        assert {p.state for p in points} == {states.CANCELLED}, [(p.state, p.state_raw) for p in points]
        # and a rerun does not start cancelled points
        again = run_runner(exp, workers=2)
        assert again.returncode == 0 and json.loads(again.stdout)["points_submitted"] == 0
    finally:
        proc.kill()
        proc.wait()
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        if sweep_dir is not None:
            kill_sweep_processes(sweep_dir)
