"""Reading single jobs' ledgers (``hpcjobs submit``): a job's record, finding it by job id, listing them.

A single job's ledger is a one-point sweep ledger in ``<sweep root>/jobs/<request id>/`` (see
:mod:`hpcjobs.sweep.singles`). ``jobs/index.tsv`` lists ``<job id> TAB <request id>`` for every job
recorded there, so :func:`find_single` maps a job id (Slurm ``1234``; PBS ``1234.server``, with or
without the server suffix) to its ledger by opening one ledger, not all of them; an id the index
lacks (one a status poll corrected, say) is looked for in every ledger. When a scheduler reuses an id
(its job counter was reset), the newest submission wins. The user's own index
(``<user cache>/single-jobs.tsv``: job id and ledger folder) finds a job submitted from another project
folder, so ``hpcjobs status 1234`` works from anywhere.

Nothing here imports pandas, pydantic or the templates: ``status``/``logs``/``cancel`` of a job id
stay light on a login node.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcjobs.errors import ConfigError, ConfigProblem, LedgerError, UnsafePathError
from hpcjobs.safe_files import open_own_file, read_regular
from hpcjobs.schedulers.client import SchedulerClient, client_for
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.sweep.identity import find_sweep_root, name_of, sweep_folders
from hpcjobs.sweep.ledger.store import Ledger, PointRecord
from hpcjobs.sweep.logs import single_job_log_paths

log = logging.getLogger("hpcjobs.sweep")

#: Single jobs' ledgers live in ``<sweep root>/jobs/<request id>/``.
SINGLES_DIR = "jobs"
#: ``meta.extra["kind"]`` of a single job's ledger.
KIND = "job"
#: ``<job id>\t<request id>`` lines, one per job recorded.
INDEX_FILE = "index.tsv"
#: Most bytes of an index read: its newest lines (about 500,000 jobs).
INDEX_MAX_BYTES = 64 * 1024 * 1024
#: ``<job id>\t<ledger folder>`` lines of every project, in the user's cache folder.
USER_INDEX_FILE = "single-jobs.tsv"
_LEDGER = "ledger.sqlite"
#: What a job id looks like: Slurm ``1234`` (``1234_5`` for an array task), PBS ``1234.server``,
#: ``12[].server``, ``12[3].server``.
JOB_ID_RE = re.compile(r"[0-9]+(?:_[0-9]+|\[[0-9]*\])?(?:\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)?")
#: The job ids hpcjobs chooses on Docker Swarm (the service name) and Kubernetes (``<namespace>/<chunk>``):
#: ``<experiment>-<sweep hash or x>-<chunk>-<tasks>[n][i]-<token>`` (the ``formats`` modules of
#: :mod:`hpcjobs.schedulers.swarm` and :mod:`hpcjobs.schedulers.kubernetes`).
CONTAINER_JOB_ID_RE = re.compile(r"(?:[a-z0-9][a-z0-9-]*/)?[A-Za-z0-9][A-Za-z0-9_-]*-(?:[0-9a-f]{8}|x)-\d+-\d+n?i?"
                                 r"-[0-9a-f]{8,32}")


def is_job_id(text: str) -> bool:
    """Whether ``text`` is spelled like a scheduler's job id (Slurm, PBS, or the Swarm/Kubernetes names)."""
    return bool(text) and (JOB_ID_RE.fullmatch(text) is not None or CONTAINER_JOB_ID_RE.fullmatch(text) is not None)
_REQUEST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def singles_root(root: str | Path | None = None) -> Path:
    """The folder of single jobs' ledgers: ``jobs/`` in the sweep root (found as for sweeps)."""
    return find_sweep_root(root).path / SINGLES_DIR


