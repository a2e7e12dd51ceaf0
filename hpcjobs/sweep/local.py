"""The ``local`` site: a sweep's points run on this machine, in parallel, with the same ledger.

The same array script a cluster would run is executed once per point with
``HPCJOBS_ARRAY_INDEX`` set, by a pool of at most ``workers`` processes. The runner records
each point's start and end in the ledger, so ``hpcjobs status`` works the same as on a cluster.

How a point runs, and why a crash of the runner at any moment is harmless:

- Each point runs in its own session and process group, under a small bash wrapper
  (:data:`POINT_WRAPPER`) that writes the point's exit status to ``local/<token>.<index>.exit``
  itself, so a point that finished before the runner died is recorded as finished.
- The runner holds ``local/<point_id>.lock`` (``flock``) before starting a point and hands the
  locked descriptor to it; every process of the point inherits it, so the lock is free exactly
  when no process of that point is left. A point is never started while its lock is held.
- The runner writes ``local/<token>.<index>.proc`` with the wrapper's pid, its start time (field 22
  of ``/proc/<pid>/stat``, see proc(5)), the boot id and a secret it put in the wrapper's
  environment; a process group is only ever signalled when all of them match and the process leads
  its group (:mod:`hpcjobs.sweep.local_procs`), so a reused pid, a pid of an earlier boot, pid 1 or
  a forged record is never signalled.
- The wrapper asks the kernel for ``SIGTERM`` when the runner dies (``PR_SET_PDEATHSIG``,
  prctl(2)) and forwards it to its process group. ``SIGTERM``/``SIGINT``/``SIGHUP`` to the runner
  (Ctrl-C, a closed terminal, a batch system's stop) are forwarded the same way and the runner
  stops; its points are not cancelled: the stopped and the waiting ones are made pending again
  (the stopped ones as a new attempt, their interrupted one kept in the ledger's history), so the
  same command resumes the sweep. Only ``hpcjobs cancel`` cancels.
- A new runner (and ``hpcjobs status``, when no runner holds the sweep) first settles what a
  dead runner left: a point whose lock is still held is left to finish (the runner waits for it),
  one with an exit file is recorded from it, one without is marked FAILED ("local runner died")
  and run again as a new attempt.
- ``hpcjobs cancel`` writes ``local/<token>.cancel`` (a live runner stops starting points of that
  run), signals the recorded process groups, waits for them, and records the points.

The files live in ``<sweep folder>/local/`` (:class:`hpcjobs.sweep.local_procs.LocalFiles`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from hpcjobs import states
from hpcjobs.errors import HpcJobsError, LedgerError, UnsafePathError
from hpcjobs.process import start_process
from hpcjobs.safe_files import open_own_file, user_folder
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.chunks import Chunk
from hpcjobs.sweep.ledger.store import Ledger, PointRecord, SubmitterLock, new_token
from hpcjobs.sweep.local_procs import PROC_SECRET_VAR, LocalFiles, ProcRecord, boot_id, process_start_time
from hpcjobs.sweep.points.shapes import chunk_job, group_by_shape
from hpcjobs.sweep.prepare import PreparedSweep, render_chunk_script, write_chunk_file
from hpcjobs.sweep.submitter import SubmitReport

log = logging.getLogger("hpcjobs.sweep")

LOCAL_PREFIX = "local-"
RUNNER_DIED = "local runner died"
#: How the state text of a point stopped by a signal to its runner begins (it runs again on resume).
INTERRUPTED = "interrupted"
#: Seconds a stopping runner (or ``cancel``) waits after SIGTERM before it sends SIGKILL.
STOP_GRACE_S = 10.0
_POLL_S = 0.05

#: Runs one point: ``bash -c POINT_WRAPPER hpcjobs-point SCRIPT EXIT_FILE``, as the leader of its own process
#: group. SIGTERM/SIGINT/SIGHUP to it (the runner's death, a stop) create ``EXIT_FILE.stop`` and go on to the whole
#: group as SIGTERM. The task script runs under a subshell that ignores those signals once the script has started
#: (the script itself keeps the default ones), waits for it, and writes ``<exit status> done|terminated`` to
#: EXIT_FILE with a shell builtin: a point that finished is recorded as finished whenever the signal comes.
POINT_WRAPPER = r"""stop() { trap '' TERM INT HUP; : > "$2.stop"; kill -TERM 0 2>/dev/null; }
trap 'stop "$@"' TERM INT HUP
(
    bash "$1" </dev/null &
    trap '' TERM INT HUP
    wait "$!"; rc=$?
    how=done
    if [ -e "$2.stop" ]; then how=terminated; fi
    printf '%s %s\n' "$rc" "$how" > "$2"
    exit "$rc"
) &
wait "$!"; rc=$?
trap '' TERM INT HUP
wait
exit "$rc"
"""



class RunnerInterrupted(HpcJobsError):
    """The local runner was asked to stop by a signal; its points were stopped and are pending again."""

    def __init__(self, signum: int, sweep_id: str = "SWEEP") -> None:
        self.exit_code = 128 + signum
        super().__init__(f"local runner stopped by {signal.Signals(signum).name}; its running points were stopped "
                         f"and, with those not started, will run when the same command runs again (hpcjobs cancel "
                         f"{sweep_id} cancels them instead)")


def _log_file(path: str) -> IO[bytes]:
    """A task's scheduler-style log, truncated and written, never through a link."""
    return os.fdopen(open_own_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "wb")


