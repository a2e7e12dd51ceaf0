"""The per-sweep ledger: a crash-safe record of every point and every submission attempt.

Lives in ``<sweep_dir>/ledger.sqlite``. Every state change is one SQLite transaction opened with
``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers never interleave a
read-check-write), in WAL mode with ``synchronous=FULL``: a commit is on disk before the call
returns, so a ``kill -9`` (or a power cut) at any moment leaves the ledger as it was after the
last completed call. ``NORMAL`` would survive a kill but could lose the last commits on power
loss, and the one commit that must never be lost is "about to call sbatch"; commits are few (one
per chunk, one per status poll), so the fsync costs nothing that matters.

On a network filesystem (NFS, Lustre, GPFS, ...) WAL is unsafe (its shared-memory index only
works between processes of one host), so the ledger uses the rollback journal there (detected
from ``/proc/self/mountinfo``; ``HPCJOBS_LEDGER_JOURNAL=wal|delete`` forces a choice).

**The protocol** (what the submitter does, and why a crash anywhere is harmless)::

    token = new_token()                       # goes into the job's comment: hpcjobs:<sweep>:<chunk>:<token>
    ledger.plan_chunk(ids, chunk, token=token, argv=argv)   # points PLANNED -> SUBMITTING, row 'submitting'
    run sbatch ...                            # the only step outside the ledger
    ledger.mark_submitted(token, job_id)      # or mark_failed (refused for sure) / mark_unknown (timed out)

After a crash, :meth:`Ledger.unresolved_submissions` lists the rows left ``submitting`` or
``unknown``: the job may or may not exist. The submitter looks for the token in the scheduler
(one squeue/sacct call for all of them) and then calls ``mark_submitted`` (found) or
``mark_failed`` (not found: the points return to PLANNED). Points are only ever submitted from
PLANNED, and :meth:`Ledger.plan_chunk` refuses any other state inside its transaction, so even two
submitters that both ignored the lock could not submit a point twice.

**Schema** (``schema_version`` 1):

- ``sweep``: one row: ``sweep_id``, ``created_at``/``updated_at`` (Unix seconds),
  ``experiment_path``, ``experiment_sha256`` (of the file's text), ``site``, ``scheduler``,
  ``n_points``, ``extra_json`` (the submitter's own settings).
- ``points``: ``point_id`` (key), ``idx`` (expansion index), ``params_json``, ``state``,
  ``attempt`` (1, +1 per resubmission), ``submission_token``, ``chunk``, ``array_job_id``,
  ``array_index``, ``job_id`` (the task's own id once a status poll reports it), ``state_raw``,
  ``exit_code``, ``updated_at``.
- ``submissions``: one row per attempt to submit a chunk: ``token`` (key), ``chunk``, ``state``
  (``submitting`` → ``submitted`` | ``failed`` | ``unknown``; ``unknown`` → ``submitted`` |
  ``failed``), ``is_array``, ``first_index``, ``n_points``, ``job_id``, ``argv_json``,
  ``stderr``, ``created_at``, ``updated_at``.
- ``submission_points``: which points (with their array index and attempt) each submission carried.
- ``point_attempts``: the final record of each earlier attempt of a resubmitted point.

Point states: ``PLANNED`` (never submitted, or released after a failed submission),
``SUBMITTING`` (in a submission not yet resolved), ``SUBMITTED`` (accepted, no status yet), then
the normalised scheduler states of :mod:`hpcjobs.states`, and ``REMOVED`` (dropped from the sweep
by a forced re-plan before it was ever submitted).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hpcjobs.errors import LedgerError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.states import ALL_STATES, TERMINAL_STATES

SCHEMA_VERSION = 1
LEDGER_FILE = "ledger.sqlite"
LOCK_FILE = "lock"

PLANNED = "PLANNED"
SUBMITTING = "SUBMITTING"
SUBMITTED = "SUBMITTED"
REMOVED = "REMOVED"
#: Every point state, ledger-only ones first.
POINT_STATES: tuple[str, ...] = (PLANNED, SUBMITTING, SUBMITTED, REMOVED, *ALL_STATES)

SUB_SUBMITTING = "submitting"
SUB_SUBMITTED = "submitted"
SUB_FAILED = "failed"
SUB_UNKNOWN = "unknown"
UNRESOLVED = (SUB_SUBMITTING, SUB_UNKNOWN)

_TOKEN_RE = re.compile(r"^[0-9a-f]{8,32}$")
_SWEEP_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "beegfs", "ceph", "fuse.sshfs",
                         "9p", "afs", "glusterfs", "fuse.glusterfs", "panfs", "wekafs", "fuse.ceph"})

_STATE_LIST = ", ".join(f"'{s}'" for s in POINT_STATES)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sweep (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  sweep_id TEXT NOT NULL,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  experiment_path TEXT NOT NULL,
  experiment_sha256 TEXT NOT NULL,
  site TEXT NOT NULL,
  scheduler TEXT NOT NULL,
  n_points INTEGER NOT NULL,
  extra_json TEXT NOT NULL DEFAULT '{{}}'
);
CREATE TABLE IF NOT EXISTS submissions (
  token TEXT PRIMARY KEY,
  chunk INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('submitting', 'submitted', 'failed', 'unknown')),
  is_array INTEGER NOT NULL,
  first_index INTEGER NOT NULL,
  n_points INTEGER NOT NULL,
  job_id TEXT,
  argv_json TEXT,
  stderr TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
  point_id TEXT PRIMARY KEY,
  idx INTEGER NOT NULL UNIQUE,
  params_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ({_STATE_LIST})),
  attempt INTEGER NOT NULL DEFAULT 1,
  submission_token TEXT REFERENCES submissions(token),
  chunk INTEGER,
  array_job_id TEXT,
  array_index INTEGER,
  job_id TEXT,
  state_raw TEXT,
  exit_code INTEGER,
  updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS points_state ON points(state);
CREATE INDEX IF NOT EXISTS points_token ON points(submission_token);
CREATE TABLE IF NOT EXISTS submission_points (
  token TEXT NOT NULL REFERENCES submissions(token),
  point_id TEXT NOT NULL REFERENCES points(point_id),
  array_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  PRIMARY KEY (token, point_id)
);
CREATE INDEX IF NOT EXISTS submission_points_point ON submission_points(point_id);
CREATE TABLE IF NOT EXISTS point_attempts (
  point_id TEXT NOT NULL REFERENCES points(point_id),
  attempt INTEGER NOT NULL,
  submission_token TEXT,
  chunk INTEGER,
  array_job_id TEXT,
  array_index INTEGER,
  job_id TEXT,
  state TEXT NOT NULL,
  state_raw TEXT,
  exit_code INTEGER,
  recorded_at REAL NOT NULL,
  PRIMARY KEY (point_id, attempt)
);
"""