# ----------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class SingleJob:
    """A single job as its ledger knows it.

    Attributes:
        request_id: The request.
        folder: Its ledger folder.
        name: The job name.
        site: Site name.
        scheduler: Scheduler family.
        state: The job's state (``PLANNED`` before a first submission, ``SUBMITTED`` until a status poll).
        exit_code: Its exit code, once finished.
        state_raw: The scheduler's own word for the state at the last poll (``None`` before one).
        job_id: The scheduler's id of the current attempt.
        attempt: 1 for the first job, 2 after a resubmit, ...
        earlier: ``(job id, state)`` of earlier attempts, oldest first.
        token: The current attempt's submission token.
        created_at: When the request was first recorded.
        submitted_at: When the current attempt was planned.
        script: The current attempt's script.
        stdout: Its stdout file (``None``: the experiment's directives name it, or not submitted).
        stderr: Its stderr file.
        experiment_path: The experiment file.
    """

    request_id: str
    folder: Path
    name: str
    site: str
    scheduler: str
    state: str
    exit_code: int | None
    state_raw: str | None
    job_id: str | None
    attempt: int
    earlier: tuple[tuple[str, str], ...]
    token: str | None
    created_at: float
    submitted_at: float | None
    script: Path | None
    stdout: Path | None
    stderr: Path | None
    experiment_path: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"job_id": self.job_id, "request_id": self.request_id, "name": self.name, "site": self.site,
                "scheduler": self.scheduler, "state": self.state, "exit_code": self.exit_code,
                "state_raw": self.state_raw,
                "attempt": self.attempt, "earlier": [{"job_id": j, "state": s} for j, s in self.earlier],
                "created_at": self.created_at, "submitted_at": self.submitted_at,
                "script": self.script and str(self.script), "stdout": self.stdout and str(self.stdout),
                "stderr": self.stderr and str(self.stderr), "folder": str(self.folder),
                "experiment": self.experiment_path}


def single_job_of(ledger: Ledger, folder: Path) -> SingleJob:
    meta = ledger.meta
    extra = meta.extra
    point: PointRecord = ledger.points()[0]
    name = str(extra.get("name") or name_of(meta.sweep_id))
    sub = None
    if point.submission_token:
        try:
            sub = ledger.submission(point.submission_token)
        except LedgerError:
            sub = None
    out = err = script = None
    submit_dir, output_dir = str(extra.get("submit_dir") or ""), str(extra.get("output_dir") or "")
    if point.job_id and extra.get("default_logs", True) and submit_dir:
        out, err = single_job_log_paths(meta.scheduler, name, output_dir, point.job_id, submit_dir)
    if point.submission_token and submit_dir:
        script = Path(submit_dir) / output_dir / "scripts" / f"{name}.{point.submission_token}.sh"
    earlier = tuple((str(a["job_id"]), str(a["state"])) for a in ledger.attempts(point.point_id) if a.get("job_id"))
    return SingleJob(meta.sweep_id, folder, name, meta.site, meta.scheduler, point.state, point.exit_code,
                     point.state_raw, point.job_id, point.attempt, earlier, point.submission_token, meta.created_at,
                     sub.created_at if sub else None, script, out, err, meta.experiment_path)


def read_single(folder: str | Path) -> SingleJob | None:
    """The single job recorded in ``folder``, or ``None`` when the folder holds a sweep.

    Raises:
        LedgerError: No readable ledger there.
    """
    d = Path(folder)
    with Ledger.open(d, allow_read_only=True) as ledger:
        if ledger.meta.extra.get("kind") != KIND:
            return None
        return single_job_of(ledger, d)


# ----------------------------------------------------------------------------------------- job ids


def settle_exit_code(folder: str | Path, client: SchedulerClient | None = None) -> bool:
    """Ask the scheduler once more for a finished job whose exit code is not recorded yet.

    A job that ended seconds ago may be known only to ``squeue`` (accounting lags), which gives no
    exit code, and a status poll asks only about unfinished jobs: this asks about the finished one
    (one batched call; errors are logged, not raised).

    Returns:
        Whether the scheduler was asked.
    """
    from hpcjobs import states
    from hpcjobs.errors import HpcJobsError
    from hpcjobs.sweep.poll import poll_status

    d = Path(folder)
    with Ledger.open(d, allow_read_only=True) as ledger:
        meta = ledger.meta
        (point,) = ledger.points()[:1] or (None,)
        if (meta.extra.get("kind") != KIND or point is None or point.exit_code is not None or not point.job_id
                or point.state not in states.TERMINAL_STATES or capabilities_of(meta.scheduler).runs_here):
            return False
        if client is None:
            client = client_for(meta.scheduler)
        try:
            poll_status(ledger, client, active_only=False)
        except HpcJobsError as exc:
            log.warning("could not ask the scheduler for job %s's exit code: %s", point.job_id, exc)
        return True