# ------------------------------------------------------------------------------------- recording


def _status(job_id: str, index: int, state: str, raw: str, exit_code: int | None = None,
            exit_signal: int | None = None) -> JobStatus:
    return JobStatus(f"{job_id}_{index}", state, raw, array_job_id=job_id, array_task_id=index,
                     exit_code=exit_code, exit_signal=exit_signal)


def _outcome(job_id: str, index: int, ended: tuple[int, bool] | None, popen_rc: int | None,
             stopped: str | None) -> JobStatus:
    """The final record of a task: from its exit file, else from the wrapper's own exit status.

    ``stopped`` (the reason hpcjobs stopped the run) turns a failure into CANCELLED, or, when it
    begins with :data:`INTERRUPTED` (a signal to the runner), into a FAILED attempt that runs again;
    a task that exited 0 is COMPLETED whatever happened after.
    """
    stopped_state = states.FAILED if stopped and stopped.startswith(INTERRUPTED) else states.CANCELLED
    if ended is not None:
        rc, terminated = ended
        if rc == 0:
            return _status(job_id, index, states.COMPLETED, "exit 0", 0, 0)
        if stopped:
            return _status(job_id, index, stopped_state, stopped, rc)
        return _status(job_id, index, states.FAILED, f"exit {rc}" + (" (terminated)" if terminated else ""), rc, 0)
    if stopped:
        return _status(job_id, index, stopped_state, stopped, popen_rc)
    if popen_rc is not None and popen_rc < 0:
        return _status(job_id, index, states.FAILED, f"killed by signal {-popen_rc}", None, -popen_rc)
    return _status(job_id, index, states.FAILED, f"exit {popen_rc}", popen_rc, 0)


def _host() -> str:
    import socket

    return socket.gethostname()


def _user() -> str | None:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _local_points(ledger: Ledger) -> list[PointRecord]:
    """Points of local runs not finished yet (queued or running under some runner)."""
    return [p for p in ledger.points() if p.state not in states.TERMINAL_STATES and p.array_job_id is not None
            and p.array_job_id.startswith(LOCAL_PREFIX) and p.submission_token and p.array_index is not None]


