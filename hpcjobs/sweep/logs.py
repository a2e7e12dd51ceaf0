"""Where each point's stdout and stderr are, and reading them (``hpcjobs logs``; the selection is
:mod:`hpcjobs.sweep.log_files`).

The array script of a sweep sends a task's output, from the point's own setup on, to its run folder
(``points/<point_id>/stdout.log`` and ``stderr.log``, appended: a resubmitted or requeued attempt adds
to them, after a header line in ``stderr.log``). The scheduler's own files
(``<output_dir>/<name>-<array job>_<index>.out`` on Slurm and the local site,
``<output_dir>/<sweep>.<chunk>.<index>.out`` on PBS Pro) are kept: they hold what happened before
the script reached the point's setup (a node that could not start it, a missing chunk file).

A single job (``hpcjobs submit``, recorded by :mod:`hpcjobs.sweep.singles`) has no run folder: its
logs are the files its directives name (:func:`single_job_log_paths`), and ``hpcjobs logs JOB_ID``
shows those of the attempt that job id names.

Nothing here imports pandas.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.errors import UnsafePathError, printable
from hpcjobs.safe_files import read_regular, read_regular_range

#: A point's run folder is ``<sweep>/points/<point_id>``.
POINTS_DIR = "points"
#: The point's stdout and stderr, in its run folder.
LOG_OUT = "stdout.log"
LOG_ERR = "stderr.log"
#: Bytes read from the end of a log for ``--tail``.
TAIL_MAX_BYTES = 4 * 1024 * 1024


#: A file that is not read: a link out of its folder, not a regular file, or larger than the bound.
BoundedReadError = UnsafePathError


def read_bounded(path: Path, max_bytes: int, *, tail: bool = False, inside: Path | None = None) -> bytes:
    """At most ``max_bytes`` of a regular file (:func:`hpcjobs.safe_files.read_regular`).

    Raises:
        FileNotFoundError: No such file.
        BoundedReadError: Not a regular file, larger than ``max_bytes`` (without ``tail``), or a link
            that leads outside ``inside``.
        OSError: Unreadable.
    """
    return read_regular(path, max_bytes, tail=tail, inside=inside)


@dataclass(frozen=True)
class PointLogs:
    """The log files of one point.

    Attributes:
        point_id: The point.
        index: Its index in the sweep.
        state: Its state in the ledger.
        exit_code: Its exit code, if finished.
        job_id: Its (last) job id.
        params: Its parameters.
        stdout: ``points/<id>/stdout.log``.
        stderr: ``points/<id>/stderr.log``.
        scheduler_out: The scheduler's stdout file of its last job, where it can be named.
        scheduler_err: The scheduler's stderr file.
        single: A single job of ``hpcjobs submit`` (its files are those its directives name).
        folder: The sweep folder, which the run folder's logs must stay in (a link out of it is
            not followed); ``None``: each file must stay in its own folder.
    """

    point_id: str
    index: int
    state: str
    exit_code: int | None
    job_id: str | None
    params: dict[str, object]
    stdout: Path
    stderr: Path
    scheduler_out: Path | None
    scheduler_err: Path | None
    single: bool = False
    folder: Path | None = None

    def inside(self, path: Path) -> Path:
        """The folder ``path`` (one of :meth:`files`) must stay in when it is read."""
        if self.folder is not None and path in (self.stdout, self.stderr):
            return self.folder
        return path.parent

    def files(self, which: str = "both") -> list[tuple[str, Path]]:
        """The files to show, as ``(label, path)``: the run folder's, and the scheduler's where they exist.

        Args:
            which: ``out``, ``err`` or ``both``.
        """
        out: list[tuple[str, Path]] = []
        for stream, own, sched in (("out", self.stdout, self.scheduler_out), ("err", self.stderr, self.scheduler_err)):
            if which not in (stream, "both"):
                continue
            if sched is not None and sched.is_file() and sched.stat().st_size > 0:
                out.append((f"scheduler std{stream}", sched))
            if own.is_file() or sched is None or not sched.is_file():
                out.append((f"std{stream}", own))
        return out


def scheduler_log_stem(scheduler: str, *, submit_dir: str | None, output_dir: str | None, name: str,
                       sweep_id: str, chunk: int | None, array_job_id: str | None,
                       array_index: int | None) -> Path | None:
    """The scheduler's output file of one array task, without ``.out``/``.err`` (``None``: cannot be named)."""
    if not (submit_dir and output_dir) or array_index is None:
        return None
    from hpcjobs.schedulers.registry import get_backend

    return get_backend(scheduler).array_log_stem(Path(submit_dir) / output_dir, name, sweep_id, chunk, array_job_id,
                                                 array_index)


def single_job_log_paths(scheduler: str, name: str, output_dir: str, job_id: str,
                         submit_dir: str | Path) -> tuple[Path, Path]:
    """The stdout and stderr files of a single (non-array) job, as hpcjobs's generated directives name them.

    Slurm: ``<output_dir>/<name>-<job id>.out`` (``--output=<output_dir>/%x-%j.out``); PBS Pro and
    Torque: ``<output_dir>/<name>.out`` (``-o``; copied there when the job ends, unless the site
    writes directly); Docker Swarm and Kubernetes: ``<output_dir>/<name>-<service or chunk name>.out``
    (the script sends its output there, in the mounted submit directory); relative to the submit directory.
    Each backend names its stem (:meth:`~hpcjobs.schedulers.base.BaseBackend.single_log_stem`).
    """
    from hpcjobs.schedulers.registry import get_backend

    stem = get_backend(scheduler).single_log_stem(name, job_id)
    base = Path(submit_dir) / output_dir
    return base / f"{stem}.out", base / f"{stem}.err"