def job_ids_match(a: str, b: str) -> bool:
    """Whether two spellings name the same job: the same sequence number (and array part); a PBS server
    suffix counts only when both have one, by its first label (``1234.srv`` = ``1234.srv.example.org``)."""
    head_a, _, server_a = a.strip().partition(".")
    head_b, _, server_b = b.strip().partition(".")
    if head_a != head_b or not head_a:
        return False
    return not server_a or not server_b or server_a.split(".")[0] == server_b.split(".")[0]


def index_job(base: Path, job_id: str, rid: str) -> None:
    """Append ``job_id -> rid`` to the index of ``base``, and ``job_id -> folder`` to the user's index
    (one ``write`` of one line each; a failure only costs a scan later)."""
    _append_line(base / INDEX_FILE, f"{job_id}\t{rid}\n")
    _append_line(_user_index(), f"{job_id}\t{(base / rid).resolve()}\n")


def _append_line(path: Path, line: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_own_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # never through a link
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except (OSError, UnsafePathError) as exc:
        log.warning("could not add a job to %s: %s", path, exc)


def _read_index(path: Path) -> str:
    """The last :data:`INDEX_MAX_BYTES` of an index (its newest lines), from a regular file only."""
    data = read_regular(path, INDEX_MAX_BYTES, tail=True)
    if len(data) == INDEX_MAX_BYTES:
        data = data[data.find(b"\n") + 1:]  # a line cut at the start of the window
    return data.decode("utf-8", errors="replace")


def _user_index() -> Path:
    """The user's index of single jobs of every project: ``<user cache>/single-jobs.tsv``."""
    from hpcjobs.config.sites import user_cache_dir

    return user_cache_dir() / USER_INDEX_FILE


def _by_user_index(job_id: str) -> Path | None:
    """A job submitted from another project: the newest folder the user's index lists for ``job_id``."""
    try:
        text = _read_index(_user_index())
    except (OSError, UnsafePathError):
        return None
    folders = [folder for line in text.splitlines() for jid, _, folder in [line.partition("\t")]
               if folder and job_ids_match(jid, job_id)]
    for folder in dict.fromkeys(reversed(folders)):
        d = Path(folder)
        if d.is_absolute() and (d / _LEDGER).is_file() and _submitted_at(d, job_id) is not None:
            return d
    return None


def _indexed(base: Path, job_id: str) -> list[str]:
    """Request ids the index lists for ``job_id``, newest first."""
    try:
        text = _read_index(base / INDEX_FILE)
    except (OSError, UnsafePathError):
        return []
    hits = []
    for line in text.splitlines():
        jid, _, rid = line.partition("\t")
        if rid and job_ids_match(jid, job_id) and _REQUEST_RE.fullmatch(rid):
            hits.append(rid)
    return list(dict.fromkeys(reversed(hits)))


def _submitted_at(folder: Path, job_id: str) -> float | None:
    """When the ledger in ``folder`` planned a submission that became ``job_id`` (``None``: it has none)."""
    try:
        with Ledger.open(folder, allow_read_only=True) as ledger:
            times = [s.created_at for s in ledger.submissions() if s.job_id and job_ids_match(s.job_id, job_id)]
    except LedgerError:
        return None
    return max(times) if times else None


def _by_job_id(base: Path, job_id: str) -> Path | None:
    for rid in _indexed(base, job_id):
        if _submitted_at(base / rid, job_id) is not None:
            return base / rid
    found = {rid: t for rid in sweep_folders(base) if (t := _submitted_at(base / rid, job_id)) is not None}
    return base / max(found, key=lambda r: found[r]) if found else None


def find_single(text: str, root: str | Path | None = None) -> Path | None:
    """The ledger folder of a single job given by job id, request id or job name; ``None`` when none matches.

    A job id (``1234``, ``1234.server``) beats a request id, which beats a name. A name used by
    several requests is ambiguous. A job id recorded under another sweep root (submitted from
    another project) is found through the user's index (``<user cache>/single-jobs.tsv``).

    Args:
        text: What the user typed.
        root: The sweep root (its ``jobs/`` folder is searched).

    Raises:
        IdArgumentError: ``text`` is empty or blank (:func:`hpcjobs.ids.check_id_argument`).
        ConfigError: A name several single jobs share (the candidates are listed with their job ids).
    """
    from hpcjobs.ids import check_id_argument

    check_id_argument(text, what="job")
    base = find_sweep_root(root).path / SINGLES_DIR
    job_id = is_job_id(text)
    if not base.is_dir():
        return _by_user_index(text) if job_id else None
    if job_id:
        hit = _by_job_id(base, text) or _by_user_index(text)
        if hit is not None:
            return hit
    if _REQUEST_RE.fullmatch(text) and _has_ledger(base / text):
        return base / text
    named = [r for r in sweep_folders(base) if name_of(r) == text]
    if len(named) == 1:
        return base / named[0]
    if named:
        choices = []
        for r in named:
            job = _safe_read(base / r)
            choices.append(f"{job.job_id} ({r})" if job and job.job_id else r)
        raise ConfigError(ConfigProblem(f"{len(named)} jobs are named {text!r} in {base}: give a job id",
                                        key="job", choices=tuple(choices)))
    return None


def _has_ledger(folder: Path) -> bool:
    try:
        return (folder / _LEDGER).is_file()
    except (OSError, ValueError):  # a name too long for the file system
        return False


def sweep_job_hint(text: str, root: str | Path | None = None) -> str | None:
    """When ``text`` is the id of one of a sweep's jobs (an array, ``1234``, ``12[].server``, or one of
    its tasks, ``1234_5``, ``12[5].server``): which sweep it belongs to, in words; else ``None``.

    A sweep's job id is not resolved to the sweep (``cancel 1234_5`` must not cancel a whole sweep):
    the message names the sweep to use instead. Reads every sweep ledger: for error messages only.
    """
    if not JOB_ID_RE.fullmatch(text or ""):
        return None
    head, dot, server = text.partition(".")
    array = re.sub(r"\[\d+\]$", "[]", re.sub(r"_\d+$", "", head)) + dot + server
    base = find_sweep_root(root).path
    for sweep in sweep_folders(base):
        try:
            with Ledger.open(base / sweep, allow_read_only=True) as ledger:
                hit = next((s for s in ledger.submissions() if s.job_id and job_ids_match(s.job_id, array)), None)
        except LedgerError:
            continue
        if hit is not None:
            return (f"job {text} is of sweep {sweep} (chunk {hit.chunk}): hpcjobs status {sweep}, "
                    f"hpcjobs logs {sweep} --index N")
    return None


def _safe_read(folder: Path) -> SingleJob | None:
    try:
        return read_single(folder)
    except LedgerError:
        return None


# ----------------------------------------------------------------------------------------- listing


@dataclass(frozen=True)
class SingleRow:
    """One line of ``hpcjobs ls --jobs``: the job, and when its state was true."""

    job: SingleJob
    as_of: float
    polled: bool
    poll_error: str | None = None


def count_singles(root: str | Path | None = None) -> int:
    """How many single jobs are recorded under the sweep root (no ledger is opened)."""
    return len(sweep_folders(singles_root(root)))


def list_singles(root: str | Path | None = None, *, poll: bool = False,
                 client_for: Callable[[str], SchedulerClient] | None = None) -> tuple[Path, list[SingleRow]]:
    """Every single job under the sweep root, oldest first; with ``poll``, the live ones asked of the
    scheduler first in one batched call per scheduler family (the sweep listing's code).

    Returns:
        The folder searched and its rows.
    """
    from hpcjobs.sweep.listing import list_sweeps

    base = singles_root(root)
    if not base.is_dir():
        return base, []
    listing = list_sweeps(base, poll=poll, client_for=client_for)
    rows = []
    for s in listing.sweeps:
        job = _safe_read(s.folder)
        if job is not None:
            rows.append(SingleRow(job, s.as_of, s.polled, s.poll_error))
    return base, rows


__all__ = ["CONTAINER_JOB_ID_RE", "INDEX_FILE", "JOB_ID_RE", "KIND", "SINGLES_DIR", "SingleJob", "SingleRow",
           "count_singles", "find_single", "index_job", "is_job_id", "job_ids_match", "list_singles", "read_single",
           "settle_exit_code", "single_job_of", "singles_root", "sweep_job_hint"]