class PointLike(Protocol):
    """What the ledger needs of a point (:class:`hpcjobs.sweep.expand.Point` has it)."""

    index: int
    point_id: str
    params_json: str


def new_token() -> str:
    """A fresh random submission token (16 hex digits), for the job tag and :meth:`Ledger.plan_chunk`."""
    return secrets.token_hex(8)


def experiment_sha256(text: str | bytes) -> str:
    """The SHA-256 (hex) of an experiment file's text, as stored in :class:`SweepMeta`."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


@dataclass(frozen=True)
class SweepMeta:
    """What a sweep is: stored once when the ledger is created.

    Attributes:
        sweep_id: The sweep's id (letters, digits, ``_ . -``: it goes into job tags).
        experiment_path: The experiment file the sweep came from.
        experiment_sha256: SHA-256 of that file's text (:func:`experiment_sha256`).
        site: Site name.
        scheduler: Scheduler family (``slurm``, ``pbspro``, ``torque``, ``local``).
        extra: Free JSON-able settings of the submitter (chunk size, throttle, overrides, ...).
        created_at: Unix time of creation (set by the ledger).
    """

    sweep_id: str
    experiment_path: str
    experiment_sha256: str
    site: str
    scheduler: str
    extra: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True)
class PointRecord:
    """One point as the ledger knows it (see the module docs for the fields)."""

    point_id: str
    index: int
    params_json: str
    state: str
    attempt: int
    submission_token: str | None
    chunk: int | None
    array_job_id: str | None
    array_index: int | None
    job_id: str | None
    state_raw: str | None
    exit_code: int | None
    updated_at: float

    @property
    def params(self) -> dict[str, Any]:
        """The point's parameters."""
        return dict(json.loads(self.params_json))


@dataclass(frozen=True)
class Submission:
    """One attempt to submit a chunk.

    Attributes:
        token: Random id of the attempt (in the job's tag).
        chunk: Chunk number within the sweep.
        state: ``submitting``, ``submitted``, ``failed`` or ``unknown``.
        is_array: Submitted as a job array (else a single job of one point).
        first_index: Array index of the first point (points get ``first_index + position``).
        point_ids: The points it carries, in array-index order.
        job_id: The scheduler's id (the array job id), once known.
        argv: The submit command, if recorded.
        stderr: The scheduler's error output, for failed/unknown attempts.
        created_at: When it was planned (Unix time).
        updated_at: Last change (Unix time).
    """

    token: str
    chunk: int
    state: str
    is_array: bool
    first_index: int
    point_ids: tuple[str, ...]
    job_id: str | None
    argv: list[str] | None
    stderr: str | None
    created_at: float
    updated_at: float


# ----------------------------------------------------------------------------------------- the lock

