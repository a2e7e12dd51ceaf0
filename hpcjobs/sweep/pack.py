"""Packed sweeps (the experiment's ``pack:``): several points per array task, and their states.

**Submission.** A chunk of N points packed K per task is an array of ``ceil(N / K)`` tasks; task t
runs the points at chunk indices ``K*t .. K*t+K-1`` (:func:`packed_array_job`, rendered with
:class:`hpcjobs.render.pack.PackPlan` by ``templates/pack.sh.j2``). In the ledger each point keeps
its own row; its ``array_index`` is its task's index (``position // K``, :meth:`Ledger.plan_chunk`'s
``pack``), so a status poll's record of task t reaches the K points of that task unchanged.

**States.** A task's state is not each of its points' state: a task killed while its last point
ran had finished the others. The task writes each point's exit status to
``points/<id>/hpcjobs-exit.<token>`` when the point ends; after every poll, :func:`refine_packed`
reads those files for the points of the polled submissions and corrects what the task's state said:

- an exit file with status 0: ``COMPLETED``, whatever happened to the task later;
- an exit file with another status: ``FAILED`` with that exit code, except a status above 128 (a
  signal) in a task that ended ``CANCELLED``/``TIMEOUT``/... : the task's state (it was killed);
- no exit file: the task's state (``RUNNING``, ``PENDING``; a task that ended ``COMPLETED``
  without one, which the packed script never does, is ``FAILED``).

``hpcjobs resubmit`` then resets only the points that did not complete, and they are packed again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs import states
from hpcjobs.config.pack import Pack
from hpcjobs.render.pack import EXIT_FILE_PREFIX, PackPlan, exit_file_name
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.resolve import ResolvedJob
from hpcjobs.schedulers.base import ArraySpec

if TYPE_CHECKING:
    from hpcjobs.sweep.ledger.store import Ledger
    from hpcjobs.sweep.prepare import PreparedSweep

__all__ = ["EXIT_FILE_PREFIX", "active_pack", "chunk_pack_plan", "exit_files", "pack_size",
           "packed_array_job", "packed_tokens", "point_outcome", "read_exit", "refine_packed",
           "tasks_for"]

#: Point states an exit file can correct (a point that has not started has none).
_REFINED = frozenset(states.TERMINAL_STATES | {states.RUNNING, states.COMPLETING, states.SUSPENDED})


def active_pack(prepared: PreparedSweep) -> Pack | None:
    """The experiment's ``pack:`` where the site's scheduler packs points (its ``packing`` capability),
    else ``None`` (run unpacked: the local runner, Swarm and Kubernetes run one point per task)."""
    from hpcjobs.schedulers.registry import capabilities_of

    pack = prepared.experiment.pack
    return pack if pack is not None and capabilities_of(prepared.site.scheduler).packing else None


def pack_size(prepared: PreparedSweep) -> int:
    """Points per array task: the experiment's ``pack`` size, else 1."""
    pack = active_pack(prepared)
    return pack.size if pack is not None else 1