def settle_dead_runs(ledger: Ledger, *, cancelled: bool = False, interrupted: str | None = None) -> list[PointRecord]:
    """Record what runners that no longer exist left behind. Call only while holding the sweep lock.

    A point whose lock is still held is alive and left alone (returned); one whose exit file exists is
    recorded from it; one without (never started, or killed before it could write) is FAILED
    ("local runner died"), or CANCELLED when its run was cancelled or ``cancelled`` is set, or FAILED
    with the state text ``interrupted`` (run again on resume) when this runner stopped them. Runs
    that were planned but never marked started return their points to pending.

    Returns:
        The points still alive.
    """
    files = LocalFiles(ledger.dir)
    for sub in ledger.unresolved_submissions():  # planned, never started: no process can exist
        ledger.mark_failed(sub.token, f"{RUNNER_DIED} before starting the run")
    alive: list[PointRecord] = []
    records: list[JobStatus] = []
    for p in _local_points(ledger):
        assert p.submission_token is not None and p.array_index is not None and p.array_job_id is not None
        if files.lock_held(p.point_id):
            alive.append(p)
            continue
        stopped = "cancelled" if cancelled or files.cancel_marker(p.submission_token).exists() else interrupted
        ended = files.read_exit(p.submission_token, p.array_index)
        if ended is None or (ended[1] and ended[0] != 0):
            raw = stopped or RUNNER_DIED
            state = states.CANCELLED if stopped else states.FAILED
            records.append(_status(p.array_job_id, p.array_index, state, raw, ended[0] if ended else None))
        else:
            records.append(_outcome(p.array_job_id, p.array_index, ended, None, stopped))
    if records:
        ledger.record_status(records)
    return alive


def settle_if_idle(ledger: Ledger) -> int:
    """For ``hpcjobs status``: when no runner holds the sweep, record what a dead runner left.

    Returns:
        How many points changed (0 when a runner is alive or the ledger cannot be written).
    """
    before = ledger.summary()
    lock = SubmitterLock(ledger.dir)
    try:
        lock.acquire()
    except LedgerError:
        return 0
    try:
        settle_dead_runs(ledger)
    finally:
        lock.release()
    after = ledger.summary()
    return sum(abs(after.get(s, 0) - before.get(s, 0)) for s in set(before) | set(after)) // 2


def _reset_died(ledger: Ledger) -> int:
    """Make the points a dead runner lost, or a stopped one interrupted, pending again (a new attempt); how many."""
    return ledger.reset_for_resubmit([p.point_id for p in ledger.points(states.FAILED)
                                      if p.state_raw == RUNNER_DIED or (p.state_raw or "").startswith(INTERRUPTED)])


# --------------------------------------------------------------------------------------- signals


def _interrupted(signum: int) -> str:
    """The state text of a point stopped because the runner got ``signum`` (begins with :data:`INTERRUPTED`)."""
    return f"{INTERRUPTED}: the local runner got {signal.Signals(signum).name}"