class SubmitterLock:
    """The exclusive right to submit a sweep: ``fcntl.flock`` on ``<sweep_dir>/lock``.

    The kernel drops the lock when its holder exits, however it dies, so there is nothing stale to
    clean up. The holder's PID, host and start time are written into the file for the message
    another submitter gets. (The descriptor is not inherited by child processes.)
    """

    def __init__(self, sweep_dir: str | Path, sweep_id: str | None = None) -> None:
        self.path = Path(sweep_dir) / LOCK_FILE
        self.sweep_id = sweep_id or Path(sweep_dir).name
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> SubmitterLock:
        """Take the lock without waiting.

        Raises:
            LedgerError: Another process holds it ("sweep X is being submitted by PID N on host H").
        """
        if self._fd is not None:
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LedgerError(f"cannot open the sweep lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            who = (f"PID {holder.get('pid', '?')} on host {holder.get('host', '?')}" if holder
                   else "another process")
            since = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder['since']))}" if holder.get(
                "since") else ""
            raise LedgerError(f"sweep {self.sweep_id} is being submitted by {who}{since}; "
                              "wait for it to finish or stop it first") from None
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (info + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back (a no-op when not held)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> SubmitterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        return dict(json.loads(data)) if data else {}
    except (OSError, ValueError):
        return {}


# --------------------------------------------------------------------------------------- connection

def _fs_type(path: Path) -> str | None:
    """The filesystem type holding ``path`` (Linux ``/proc/self/mountinfo``), if known."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    best, fstype = -1, None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) > best:
            best, fstype = len(mount), right.split()[0]
    return fstype


def choose_journal_mode(sweep_dir: Path) -> str:
    """``wal``, or ``delete`` on a network filesystem (or as ``HPCJOBS_LEDGER_JOURNAL`` says)."""
    forced = os.environ.get("HPCJOBS_LEDGER_JOURNAL", "").strip().lower()
    if forced in ("wal", "delete"):
        return forced
    fstype = _fs_type(sweep_dir)
    return "delete" if fstype and (fstype in _NETWORK_FS or fstype.startswith("nfs")) else "wal"


def _connect(path: Path, journal: str) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        con.execute(f"PRAGMA journal_mode={journal}")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open the sweep ledger {path}: {exc}") from None
    return con


_POINT_COLS = ("point_id, idx, params_json, state, attempt, submission_token, chunk, array_job_id, array_index, "
               "job_id, state_raw, exit_code, updated_at")


def _in_json(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


def _task_indices(spec: str) -> list[int]:
    """Indices of a collapsed array range: ``5-9%2`` → 5..9, ``1,3,7-9`` → 1,3,7,8,9, ``0-8:4`` → 0,4,8."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        part = part.strip()
        if not part:
            continue
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        try:
            a, b, s = int(lo), int(hi or lo), int(step or 1)
        except ValueError:
            continue
        out.extend(range(a, b + 1, max(s, 1)))
    return out


# ----------------------------------------------------------------------------------------- the ledger

class Ledger:
    """One sweep's ledger. Create with :meth:`create`, reopen with :meth:`open`; close when done.

    Reading is safe while another process writes (``hpcjobs status`` beside a running submitter).
    Writes from several processes are serialised by SQLite; the submitter additionally holds
    :meth:`lock` so that only one process plans submissions.
    """

    def __init__(self, sweep_dir: Path, con: sqlite3.Connection) -> None:
        self.dir = sweep_dir
        self.path = sweep_dir / LEDGER_FILE
        self._con = con

    # ----------------------------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, sweep_dir: str | Path, meta: SweepMeta, points: Sequence[PointLike], *,
               force: bool = False) -> Ledger:
        """Create the ledger of a sweep, or reopen it when the same sweep was planned before.

        Idempotent: planning the same experiment (same text, same expanded points) again opens the
        existing ledger unchanged, keeping every point's state. A changed experiment file or a
        different set of points is refused unless ``force``: then the metadata is updated, new
        points are appended (indices after the existing ones), and points no longer in the sweep
        that were never submitted become ``REMOVED``; submitted ones keep their state.

        Args:
            sweep_dir: The sweep's directory (created if missing).
            meta: What the sweep is.
            points: The expanded points (:func:`hpcjobs.sweep.expand.expand`).
            force: Accept a changed experiment or point set.

        Returns:
            The open ledger.

        Raises:
            LedgerError: The directory holds another sweep, the experiment or points changed (without
                ``force``), duplicate point ids, or the database cannot be written.
        """
        if not _SWEEP_ID_RE.match(meta.sweep_id):
            raise LedgerError(f"invalid sweep id {meta.sweep_id!r}: use letters, digits and _ . -")
        ids = [p.point_id for p in points]
        if len(set(ids)) != len(ids):
            raise LedgerError("duplicate point ids: expand the sweep with hpcjobs.sweep.expand.expand")
        d = Path(sweep_dir)
        d.mkdir(parents=True, exist_ok=True)
        ledger = cls(d, _connect(d / LEDGER_FILE, choose_journal_mode(d)))
        try:
            with ledger._write() as con:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        con.execute(stmt)
                row = con.execute("SELECT * FROM sweep").fetchone()
                if row is None:
                    ledger._insert_new(con, meta, points)
                else:
                    ledger._replan(con, meta, points, force)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def open(cls, sweep_dir: str | Path) -> Ledger:
        """Open an existing ledger.

        Raises:
            LedgerError: No ledger there, its creation was interrupted, or it has another schema version.
        """
        d = Path(sweep_dir)
        path = d / LEDGER_FILE
        if not path.is_file():
            raise LedgerError(f"no sweep ledger at {path}")
        ledger = cls(d, _connect(path, choose_journal_mode(d)))
        try:
            row = ledger._con.execute("SELECT schema_version FROM sweep").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is None:
            ledger.close()
            raise LedgerError(f"the sweep ledger {path} is empty (its creation was interrupted); plan the sweep again")
        if row[0] != SCHEMA_VERSION:
            ledger.close()
            raise LedgerError(
                f"the sweep ledger {path} has schema version {row[0]}; this hpcjobs reads {SCHEMA_VERSION}")
        return ledger

    def close(self) -> None:
        """Close the database connection."""
        with contextlib.suppress(sqlite3.Error):
            self._con.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock(self) -> SubmitterLock:
        """The submitter lock of this sweep (use as ``with ledger.lock(): ...``)."""
        return SubmitterLock(self.dir, self.meta.sweep_id)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any error)."""
        try:
            self._con.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot write the sweep ledger {self.path}: {exc}") from None
        try:
            yield self._con
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            raise LedgerError(f"cannot write the sweep ledger {self.path}: {exc}") from None
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            raise
        try:
            self._con.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            raise LedgerError(f"cannot write the sweep ledger {self.path}: {exc}") from None

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read-only statement (its own consistent snapshot)."""
        try:
            return self._con.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read the sweep ledger {self.path}: {exc}") from None

    def _insert_new(self, con: sqlite3.Connection, meta: SweepMeta, points: Sequence[PointLike]) -> None:
        now = time.time()
        con.execute(
            "INSERT INTO sweep (id, schema_version, sweep_id, created_at, updated_at, experiment_path, "
            "experiment_sha256, site, scheduler, n_points, extra_json) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (SCHEMA_VERSION, meta.sweep_id, now, now, meta.experiment_path, meta.experiment_sha256, meta.site,
             meta.scheduler, len(points), json.dumps(meta.extra, sort_keys=True)))
        con.executemany(
            "INSERT INTO points (point_id, idx, params_json, state, updated_at) VALUES (?, ?, ?, 'PLANNED', ?)",
            [(p.point_id, p.index, p.params_json, now) for p in points])

    def _replan(self, con: sqlite3.Connection, meta: SweepMeta, points: Sequence[PointLike], force: bool) -> None:
        old = con.execute("SELECT sweep_id, experiment_sha256, experiment_path FROM sweep").fetchone()
        if old[0] != meta.sweep_id:
            raise LedgerError(f"{self.dir} holds sweep {old[0]!r}, not {meta.sweep_id!r}")
        existing = {r[0] for r in con.execute("SELECT point_id FROM points WHERE state != 'REMOVED'")}
        new_ids = [p.point_id for p in points]
        added = [p for p in points if p.point_id not in existing]
        gone = existing - set(new_ids)
        changed_text = old[1] != meta.experiment_sha256
        if not changed_text and not added and not gone:
            return
        if not force:
            why = []
            if changed_text:
                why.append(f"the experiment file changed since the sweep was planned ({old[2]}: sha256 "
                           f"{old[1][:12]} -> {meta.experiment_sha256[:12]})")
            if added or gone:
                why.append(f"the expanded points differ ({len(added)} new, {len(gone)} no longer in the sweep; "
                           "did the command-line overrides change?)")
            raise LedgerError(f"sweep {meta.sweep_id}: " + "; ".join(why) + ". Re-plan with force to update "
                              "the ledger, or start a new sweep")
        now = time.time()
        known = {r[0]: r[1] for r in con.execute("SELECT point_id, state FROM points")}
        revived = [p for p in added if p.point_id in known]  # REMOVED earlier, back in the sweep now
        fresh = [p for p in added if p.point_id not in known]
        next_idx = con.execute("SELECT COALESCE(MAX(idx), -1) + 1 FROM points").fetchone()[0]
        con.executemany(
            "INSERT INTO points (point_id, idx, params_json, state, updated_at) VALUES (?, ?, ?, 'PLANNED', ?)",
            [(p.point_id, next_idx + i, p.params_json, now) for i, p in enumerate(fresh)])
        con.executemany("UPDATE points SET state = 'PLANNED', updated_at = ? WHERE point_id = ?",
                        [(now, p.point_id) for p in revived])
        con.executemany("UPDATE points SET state = 'REMOVED', updated_at = ? WHERE point_id = ? AND state = 'PLANNED'",
                        [(now, pid) for pid in sorted(gone)])
        total = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        con.execute("UPDATE sweep SET experiment_sha256 = ?, experiment_path = ?, site = ?, scheduler = ?, "
                    "extra_json = ?, n_points = ?, updated_at = ?",
                    (meta.experiment_sha256, meta.experiment_path, meta.site, meta.scheduler,
                     json.dumps(meta.extra, sort_keys=True), total, now))

    # ---------------------------------------------------------------------------------------- reading

    @property
    def meta(self) -> SweepMeta:
        """The sweep's metadata."""
        (r,) = self._read("SELECT sweep_id, experiment_path, experiment_sha256, site, scheduler, extra_json, "
                          "created_at FROM sweep")
        return SweepMeta(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6])

    def points(self, state: str | Iterable[str] | None = None) -> list[PointRecord]:
        """Points in index order, all or those in ``state`` (one state or several)."""
        sql = f"SELECT {_POINT_COLS} FROM points"
        args: tuple[Any, ...] = ()
        if state is not None:
            states = [state] if isinstance(state, str) else list(state)
            sql += " WHERE state IN (SELECT value FROM json_each(?))"
            args = (json.dumps(states),)
        return [PointRecord(*r) for r in self._read(sql + " ORDER BY idx", args)]

    def pending_points(self) -> list[PointRecord]:
        """Points never successfully submitted (``PLANNED``), in index order: what is left to submit."""
        return self.points(PLANNED)

    def summary(self) -> dict[str, int]:
        """Number of points per state (states with no points left out), in :data:`POINT_STATES` order."""
        counts = dict(self._read("SELECT state, COUNT(*) FROM points GROUP BY state"))
        return {s: counts[s] for s in POINT_STATES if s in counts}

    def submission(self, token: str) -> Submission:
        """One submission by token.

        Raises:
            LedgerError: No such token.
        """
        subs = self._submissions("WHERE token = ?", (token,))
        if not subs:
            raise LedgerError(f"no submission with token {token!r} in sweep ledger {self.path}")
        return subs[0]

    def submissions(self, state: str | Iterable[str] | None = None) -> list[Submission]:
        """Submissions in the order they were planned, all or those in ``state``."""
        if state is None:
            return self._submissions("", ())
        states = [state] if isinstance(state, str) else list(state)
        return self._submissions("WHERE state IN (SELECT value FROM json_each(?))", (json.dumps(states),))

    def unresolved_submissions(self) -> list[Submission]:
        """Submissions left ``submitting`` or ``unknown`` (by a crash or a timeout): the job may exist.

        For each, look for its token in the scheduler (job comment/name) before anything else, then
        call :meth:`mark_submitted` or :meth:`mark_failed`. Their points are not pending meanwhile.
        """
        return self.submissions(UNRESOLVED)

    def _submissions(self, where: str, args: tuple[Any, ...]) -> list[Submission]:
        cols = "token, chunk, state, is_array, first_index, job_id, argv_json, stderr, created_at, updated_at"
        rows = self._read(f"SELECT {cols} FROM submissions {where} ORDER BY created_at, rowid", args)
        members: dict[str, list[str]] = {}
        for token, pid in self._read(
                f"SELECT token, point_id FROM submission_points WHERE token IN (SELECT token FROM submissions {where}) "
                "ORDER BY token, array_index", args):
            members.setdefault(token, []).append(pid)
        return [Submission(r[0], r[1], r[2], bool(r[3]), r[4], tuple(members.get(r[0], ())), r[5],
                           json.loads(r[6]) if r[6] else None, r[7], r[8], r[9]) for r in rows]

    # ------------------------------------------------------------------------------------ submitting

    def plan_chunk(self, point_ids: Sequence[str], chunk: int, *, token: str | None = None,
                   argv: Sequence[str] | None = None, array: bool = True, first_index: int = 0) -> str:
        """Record that a chunk is about to be submitted: call right BEFORE the scheduler call.

        In one transaction: the points (all ``PLANNED``) become ``SUBMITTING`` with array indices
        ``first_index + position``, and a ``submitting`` submission row is written.

        Args:
            point_ids: The chunk's points, in array-index order.
            chunk: Chunk number (goes into the job tag).
            token: The submission token (default: :func:`new_token`); create it first when the
                submit command (job comment) must contain it.
            argv: The submit command, kept for the record and for ``--dry-run`` style reports.
            array: Submitted as a job array; ``False`` for a plain job of exactly one point.
            first_index: Array index of the first point.

        Returns:
            The token.

        Raises:
            LedgerError: Unknown points, points not ``PLANNED`` (already submitted or in flight:
                submitting them again could duplicate them), an empty or repeated list, or a reused token.
        """
        ids = list(point_ids)
        if not ids or len(set(ids)) != len(ids):
            raise LedgerError("a chunk needs at least one point and no point twice")
        if not array and len(ids) != 1:
            raise LedgerError("a non-array submission carries exactly one point")
        token = token or new_token()
        if not _TOKEN_RE.match(token):
            raise LedgerError(f"invalid submission token {token!r} (8-32 lowercase hex digits)")
        now = time.time()
        with self._write() as con:
            found = dict(con.execute("SELECT point_id, state FROM points WHERE point_id IN "
                                     "(SELECT value FROM json_each(?))", (_in_json(ids),)).fetchall())
            missing = [p for p in ids if p not in found]
            if missing:
                raise LedgerError(f"unknown points {', '.join(missing[:5])} in sweep ledger {self.path}")
            busy = [f"{p} ({found[p]})" for p in ids if found[p] != PLANNED]
            if busy:
                raise LedgerError(f"{len(busy)} point(s) are not pending and cannot be submitted again: "
                                  f"{', '.join(busy[:5])}")
            if con.execute("SELECT 1 FROM submissions WHERE token = ?", (token,)).fetchone():
                raise LedgerError(f"submission token {token} was already used")
            con.execute("INSERT INTO submissions (token, chunk, state, is_array, first_index, n_points, argv_json, "
                        "created_at, updated_at) VALUES (?, ?, 'submitting', ?, ?, ?, ?, ?, ?)",
                        (token, chunk, int(array), first_index, len(ids),
                         json.dumps(list(argv)) if argv is not None else None, now, now))
            con.executemany(
                "INSERT INTO submission_points (token, point_id, array_index, attempt) "
                "SELECT ?, point_id, ?, attempt FROM points WHERE point_id = ?",
                [(token, first_index + i, pid) for i, pid in enumerate(ids)])
            con.executemany(
                "UPDATE points SET state = 'SUBMITTING', submission_token = ?, chunk = ?, array_index = ?, "
                "array_job_id = NULL, job_id = NULL, state_raw = NULL, exit_code = NULL, updated_at = ? "
                "WHERE point_id = ?",
                [(token, chunk, first_index + i if array else None, now, pid) for i, pid in enumerate(ids)])
        return token

    def _sub_state(self, con: sqlite3.Connection, token: str) -> tuple[str, bool, str | None]:
        row = con.execute("SELECT state, is_array, job_id FROM submissions WHERE token = ?", (token,)).fetchone()
        if row is None:
            raise LedgerError(f"no submission with token {token!r} in sweep ledger {self.path}")
        return row[0], bool(row[1]), row[2]

    def mark_submitted(self, token: str, job_id: str) -> None:
        """Record that the scheduler accepted a submission (its points become ``SUBMITTED``).

        Also the resolution of an ``unknown``/``submitting`` row whose token was found in the
        scheduler. Repeating the call with the same job id is a no-op.

        Raises:
            LedgerError: Unknown token, a different job id for an already submitted token, or a
                submission already marked failed (its points may have been submitted again).
        """
        now = time.time()
        with self._write() as con:
            state, is_array, old_job = self._sub_state(con, token)
            if state == SUB_SUBMITTED:
                if old_job != job_id:
                    raise LedgerError(f"submission {token} is already recorded as job {old_job}, not {job_id}")
                return
            if state == SUB_FAILED:
                raise LedgerError(f"submission {token} was marked failed and its points released; job {job_id} "
                                  "may duplicate them: cancel it")
            con.execute("UPDATE submissions SET state = 'submitted', job_id = ?, updated_at = ? WHERE token = ?",
                        (job_id, now, token))
            con.execute("UPDATE points SET state = 'SUBMITTED', array_job_id = ?, job_id = ?, updated_at = ? "
                        "WHERE submission_token = ? AND state = 'SUBMITTING'",
                        (job_id if is_array else None, None if is_array else job_id, now, token))

    def mark_failed(self, token: str, stderr: str = "") -> None:
        """Record that a submission certainly created no job; its points return to ``PLANNED``.

        Only when sure: the scheduler refused it, or a timed-out submission's token is not in the
        scheduler. When in doubt use :meth:`mark_unknown`. Repeating the call is a no-op.

        Raises:
            LedgerError: Unknown token, or the submission is already recorded as submitted.
        """
        now = time.time()
        with self._write() as con:
            state, _, job = self._sub_state(con, token)
            if state == SUB_FAILED:
                return
            if state == SUB_SUBMITTED:
                raise LedgerError(f"submission {token} is recorded as submitted (job {job}); it cannot be failed")
            con.execute("UPDATE submissions SET state = 'failed', stderr = ?, updated_at = ? WHERE token = ?",
                        (stderr, now, token))
            con.execute("UPDATE points SET state = 'PLANNED', submission_token = NULL, chunk = NULL, "
                        "array_index = NULL, updated_at = ? WHERE submission_token = ? AND state = 'SUBMITTING'",
                        (now, token))

    def mark_unknown(self, token: str, stderr: str = "") -> None:
        """Record that a submission's outcome is unknown (timed out: it may or may not be queued).

        The points stay ``SUBMITTING``, out of :meth:`pending_points`, until the token is looked up
        and the row resolved with :meth:`mark_submitted` or :meth:`mark_failed`.

        Raises:
            LedgerError: Unknown token, or the submission is already submitted or failed.
        """
        now = time.time()
        with self._write() as con:
            state, _, _ = self._sub_state(con, token)
            if state in (SUB_SUBMITTED, SUB_FAILED):
                raise LedgerError(f"submission {token} is already {state}")
            con.execute("UPDATE submissions SET state = 'unknown', stderr = ?, updated_at = ? WHERE token = ?",
                        (stderr, now, token))

    # --------------------------------------------------------------------------------------- status

    def record_status(self, records: Iterable[JobStatus], *, job_key: Callable[[str], str] | None = None) -> int:
        """Apply one status poll to the points, in one transaction.

        A record matches a point by (``array_job_id``, ``array_task_id``), by every index of a
        collapsed pending range (``array_task_spec``, e.g. ``5-9%2``), or, for plain jobs, by
        ``job_id``. Array-parent records without a task index, and records of jobs not in this
        sweep (or of earlier attempts), are ignored. Later records win over earlier ones.

        Args:
            records: Parsed status records (:class:`hpcjobs.schedulers.base.JobStatus`).
            job_key: Maps a job id to its comparison key when the scheduler prints ids in several
                forms (PBS ``123[].srv`` vs ``123[].srv.example.org``); default: the id itself.

        Returns:
            The number of points whose record changed.
        """
        key = job_key or (lambda s: s)
        records = list(records)
        with self._write() as con:  # read and write in one transaction: no reset can slip in between
            rows = con.execute(
                "SELECT point_id, array_job_id, array_index, job_id, state, state_raw, exit_code FROM points "
                "WHERE array_job_id IS NOT NULL OR job_id IS NOT NULL").fetchall()
            by_task = {(key(r[1]), r[2]): r for r in rows if r[1] is not None}
            by_job = {key(r[3]): r for r in rows if r[1] is None and r[3] is not None}
            changes: dict[str, tuple[str, str | None, int | None, str | None]] = {}
            for rec in records:
                targets: list[tuple[Any, ...]] = []
                task_level = False
                if rec.array_job_id is not None and rec.array_task_id is not None:
                    hit = by_task.get((key(rec.array_job_id), rec.array_task_id))
                    targets, task_level = ([hit] if hit else []), True
                elif rec.array_job_id is not None and rec.array_task_spec:
                    parent = key(rec.array_job_id)
                    targets = [t for i in _task_indices(rec.array_task_spec) if (t := by_task.get((parent, i)))]
                elif rec.array_task_spec is None:
                    hit = by_job.get(key(rec.job_id))
                    targets, task_level = ([hit] if hit else []), True
                for r in targets:
                    changes[r[0]] = (rec.state, rec.state_raw, rec.exit_code, rec.job_id if task_level else r[3])
            now = time.time()
            current = {r[0]: (r[4], r[5], r[6], r[3]) for r in rows}
            updates = [(st, raw, code, jid, now, pid) for pid, (st, raw, code, jid) in changes.items()
                       if current[pid] != (st, raw, code, jid)]
            con.executemany("UPDATE points SET state = ?, state_raw = ?, exit_code = ?, job_id = ?, updated_at = ? "
                            "WHERE point_id = ?", updates)
        return len(updates)

    # ------------------------------------------------------------------------------------ resubmitting

    def reset_for_resubmit(self, point_ids: Iterable[str]) -> int:
        """Make finished points pending again for a new attempt (``attempt + 1``, state ``PLANNED``).

        The finished attempt's record is kept in ``point_attempts``.

        Returns:
            The number of points reset.

        Raises:
            LedgerError: Unknown points, or points not in a terminal state (queued, running, in
                flight or never submitted: resubmitting those could run them twice).
        """
        ids = list(dict.fromkeys(point_ids))
        if not ids:
            return 0
        now = time.time()
        with self._write() as con:
            rows = con.execute(f"SELECT {_POINT_COLS} FROM points WHERE point_id IN (SELECT value FROM json_each(?))",
                               (_in_json(ids),)).fetchall()
            found = {r[0]: PointRecord(*r) for r in rows}
            missing = [p for p in ids if p not in found]
            if missing:
                raise LedgerError(f"unknown points {', '.join(missing[:5])} in sweep ledger {self.path}")
            active = [f"{p} ({found[p].state})" for p in ids if found[p].state not in TERMINAL_STATES]
            if active:
                raise LedgerError(f"only finished points can be resubmitted; not finished: {', '.join(active[:5])}")
            con.executemany(
                "INSERT OR REPLACE INTO point_attempts (point_id, attempt, submission_token, chunk, array_job_id, "
                "array_index, job_id, state, state_raw, exit_code, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [(p.point_id, p.attempt, p.submission_token, p.chunk, p.array_job_id, p.array_index, p.job_id,
                  p.state, p.state_raw, p.exit_code, now) for p in (found[i] for i in ids)])
            con.executemany(
                "UPDATE points SET state = 'PLANNED', attempt = attempt + 1, submission_token = NULL, chunk = NULL, "
                "array_job_id = NULL, array_index = NULL, job_id = NULL, state_raw = NULL, exit_code = NULL, "
                "updated_at = ? WHERE point_id = ?", [(now, i) for i in ids])
        return len(ids)

    def attempts(self, point_id: str) -> list[dict[str, Any]]:
        """Earlier attempts of a point (oldest first), as recorded by :meth:`reset_for_resubmit`."""
        names = ("point_id", "attempt", "submission_token", "chunk", "array_job_id", "array_index", "job_id", "state",
                 "state_raw", "exit_code", "recorded_at")
        rows = self._read(f"SELECT {', '.join(names)} FROM point_attempts WHERE point_id = ? ORDER BY attempt",
                          (point_id,))
        return [dict(zip(names, r, strict=True)) for r in rows]

    def cancel_pending(self) -> int:
        """Mark every never-submitted point ``CANCELLED`` (``hpcjobs cancel``), so a resume skips them.

        Returns:
            The number of points cancelled.
        """
        with self._write() as con:
            cur = con.execute("UPDATE points SET state = 'CANCELLED', state_raw = 'cancelled before submission', "
                              "updated_at = ? WHERE state = 'PLANNED'", (time.time(),))
            return cur.rowcount

    # ------------------------------------------------------------------------------------- checking

    def check_invariants(self) -> list[str]:
        """Consistency problems of the ledger (empty when consistent). For tests and diagnostics."""
        con = self._con
        problems = []
        if con.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("SQLite integrity check failed")
        n, stored = con.execute("SELECT COUNT(*), (SELECT n_points FROM sweep) FROM points").fetchone()
        if n != stored:
            problems.append(f"{n} points but the sweep records {stored}")
        queries = {
            "SUBMITTING point without an unresolved submission":
                "SELECT p.point_id FROM points p LEFT JOIN submissions s ON s.token = p.submission_token "
                "WHERE p.state = 'SUBMITTING' AND (s.state IS NULL OR s.state NOT IN ('submitting', 'unknown'))",
            "point of an unresolved submission not SUBMITTING under it":
                "SELECT sp.point_id FROM submission_points sp JOIN submissions s ON s.token = sp.token "
                "JOIN points p ON p.point_id = sp.point_id WHERE s.state IN ('submitting', 'unknown') "
                "AND (p.state != 'SUBMITTING' OR p.submission_token IS NOT sp.token)",
            "PLANNED point still tied to a submission or job":
                "SELECT point_id FROM points WHERE state = 'PLANNED' AND (submission_token IS NOT NULL "
                "OR array_job_id IS NOT NULL OR job_id IS NOT NULL)",
            "submitted point without a submitted submission":
                "SELECT p.point_id FROM points p LEFT JOIN submissions s ON s.token = p.submission_token "
                "WHERE p.state NOT IN ('PLANNED', 'SUBMITTING', 'REMOVED') AND p.submission_token IS NOT NULL "
                "AND (s.state IS NULL OR s.state != 'submitted')",
            "point carried twice in one attempt by live submissions":
                "SELECT sp.point_id FROM submission_points sp JOIN submissions s ON s.token = sp.token "
                "WHERE s.state != 'failed' GROUP BY sp.point_id, sp.attempt HAVING COUNT(*) > 1",
            "submission whose point count is wrong":
                "SELECT s.token FROM submissions s WHERE s.n_points != "
                "(SELECT COUNT(*) FROM submission_points sp WHERE sp.token = s.token)",
        }
        for what, sql in queries.items():
            bad = [r[0] for r in con.execute(sql)]
            if bad:
                problems.append(f"{what}: {', '.join(map(str, bad[:5]))}" + (" ..." if len(bad) > 5 else ""))
        return problems