def tasks_for(points: int, size: int) -> int:
    """Array tasks for ``points`` points packed ``size`` per task."""
    return -(-points // max(1, size))


def _point_setup(chunk: int) -> tuple[str, ...]:
    from hpcjobs.sweep.logs import run_folder_lines

    return (
        'export HPCJOBS_ARRAY_INDEX="${HPCJOBS_PACK_INDEX:?not a point of a packed task}"',
        "# shellcheck source=/dev/null",
        f'source "$HPCJOBS_SWEEP_DIR/chunks/{chunk}.env"',
        *run_folder_lines(),
    )


def packed_array_job(prepared: PreparedSweep, chunk: int, size: int, throttle: int | None,
                     job: ResolvedJob, extra_directives: tuple[str, ...]) -> ResolvedJob:
    """The array job of a packed chunk of ``size`` points: ``ceil(size / K)`` tasks.

    The job's ``setup`` starts with the point's own preamble (its parameters by chunk index
    ``$HPCJOBS_PACK_INDEX``, its run folder and logs): it runs inside ``hpcjobs_point``, once per point.
    """
    tasks = tasks_for(size, pack_size(prepared))
    return replace(job, setup=_point_setup(chunk) + job.setup, array=ArraySpec(0, tasks - 1, throttle=throttle),
                   extra_directives=job.extra_directives + extra_directives)


def chunk_pack_plan(prepared: PreparedSweep, chunk: int, token: str, job: ResolvedJob) -> PackPlan | None:
    """What ``templates/pack.sh.j2`` needs for chunk ``chunk`` submitted under ``token`` (``None``: not packed)."""
    pack = active_pack(prepared)
    if pack is None:
        return None
    k = pack.size
    cpus = job.tasks_per_node * job.cpus_per_task
    gpus = job.gpus_per_node
    memory = job.memory_per_node // (1 << 20) if job.memory_per_node else None
    if pack.per_node is not None:
        cpus, gpus = max(1, cpus // k), gpus // k
        memory = memory // k if memory else None
    else:
        memory = None
    folder = shell_word(prepared.job_folder)
    task_setup = (
        f"export HPCJOBS_SWEEP_ID={shell_word(prepared.sweep_id)} HPCJOBS_SWEEP_DIR={folder}",
        f"export HPCJOBS_CHUNK={chunk} HPCJOBS_TOKEN={shell_word(token)} HPCJOBS_PACK_SIZE={k}",
    )
    return PackPlan(pack.mode, k, cpus, gpus, memory or None, task_setup, f'"$HPCJOBS_SWEEP_DIR/chunks/{chunk}.ids"')


def read_exit(run_dir: Path, token: str) -> int | None:
    """The exit status a packed task recorded for a point of submission ``token``, or ``None`` (none yet)."""
    try:
        text = (run_dir / exit_file_name(token)).read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    try:
        return int(text.strip().splitlines()[0])
    except (ValueError, IndexError):
        return None


def point_outcome(task_state: str, task_raw: str | None, task_code: int | None,
                  exit_code: int | None) -> tuple[str, str | None, int | None]:
    """A packed point's ``(state, raw state, exit code)`` from its task's record and its exit file.

    Args:
        task_state: The normalised state the poll gave the point's task.
        task_raw: The scheduler's own spelling of it.
        task_code: The task's exit code.
        exit_code: The point's recorded exit status, ``None`` when it has no exit file.
    """
    if exit_code is not None:
        if exit_code == 0:
            return states.COMPLETED, "COMPLETED (point)", 0
        killed = task_state in states.FAILURE_STATES and task_state != states.FAILED
        if exit_code > 128 and killed:
            return task_state, task_raw, exit_code
        return states.FAILED, "FAILED (point)", exit_code
    if task_state == states.COMPLETED:
        return states.FAILED, "FAILED (point: no exit status)", task_code
    return task_state, task_raw, task_code


def refine_packed(ledger: Ledger, folder: Path, tokens: Iterable[str],
                  exit_of: Callable[[Path, str], int | None] | None = None) -> int:
    """Correct the points of the polled packed submissions ``tokens`` from their exit files.

    Only points whose task started (``RUNNING`` or ended) are read: one small file per point, by
    ``exit_of(run folder, token)`` (default :func:`read_exit`; a sweep on a login node reads them there in
    one session, :func:`hpcjobs.sweep.remote.remote_exit_reader`).

    Returns:
        How many points changed.
    """
    wanted = list(tokens)
    if not wanted:
        return 0
    rows = ledger.points_of_submissions(wanted, sorted(_REFINED))
    outcomes: list[tuple[str, str, str, str | None, int | None]] = []
    base = Path(folder) / "points"
    for pid, token, state, raw, code in rows:
        if state == states.COMPLETED and raw == "COMPLETED (point)":
            continue  # settled by its exit file already
        new = point_outcome(state, raw, code, (exit_of or read_exit)(base / pid, token))
        if new != (state, raw, code):
            outcomes.append((pid, token, *new))
    return ledger.set_point_outcomes(outcomes) if outcomes else 0


def packed_tokens(ledger: Ledger, subs: Sequence[Any]) -> list[str]:
    """The tokens of ``subs`` when the sweep is packed (recorded in the ledger's settings), else none."""
    if not ledger.meta.extra.get("pack"):
        return []
    return [s.token for s in subs]


def exit_files(run_dir: Path) -> list[str]:
    """Names of the exit-status files in a point's run folder (tests and ``hpcjobs logs``)."""
    try:
        return sorted(n for n in os.listdir(run_dir) if n.startswith(EXIT_FILE_PREFIX))
    except OSError:
        return []
