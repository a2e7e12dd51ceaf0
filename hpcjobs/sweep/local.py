"""The ``local`` site: a sweep's points run on this machine, in parallel, with the same ledger.

The same array script a cluster would run is executed once per point with
``HPCJOBS_ARRAY_INDEX`` set, by a pool of at most ``workers`` processes. The runner records
each point's start and end in the ledger, so ``hpcjobs status`` works the same as on a cluster.
A runner that dies (kill -9, a closed laptop) leaves points it had started; the next run marks
them FAILED ("local runner died") and runs them again as a new attempt.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import IO

from hpcjobs import states
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.chunks import Chunk
from hpcjobs.sweep.ledger import Ledger, new_token
from hpcjobs.sweep.prepare import PreparedSweep, render_chunk_script, write_chunk_file
from hpcjobs.sweep.submitter import SubmitReport

LOCAL_PREFIX = "local-"


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _runner_pid(job_id: str) -> int | None:
    # local job ids are local-<pid>-<token>
    parts = job_id.split("-")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def recover_dead_runs(ledger: Ledger) -> int:
    """Points left queued or running by a runner that no longer exists: mark them FAILED, then pending.

    Returns:
        How many points were made pending again.
    """
    dead: list[JobStatus] = []
    for p in ledger.points():
        if p.state in states.TERMINAL_STATES or p.array_job_id is None:
            continue
        if not p.array_job_id.startswith(LOCAL_PREFIX):
            continue
        pid = _runner_pid(p.array_job_id)
        if pid is not None and _pid_alive(pid):
            continue
        dead.append(JobStatus(f"{p.array_job_id}_{p.array_index}", states.FAILED, "local runner died",
                              array_job_id=p.array_job_id, array_task_id=p.array_index))
    if not dead:
        return 0
    ledger.record_status(dead)
    return ledger.reset_for_resubmit([p.point_id for p in ledger.points(states.FAILED)
                                      if p.state_raw == "local runner died"])


def _record(job_id: str, index: int, rc: int) -> JobStatus:
    """The final record of one local task from its exit status (negative: killed by that signal)."""
    task = f"{job_id}_{index}"
    if rc < 0:
        return JobStatus(task, states.FAILED, f"killed by signal {-rc}", array_job_id=job_id, array_task_id=index,
                         exit_signal=-rc)
    return JobStatus(task, states.COMPLETED if rc == 0 else states.FAILED, "exit 0" if rc == 0 else f"exit {rc}",
                     array_job_id=job_id, array_task_id=index, exit_code=rc, exit_signal=0)


def run_local(prepared: PreparedSweep, ledger: Ledger, *, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> SubmitReport:
    """Run every pending point on this machine (blocking), at most ``workers`` at a time.

    Returns:
        The report (one "chunk": the points this run started).
    """
    report = SubmitReport(prepared.sweep_id, len(prepared.points))
    with ledger.lock():
        recover_dead_runs(ledger)
        pending = [p.point_id for p in ledger.pending_points()]
        if not pending:
            return report
        used = [s.chunk for s in ledger.submissions()]
        chunk = Chunk(max(used) + 1 if used else 0, tuple(pending))
        token = new_token()
        write_chunk_file(prepared, chunk.number, chunk.point_ids)
        script = render_chunk_script(prepared, chunk.number, chunk.size, None, token)
        job_id = f"{LOCAL_PREFIX}{os.getpid()}-{token}"
        ledger.plan_chunk(chunk.point_ids, chunk.number, token=token, argv=["bash", str(script)])
        ledger.mark_submitted(token, job_id)
        report.chunks_submitted, report.points_submitted = 1, chunk.size
        report.job_ids.append(job_id)
        out_dir = prepared.submit_dir / prepared.job.output_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        workers = workers or os.cpu_count() or 1
        waiting = list(range(chunk.size))
        running: dict[int, tuple[subprocess.Popen[bytes], list[IO[bytes]]]] = {}
        finished = 0
        while waiting or running:
            while waiting and len(running) < workers:
                index = waiting.pop(0)
                stem = out_dir / f"{prepared.job.name}-{job_id}_{index}"
                files: list[IO[bytes]] = [open(f"{stem}.out", "wb"), open(f"{stem}.err", "wb")]  # noqa: SIM115 - closed below
                env = dict(os.environ, HPCJOBS_ARRAY_INDEX=str(index), HPCJOBS_JOB_ID=f"{job_id}_{index}")
                running[index] = (subprocess.Popen(["bash", str(script)], stdout=files[0], stderr=files[1],
                                                   env=env, cwd=prepared.submit_dir), files)
                ledger.record_status([JobStatus(f"{job_id}_{index}", states.RUNNING, "running",
                                                array_job_id=job_id, array_task_id=index)])
            ended = [(i, proc.returncode) for i, (proc, _) in running.items() if proc.poll() is not None]
            if not ended:
                time.sleep(0.05)
                continue
            records = []
            for index, rc in ended:
                for fh in running.pop(index)[1]:
                    fh.close()
                records.append(_record(job_id, index, rc))
            ledger.record_status(records)
            finished += len(ended)
            if progress:
                progress(finished, chunk.size)
    return report