def _logs_by_command(scheduler: str) -> bool:
    from hpcjobs.schedulers.registry import capabilities_of

    return capabilities_of(scheduler).logs_command


def log_command(scheduler: str, job_id: str) -> str:
    """The command that shows what a Swarm service or a Kubernetes chunk printed (``""`` for other schedulers)."""
    import shlex

    from hpcjobs.schedulers.registry import get_backend

    if not _logs_by_command(scheduler):
        return ""
    return shlex.join(get_backend(scheduler).logs_argv(job_id))


def tail_text(path: Path, lines: int | None, *, max_bytes: int = TAIL_MAX_BYTES, inside: Path | None = None) -> str:
    """The last ``lines`` lines of a file (all of it: ``None``), reading at most its last ``max_bytes``.

    A missing or unreadable file is an empty text. One that is not read (a FIFO, a device, a link
    out of ``inside``) is a line saying why, so the reader is not left with an empty section.
    """
    try:
        data = read_bounded(path, max_bytes, tail=True, inside=inside)
    except BoundedReadError as exc:
        return f"hpcjobs: not shown: {printable(str(exc))}\n"
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if lines is None:
        return text
    if lines <= 0:
        return ""
    kept = text.splitlines(keepends=True)[-lines:]
    return "".join(kept)


def follow(paths: Sequence[Path], *, interval: float = 1.0, stop: Callable[[], bool] = lambda: False,
           sleep: Callable[[float], None] = time.sleep, from_end: bool = True,
           inside: Mapping[Path, Path] | None = None) -> Iterator[tuple[Path, str]]:
    """Yield ``(path, new text)`` as the files grow, like ``tail -f`` on several files, until ``stop()``.

    A file that does not exist yet is waited for; one that shrinks (truncated, replaced) is read again
    from its start.

    Args:
        paths: The files.
        interval: Seconds between looks.
        stop: Checked after each look; true ends the iteration.
        sleep: Injected for tests.
        from_end: Start at each file's current end (else at its start).
        inside: The folder each file must stay in (a file that leads out of it, or is not a
            regular file, is not read).
    """
    offsets: dict[Path, int] = {}
    for p in paths:
        try:
            offsets[p] = p.stat().st_size if from_end else 0
        except OSError:
            offsets[p] = 0
    while True:
        for p in paths:
            try:
                size = p.stat().st_size
            except OSError:
                continue
            if size < offsets[p]:
                offsets[p] = 0
            if size > offsets[p]:
                try:
                    data = read_regular_range(p, offsets[p], min(size - offsets[p], TAIL_MAX_BYTES),
                                              inside=None if inside is None else inside.get(p))
                except (OSError, UnsafePathError):
                    continue
                offsets[p] += len(data)
                yield p, data.decode("utf-8", errors="replace")
        if stop():
            return
        sleep(interval)


def run_folder_lines() -> tuple[str, ...]:
    """Lines of the array script that make the point's run folder and write ``params.json`` and its logs there.

    Nothing is written through a link: a ``points`` folder or run folder that is a symbolic link
    fails the point with a message, and a link where ``params.json`` or a log goes (from a tarball, a
    copied folder) is removed first, so the job writes its own file and not the one linked to.
    """
    return (
        'export HPCJOBS_RUN_DIR="$HPCJOBS_SWEEP_DIR/points/$HPCJOBS_POINT_ID"',
        'for _hpcjobs_d in "$HPCJOBS_SWEEP_DIR/points" "$HPCJOBS_RUN_DIR"; do',
        '    if [ -L "$_hpcjobs_d" ]; then',
        "        printf 'hpcjobs: %s is a symbolic link; a run folder must be a real folder\\n' \"$_hpcjobs_d\" >&2",
        "        exit 1",
        "    fi",
        "done",
        'mkdir -p -- "$HPCJOBS_RUN_DIR"',
        f"for _hpcjobs_f in params.json {LOG_OUT} {LOG_ERR}; do",
        '    if [ -L "$HPCJOBS_RUN_DIR/$_hpcjobs_f" ]; then rm -f -- "$HPCJOBS_RUN_DIR/$_hpcjobs_f"; fi',
        "done",
        "printf '%s\\n' \"$HPCJOBS_PARAMS_JSON\" > \"$HPCJOBS_RUN_DIR/params.json\"",
        *point_log_preamble(),
    )


def point_log_preamble() -> tuple[str, ...]:
    """Lines of the array script that send the point's output to its run folder (after ``mkdir`` of it).

    A header line naming the job goes to ``stderr.log`` first, and a pointer to the files to the
    scheduler's own stdout, so both places tell where the output went.
    """
    return (
        f'printf \'hpcjobs: point %s: stdout and stderr go to %s/{LOG_OUT} and {LOG_ERR}\\n\' '
        '"$HPCJOBS_POINT_ID" "$HPCJOBS_RUN_DIR"',
        f'exec >>"$HPCJOBS_RUN_DIR/{LOG_OUT}" 2>>"$HPCJOBS_RUN_DIR/{LOG_ERR}"',
        "printf '=== hpcjobs: job %s on %s at %s ===\\n' \"${HPCJOBS_JOB_ID:-${SLURM_JOB_ID:-${PBS_JOBID:-?}}}\" "
        "\"$(hostname 2>/dev/null || echo '?')\" \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" >&2",
    )


__all__ = [
    "LOG_ERR",
    "LOG_OUT",
    "POINTS_DIR",
    "BoundedReadError",
    "PointLogs",
    "follow",
    "log_command",
    "point_log_preamble",
    "read_bounded",
    "run_folder_lines",
    "scheduler_log_stem",
    "single_job_log_paths",
    "tail_text",
]
