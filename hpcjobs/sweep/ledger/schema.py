"""What the sweep ledger stores: its SQL schema, constants, records and database connection.

Split out of :mod:`hpcjobs.sweep.ledger.store` (which re-exports every public name here); the
:class:`hpcjobs.sweep.ledger.store.Ledger` class itself lives there.

**Schema** (``schema_version`` 2; a version 1 ledger is upgraded when it is opened, see
:mod:`hpcjobs.sweep.ledger.counts`):

- ``sweep``: one row: ``sweep_id``, ``created_at``/``updated_at`` (Unix seconds; ``updated_at`` is the
  last change to a point or submission, and grows with every such write), ``experiment_path``,
  ``experiment_sha256`` (of the file's text), ``site``, ``scheduler``, ``n_points``, ``extra_json``
  (the submitter's own settings), ``points_digest``
  (SHA-256 of the point ids in expansion order when the sweep was last planned: a re-plan of the
  same points is recognised without comparing them one by one).
- ``points``: ``idx`` (expansion index, the row id), ``point_id`` (unique), ``params_json``, ``state``,
  ``attempt`` (1, +1 per resubmission), ``submission_token``, ``chunk``, ``array_job_id``,
  ``array_index``, ``job_id`` (the task's own id once a status poll reports it), ``state_raw``,
  ``exit_code``, ``updated_at``. Indexed by ``point_id``, by ``(submission_token, array_index)`` (a
  status poll finds a task there) and, for ``PLANNED`` points only, by ``idx`` (what is left to submit).
- ``point_counts``: the number of points in each state, kept by every write in the same transaction
  (``status`` and ``ls`` read it instead of counting a million rows).
- ``submissions``: one row per attempt to submit a chunk: ``token`` (key), ``chunk``, ``state``
  (``submitting`` → ``submitted`` | ``failed`` | ``unknown``; ``unknown`` → ``submitted`` |
  ``failed``), ``is_array``, ``first_index``, ``n_points``, ``job_id``, ``argv_json``,
  ``stderr``, ``created_at``, ``updated_at``.
- ``submission_points``: which points (with their array index and attempt) each submission carried.
- ``point_attempts``: the final record of each earlier attempt of a resubmitted point.
- ``stray_jobs``: jobs of the sweep the ledger did not accept (a late arrival of an attempt given up
  for lost, a second job with one token) and what was done with them (``cancelled``).
- ``unseen_jobs``: consecutive status polls that did not report a submitted job id (a job id the
  scheduler never knows is marked lost after a grace period). These two tables came without a
  version change: a ledger that lacks them gets them at the first write that needs them.
- ``upstreams``: what the sweep waits for (``after:``, ``--after``; :mod:`hpcjobs.sweep.ledger.upstreams`): the
  reference as given (``ref``), its condition (``ok``/``any``/``done``), the upstream's sweep id and folder (none
  for a bare scheduler job id), the upstream job ids the last submission waited for, and the jobs of this sweep
  cancelled because their upstream failed. Added without a version change, like the two tables above.
- ``poll_memo``: the last status answer applied that reported every id asked (SHA-256 of the
  scheduler's text and of the ids asked, and the ledger's ``updated_at`` after it): the same answer
  on an unchanged ledger changes nothing and is not read again (:mod:`hpcjobs.sweep.ledger.status`).

Point states: ``PLANNED`` (never submitted, or released after a failed submission),
``SUBMITTING`` (in a submission not yet resolved), ``SUBMITTED`` (accepted, no status yet), then
the normalised scheduler states of :mod:`hpcjobs.states`, and ``REMOVED`` (dropped from the sweep
by a forced re-plan before it was ever submitted).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hpcjobs.errors import ConfigError, ConfigProblem, LedgerError, UnsafePathError
from hpcjobs.safe_files import refuse_links
from hpcjobs.schedulers.status_table import task_indices
from hpcjobs.states import ALL_STATES, new_token

__all__ = [
    "LEDGER_FILE", "PLANNED", "POINT_STATES", "REMOVED", "SCHEMA_VERSION", "SUBMITTED", "SUBMITTING", "SUB_FAILED",
    "SUB_SUBMITTED", "SUB_SUBMITTING", "SUB_UNKNOWN", "UNRESOLVED", "PointLike", "PointRecord", "Submission",
    "SweepMeta", "choose_journal_mode", "connect_snapshot", "experiment_sha256", "ledger_file_problem", "new_token",
    "refuse_schemaless",
]

SCHEMA_VERSION = 2
LEDGER_FILE = "ledger.sqlite"

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

#: The same check as version 1's ``state IN ('PLANNED', ...)``, several times cheaper per written row: a state is
#: one of the comma-separated names and holds no comma.
_STATE_CHECK = f"instr(',{','.join(POINT_STATES)},', ',' || state || ',') > 0 AND instr(state, ',') = 0"
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
  extra_json TEXT NOT NULL DEFAULT '{{}}',
  points_digest TEXT
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
  idx INTEGER PRIMARY KEY,
  point_id TEXT NOT NULL,
  params_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK ({_STATE_CHECK}),
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
CREATE TABLE IF NOT EXISTS point_counts (
  state TEXT PRIMARY KEY,
  n INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS submission_points (
  token TEXT NOT NULL REFERENCES submissions(token),
  point_id TEXT NOT NULL REFERENCES points(point_id),
  array_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  PRIMARY KEY (token, point_id)
);
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

#: Indexes of ``points``, made after a new ledger's points are written (sorting once is much faster than
#: keeping an index in order row by row). ``points_point_id`` is the unique key a version 1 ledger has
#: as its primary key already.
POINT_ID_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS points_point_id ON points(point_id)"
POINT_INDEXES = (
    "CREATE INDEX IF NOT EXISTS points_token_task ON points(submission_token, array_index)",
    "CREATE INDEX IF NOT EXISTS points_planned ON points(idx) WHERE state = 'PLANNED'",
)

#: Tables added without a schema version change (older ledgers get them at their first write that needs
#: them; readers treat a missing table as empty): jobs cancelled as strays, and the scheduler's silence
#: about a submitted job id (see :meth:`hpcjobs.sweep.ledger.store.Ledger.note_unseen`).
_AUX_SCHEMA = """
CREATE TABLE IF NOT EXISTS stray_jobs (
  job_id TEXT PRIMARY KEY,
  token TEXT,
  action TEXT NOT NULL,
  reason TEXT NOT NULL,
  recorded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS unseen_jobs (
  token TEXT PRIMARY KEY REFERENCES submissions(token),
  misses INTEGER NOT NULL,
  first_miss_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS poll_memo (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  answer_sha256 TEXT NOT NULL,
  asked_sha256 TEXT NOT NULL,
  stamp REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS upstreams (
  ref TEXT PRIMARY KEY,
  condition TEXT NOT NULL CHECK (condition IN ('ok', 'any', 'done')),
  sweep_id TEXT,
  folder TEXT,
  job_ids_json TEXT NOT NULL,
  cancelled_json TEXT NOT NULL DEFAULT '[]',
  recorded_at REAL NOT NULL
);
"""
_SCHEMA += _AUX_SCHEMA


class PointLike(Protocol):
    """What the ledger needs of a point (:class:`hpcjobs.sweep.points.point.Point` has it)."""

    @property
    def index(self) -> int: ...

    @property
    def point_id(self) -> str: ...

    @property
    def params_json(self) -> str: ...


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


#: How long opening a ledger waits for another process that holds it (seconds).
_BUSY_TIMEOUT_S = 30.0


def _set_journal_mode(con: sqlite3.Connection, journal: str) -> None:
    """Switch the journal mode, waiting while another process holds the file.

    SQLite answers ``database is locked`` at once, without calling the busy handler, when a second
    connection changes the journal mode while the first is still creating the database (two
    submitters started together on a new sweep): the change is retried with a short backoff up to
    :data:`_BUSY_TIMEOUT_S`, as every other statement waits through ``sqlite3.connect(timeout=)``.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    delay = 0.01
    while True:
        try:
            row = con.execute("PRAGMA journal_mode").fetchone()
            if row is not None and str(row[0]).lower() == journal:
                return
            con.execute(f"PRAGMA journal_mode={journal}")
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


#: Page cache per connection (KiB, allocated as used): a million-point ledger's indexes fit in it.
_CACHE_KIB = 64 * 1024


#: The files SQLite opens beside a database (it follows links on all of them).
_SIDE_FILES = ("", "-wal", "-shm", "-journal")


def refuse_linked_ledger(path: Path) -> None:
    """Refuse a ledger (or its WAL, shared-memory or journal file) that is a link, a FIFO or a device.

    SQLite opens these files following symbolic links and writes them: ``ledger.sqlite-wal ->
    ~/.bashrc`` would be truncated.

    Raises:
        LedgerError: One of them is not a regular file of its own.
    """
    try:
        refuse_links(path.with_name(path.name + suffix) for suffix in _SIDE_FILES)
    except UnsafePathError as exc:
        raise LedgerError(f"cannot use the sweep ledger: {exc}") from None


def _connect(path: Path, journal: str) -> sqlite3.Connection:
    refuse_linked_ledger(path)
    try:
        con = sqlite3.connect(str(path), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        _set_journal_mode(con, journal)
        con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA foreign_keys=ON")
        con.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open the sweep ledger {path}: {exc}") from None
    return con


def ledger_file_problem(path: Path) -> str | None:
    """Why an existing ledger file holds no sweep, read without changing it (``None``: it holds one).

    Returns:
        ``"empty (0 bytes)"``, ``"empty (no sweep record)"`` or ``"not an SQLite database"``, or ``None``.
    """
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size == 0:
        return "empty (0 bytes)"
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error:
        return "unreadable"
    try:
        has_table = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sweep'").fetchone()
        if not has_table or not con.execute("SELECT 1 FROM sweep").fetchone():
            return "empty (no sweep record)"
    except sqlite3.DatabaseError as exc:
        return "not an SQLite database" if "not a database" in str(exc) else None
    finally:
        con.close()
    return None


def connect_snapshot(path: Path) -> sqlite3.Connection:
    """An in-memory copy of a ledger that this process may not write (``hpcjobs status`` on a read-only one).

    Writes to the copy succeed and are never saved. A ledger in WAL mode in a folder that cannot be written
    is read as ``immutable`` (SQLite cannot create the shared-memory index there).

    Raises:
        LedgerError: The file cannot be read.
    """
    uri = path.resolve().as_uri()
    last: sqlite3.Error | None = None
    for query in ("mode=ro", "immutable=1"):
        try:
            src = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=30.0)
            try:
                mem = sqlite3.connect(":memory:", isolation_level=None)
                src.backup(mem)
            finally:
                src.close()
            mem.execute("PRAGMA foreign_keys=ON")
            mem.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
            return mem
        except sqlite3.Error as exc:
            last = exc
    raise LedgerError(f"cannot read the sweep ledger {path}: {last}")


#: What in a sweep folder shows that an earlier run got as far as submitting.
_TRACES = ("scripts", "chunks", "points")


def refuse_schemaless(folder: Path, meta: SweepMeta) -> None:
    """Refuse to start over on a ledger that lost its sweep in a folder an earlier run has used.

    A 0-byte or schema-less ``ledger.sqlite`` beside chunk files or scripts means the record of what
    was submitted is gone: starting afresh could submit every point a second time. In a folder with
    nothing else in it the file is simply initialised.

    Raises:
        ConfigError: The ledger holds no sweep and the folder shows an earlier run (exit code 2).
    """
    path = folder / LEDGER_FILE
    what = ledger_file_problem(path)
    if what is None:
        return
    traces = [f"{name}/ ({sum(1 for _ in (folder / name).iterdir())} files)" for name in _TRACES
              if (folder / name).is_dir() and any((folder / name).iterdir())]
    if not traces and what != "not an SQLite database":
        return
    name = meta.extra.get("name") or meta.sweep_id.rsplit("-", 1)[0]
    tag = f"hpcjobs:{meta.sweep_id}:"
    from hpcjobs.schedulers.registry import get_backend

    look = get_backend(meta.scheduler).tag_query_hint(name)
    found = ", ".join(traces) or "no other files"
    raise ConfigError(ConfigProblem(
        f"the sweep ledger is {what}, but the folder {folder} holds {found} from an earlier run: jobs it "
        "submitted may still be queued, and starting over could submit every point again. Refusing to start. "
        f"To recover: list the jobs tagged {tag} ({look}) and cancel or keep them, then move the folder "
        f"away (mv {folder} {folder}.broken) and run the same command again",
        file=str(path)))


_task_indices = task_indices  # the ledger's name for it (tests import it from here)


_POINT_COLS = ("point_id, idx, params_json, state, attempt, submission_token, chunk, array_job_id, array_index, "
               "job_id, state_raw, exit_code, updated_at")


def _in_json(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


# ---------------------------------------------------------------------------------------- checking

def _check_invariants(con: sqlite3.Connection) -> list[str]:
    """Consistency problems of a ledger database (empty when consistent): :meth:`Ledger.check_invariants`."""
    problems = []
    if con.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        problems.append("SQLite integrity check failed")
    n, stored = con.execute("SELECT COUNT(*), (SELECT n_points FROM sweep) FROM points").fetchone()
    if n != stored:
        problems.append(f"{n} points but the sweep records {stored}")
    counted = dict(con.execute("SELECT state, COUNT(*) FROM points GROUP BY state").fetchall())
    has_counts = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'point_counts'").fetchone()
    kept = dict(con.execute("SELECT state, n FROM point_counts WHERE n != 0").fetchall()) if has_counts else counted
    if kept != counted:
        problems.append(f"point_counts {kept} differ from the points {counted}")
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