class _StopSignals:
    """While active (main thread only), SIGTERM/SIGINT/SIGHUP set :attr:`signum` instead of killing the runner."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.signum = self.signum or signum

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()


# ---------------------------------------------------------------------------------------- running


@dataclass
class _Task:
    index: int
    point_id: str
    proc: Any  # subprocess.Popen[bytes]
    files: list[IO[bytes]]
    signalled: float | None = None
    started_at: float = field(default_factory=time.time)


@dataclass
class _Run:
    """One local run (one token) of a chunk of points."""

    prepared: PreparedSweep
    ledger: Ledger
    files: LocalFiles
    job_id: str
    token: str
    script: Path
    point_ids: tuple[str, ...]
    workers: int
    stop: _StopSignals
    progress: Callable[[int, int], None] | None
    running: dict[int, _Task] = field(default_factory=dict)
    finished: int = 0
    job: Any = None  # the chunk's ResolvedJob (its shape's resources); None: the sweep's
    chunk: int | None = None

    def start(self, index: int, out_dir: Path) -> bool:
        """Start one task (under the control lock, so ``cancel`` sees its record). False: not started."""
        point_id = self.point_ids[index]
        with self.files.control():
            if self.files.cancel_marker(self.token).exists():
                return False
            lock_fd = self.files.take_lock(point_id)
            if lock_fd is None:
                return False
            stem = out_dir / f"{self.prepared.job.name}-{self.job_id}_{index}"
            fhs: list[IO[bytes]] = [_log_file(f"{stem}.out"), _log_file(f"{stem}.err")]
            exit_file = self.files.exit(self.token, index)
            for stale in (exit_file, exit_file.with_name(exit_file.name + ".stop")):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            try:
                secret = secrets.token_hex(16)
                env = {"HPCJOBS_ARRAY_INDEX": str(index), "HPCJOBS_JOB_ID": f"{self.job_id}_{index}",
                       PROC_SECRET_VAR: secret}
                proc = start_process(["bash", "-c", POINT_WRAPPER, "hpcjobs-point", str(self.script), str(exit_file)],
                                     env=env,
                                     cwd=self.prepared.submit_dir, stdout=fhs[0].fileno(), stderr=fhs[1].fileno(),
                                     pass_fds=(lock_fd,), new_session=True, parent_death_signal=signal.SIGTERM)
            except BaseException:
                for fh in fhs:
                    fh.close()
                raise
            finally:
                os.close(lock_fd)  # the child holds the lock now
            start_time = process_start_time(proc.pid)
            self.running[index] = _Task(index, point_id, proc, fhs)
            if start_time is not None:
                self.files.write_proc(self.token, index,
                                      ProcRecord(proc.pid, start_time, point_id, boot_id(), secret))
        self.ledger.record_status([_status(self.job_id, index, states.RUNNING, "running")])
        return True

    def record_usage(self, index: int, task: _Task, outcome: JobStatus, ended_at: float,
                     usage: Any) -> None:
        """Save what the runner measured of a reaped task, for :func:`hpcjobs.load_sweep` (its accounting)."""
        job = self.job or self.prepared.job
        record = {
            "job_id": f"{self.job_id}_{index}", "array_job_id": self.job_id, "array_task_id": index,
            "point_id": task.point_id, "job_name": job.name, "sweep_id": self.prepared.sweep_id, "chunk": self.chunk,
            "state": outcome.state, "state_raw": outcome.state_raw, "exit_code": outcome.exit_code,
            "exit_signal": outcome.exit_signal, "start": task.started_at, "end": ended_at,
            "cpu_time_s": (usage.ru_utime + usage.ru_stime) if usage is not None else None,
            "max_rss_bytes": usage.ru_maxrss * 1024 if usage is not None else None,  # Linux: kibibytes
            "cpus": job.nodes * job.tasks_per_node * job.cpus_per_task,
            "req_mem_bytes": job.memory_per_node * job.nodes if job.memory_per_node else None,
            "time_limit_s": job.walltime, "node": _host(), "user": _user(),
        }
        try:
            self.files.write_usage(self.token, index, record)
        except (OSError, UnsafePathError) as exc:
            log.warning("point %s: its measured use was not saved: %s", task.point_id, exc)

    def signal_all(self, sig: int) -> None:
        """Signal the process group of every running task (our own unreaped children: the pids are theirs)."""
        now = time.monotonic()
        for task in self.running.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(task.proc.pid, sig)
            if task.signalled is None:
                task.signalled = now

    def reap(self, stopped: str | None) -> int:
        """Record every task that ended; their leftover processes are killed first. Returns how many ended."""
        ended: list[JobStatus] = []
        for index, task in list(self.running.items()):
            try:  # has it ended? (WNOWAIT: not reaped yet, so its pid and group id stay ours)
                ended_now = os.waitid(os.P_PID, task.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                ended_now = True
            if not ended_now:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(task.proc.pid, signal.SIGKILL)  # leftovers; the unreaped leader keeps the group id ours
            try:  # reaped with its resource use (getrusage(2): the task and the processes it waited for)
                _pid, status, usage = os.wait4(task.proc.pid, 0)
                rc = task.proc.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                rc, usage = task.proc.wait(), None
            ended_at = time.time()
            for fh in task.files:
                fh.close()
            del self.running[index]
            outcome = _outcome(self.job_id, index, self.files.read_exit(self.token, index), rc, stopped)
            ended.append(outcome)
            self.record_usage(index, task, outcome, ended_at, usage)
            with contextlib.suppress(FileNotFoundError):
                self.files.proc(self.token, index).unlink()
        if ended:
            self.ledger.record_status(ended)
            self.finished += len(ended)
            if self.progress:
                self.progress(self.finished, len(self.point_ids))
        return len(ended)

    def execute(self) -> None:
        """Run every task of the chunk, at most ``workers`` at a time, until done, cancelled or stopped."""
        out_dir = self.prepared.submit_dir / self.prepared.job.output_dir
        user_folder(out_dir, what="output_dir")
        waiting = deque(range(len(self.point_ids)))
        stopped: str | None = None
        try:
            while waiting or self.running:
                if stopped is None:
                    if self.files.cancel_marker(self.token).exists():
                        stopped = "cancelled"
                    elif self.stop.signum:
                        stopped = _interrupted(self.stop.signum)
                if stopped is not None:
                    if waiting:  # never started: cancelled, or (interrupted) an attempt to make again
                        state = states.CANCELLED if stopped == "cancelled" else states.FAILED
                        self.ledger.record_status([_status(self.job_id, i, state, stopped) for i in waiting])
                        self.finished += len(waiting)
                        waiting.clear()
                    if any(t.signalled is None for t in self.running.values()):
                        self.signal_all(signal.SIGTERM)
                    if any(time.monotonic() - (t.signalled or 0) > STOP_GRACE_S for t in self.running.values()):
                        self.signal_all(signal.SIGKILL)
                blocked = 0
                while stopped is None and waiting and len(self.running) < self.workers and blocked < len(waiting):
                    index = waiting.popleft()
                    if not self.start(index, out_dir):
                        waiting.append(index)  # a run of this point is still alive, or cancel came: later
                        blocked += 1
                if not self.reap(stopped):
                    time.sleep(_POLL_S)
        finally:
            if self.running:  # an error: take the children down with us
                self.signal_all(signal.SIGKILL)
                self.reap("cancelled: the local runner failed")


def _wait_for_alive(ledger: Ledger, alive: list[PointRecord], stop: _StopSignals) -> None:
    """Wait until the points a dead runner left running have ended (on a stop signal, stop them)."""
    files = LocalFiles(ledger.dir)
    signalled: float | None = None
    while alive:
        if stop.signum and signalled is None:
            signalled = time.monotonic()
            _signal_recorded(files, alive, signal.SIGTERM)
        if signalled is not None and time.monotonic() - signalled > STOP_GRACE_S:
            _signal_recorded(files, alive, signal.SIGKILL)
        alive = [p for p in alive if files.lock_held(p.point_id)]
        if alive:
            time.sleep(_POLL_S)


def _signal_recorded(files: LocalFiles, points: list[PointRecord], sig: int) -> int:
    """Signal the recorded process groups of ``points`` whose pid and start time still match."""
    sent = 0
    for p in points:
        if p.submission_token is None or p.array_index is None:
            continue
        rec = files.read_proc(p.submission_token, p.array_index)
        if rec is not None and rec.point_id == p.point_id and rec.signal_group(sig):
            sent += 1
    return sent


def run_local(prepared: PreparedSweep, ledger: Ledger, *, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> SubmitReport:
    """Run every pending point on this machine (blocking), at most ``workers`` at a time.

    Call from a thread that lives until this returns (the points get SIGTERM when the thread that
    started them ends). What a dead runner left is settled first: points still alive are waited
    for, never started again.

    Returns:
        The report (one "chunk": the points this run started).

    Raises:
        RunnerInterrupted: SIGTERM, SIGINT or SIGHUP arrived (only handled in the main thread);
            the running points were stopped and recorded CANCELLED.
        LedgerError: Another process runs or submits the sweep.
    """
    report = SubmitReport(prepared.sweep_id, len(prepared.points))
    with ledger.lock(), _StopSignals() as stop:
        alive = settle_dead_runs(ledger)
        if alive:
            _wait_for_alive(ledger, alive, stop)
            settle_dead_runs(ledger, interrupted=_interrupted(stop.signum) if stop.signum else None)
        report.recovered = _reset_died(ledger)
        if stop.signum:
            raise RunnerInterrupted(stop.signum, prepared.sweep_id)
        pending = [p.point_id for p in ledger.pending_points()]
        if not pending:
            return report
        used = [s.chunk for s in ledger.submissions()]
        number = max(used) + 1 if used else 0
        for _shape, ids in group_by_shape(pending, prepared.shape_of):  # one script per job shape
            chunk = Chunk(number, tuple(ids))
            number += 1
            token = new_token()
            write_chunk_file(prepared, chunk.number, chunk.point_ids)
            job = chunk_job(prepared.shapes, prepared.shape_of, ids, prepared.job)
            script = render_chunk_script(prepared, chunk.number, chunk.size, None, token, job)
            job_id = f"{LOCAL_PREFIX}{os.getpid()}-{token}"
            ledger.plan_chunk(chunk.point_ids, chunk.number, token=token, argv=["bash", str(script)])
            ledger.mark_submitted(token, job_id)
            report.chunks_submitted += 1
            report.points_submitted += chunk.size
            report.job_ids.append(job_id)
            run = _Run(prepared, ledger, LocalFiles(prepared.folder), job_id, token, script, chunk.point_ids,
                       workers or os.cpu_count() or 1, stop, progress, job=job, chunk=chunk.number)
            run.execute()
            if stop.signum:
                _reset_died(ledger)  # the interrupted and the waiting points: pending, for the same command
                raise RunnerInterrupted(stop.signum, prepared.sweep_id)
    return report


# ---------------------------------------------------------------------------------------- cancel


def cancel_local(ledger: Ledger, *, grace_s: float = STOP_GRACE_S) -> list[str]:
    """Cancel a local sweep's live runs: only process groups hpcjobs recorded (pid and start time) are signalled.

    A live runner sees the cancel marker, stops starting points and records the ones it ran; when
    no runner is alive the points are recorded here. Nothing is left queued or running in the ledger.

    Returns:
        The local run ids (``local-<runner pid>-<token>``) that had live points.
    """
    files = LocalFiles(ledger.dir)
    live = _local_points(ledger)
    ids = sorted({p.array_job_id for p in live if p.array_job_id})
    with files.control():
        for token in {p.submission_token for p in live if p.submission_token}:
            files.cancel(token)
    _signal_recorded(files, live, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    killed = False
    lock = SubmitterLock(ledger.dir)
    while True:
        busy = [p for p in live if files.lock_held(p.point_id)]
        if not busy:
            with contextlib.suppress(LedgerError):
                lock.acquire()
            if lock.held:
                break
        if time.monotonic() > deadline:
            if killed or not busy:
                break
            _signal_recorded(files, busy, signal.SIGKILL)
            killed, deadline = True, time.monotonic() + grace_s
        time.sleep(_POLL_S)
    try:
        if lock.held:
            settle_dead_runs(ledger, cancelled=True)
        else:  # a runner is alive but did not finish in time: record what is certain
            done = {p.point_id for p in live if not files.lock_held(p.point_id)}
            records = [_outcome(p.array_job_id, p.array_index, files.read_exit(p.submission_token, p.array_index),
                                None, "cancelled")
                       for p in _local_points(ledger) if p.point_id in done
                       and p.submission_token and p.array_index is not None and p.array_job_id]
            ledger.record_status(records)
        ledger.cancel_pending()
    finally:
        lock.release()
    return ids
