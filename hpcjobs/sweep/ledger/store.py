"""The per-sweep ledger: a crash-safe record of every point and every submission attempt.

Lives in ``<sweep_dir>/ledger.sqlite``. Every state change is one SQLite transaction opened with
``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers never interleave a
read-check-write), in WAL mode with ``synchronous=FULL``: a commit is on disk before the call
returns, so a ``kill -9`` (or a power cut) at any moment leaves the ledger as it was after the
last completed call. ``NORMAL`` would survive a kill but could lose the last commits on power
loss, and the one commit that must never be lost is "about to call sbatch"; commits are few (two
per chunk, one per status poll), so the fsync costs nothing that matters.

**At scale.** A write touches only the points it changes, with set-based statements (a chunk's
points through ``json_each``, a poll's tasks by array-index ranges), and keeps the per-state
counts in ``point_counts`` (:mod:`hpcjobs.sweep.ledger.counts`); a new sweep's points are streamed
in (:mod:`hpcjobs.sweep.ledger.plan`). Nothing reads every point unless asked to (:meth:`Ledger.points`).

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

The schema, the point and submission states and the record types are in
:mod:`hpcjobs.sweep.ledger.schema`, the lock in :mod:`hpcjobs.sweep.ledger.lock`; both are re-exported here.
Status polls are applied by :mod:`hpcjobs.sweep.ledger.status`, the records of a lying scheduler's
aftermath by :mod:`hpcjobs.sweep.ledger.recovery`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.ids import values_from
from hpcjobs.states import TERMINAL_STATES
from hpcjobs.sweep.ledger.counts import move, shift, stored_version, upgrade
from hpcjobs.sweep.ledger.lock import LOCK_FILE, SubmitterLock
from hpcjobs.sweep.ledger.plan import insert_new, prepare_points, replan
from hpcjobs.sweep.ledger.read import LedgerReads
from hpcjobs.sweep.ledger.recovery import RecoveryRecords, StrayJob, UnseenJob
from hpcjobs.sweep.ledger.schema import (
    _POINT_COLS,
    _SCHEMA,
    _SWEEP_ID_RE,
    _TOKEN_RE,
    LEDGER_FILE,
    PLANNED,
    POINT_STATES,
    REMOVED,
    SCHEMA_VERSION,
    SUB_FAILED,
    SUB_SUBMITTED,
    SUB_SUBMITTING,
    SUB_UNKNOWN,
    SUBMITTED,
    SUBMITTING,
    UNRESOLVED,
    PointLike,
    PointRecord,
    Submission,
    SweepMeta,
    _check_invariants,
    _connect,
    _in_json,
    _task_indices,  # noqa: F401 (re-exported for tests)
    choose_journal_mode,
    connect_snapshot,
    experiment_sha256,
    ledger_file_problem,
    new_token,
    refuse_linked_ledger,
    refuse_schemaless,
)
from hpcjobs.sweep.ledger.status import StatusRecords
from hpcjobs.sweep.ledger.upstreams import UpstreamRecord, UpstreamRecords

__all__ = [
    "LEDGER_FILE", "LOCK_FILE", "PLANNED", "POINT_STATES", "REMOVED", "SCHEMA_VERSION", "SUBMITTED", "SUBMITTING",
    "SUB_FAILED", "SUB_SUBMITTED", "SUB_SUBMITTING", "SUB_UNKNOWN", "UNRESOLVED", "Ledger", "PointLike", "PointRecord",
    "StrayJob", "Submission", "SubmitterLock", "SweepMeta", "UnseenJob", "UpstreamRecord", "choose_journal_mode",
    "experiment_sha256", "new_token",
]

#: ``UPDATE ... FROM`` (a chunk's points and their array indices in one statement) needs SQLite 3.33.
_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)



def _chunk_rows(con: sqlite3.Connection, ids: Sequence[str], members: str) -> tuple[int | None, list[Any]]:
    """``(point_id, state)`` of each of ``ids`` (state ``None``: unknown), and the ``idx`` of the first when
    they are the points of consecutive indices in this order (then the chunk is written by index range)."""
    row = con.execute("SELECT idx FROM points WHERE point_id = ?", (ids[0],)).fetchone()
    if row is not None:
        got = con.execute("SELECT point_id, state FROM points WHERE idx BETWEEN ? AND ? ORDER BY idx",
                          (row[0], row[0] + len(ids) - 1)).fetchall()
        if len(got) == len(ids) and all(g[0] == i for g, i in zip(got, ids, strict=True)):
            return int(row[0]), got
    return None, con.execute("SELECT j.value, p.state FROM json_each(?) j LEFT JOIN points p "
                             "ON p.point_id = j.value ORDER BY j.key", (members,)).fetchall()

# ----------------------------------------------------------------------------------------- the ledger

class Ledger(LedgerReads, RecoveryRecords, StatusRecords, UpstreamRecords):
    """One sweep's ledger. Create with :meth:`create`, reopen with :meth:`open`; close when done.

    Reading is safe while another process writes (``hpcjobs status`` beside a running submitter).
    Writes from several processes are serialised by SQLite; the submitter additionally holds
    :meth:`lock` so that only one process plans submissions.
    """

    def __init__(self, sweep_dir: Path, con: sqlite3.Connection, *, read_only: bool = False) -> None:
        self.dir = sweep_dir
        self.path = sweep_dir / LEDGER_FILE
        self._con = con
        #: Opened as an in-memory copy of a ledger this process cannot write: changes are not saved.
        self.read_only = read_only
        self._source: contextlib.AbstractContextManager[None] | None = None

    # ----------------------------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, sweep_dir: str | Path, meta: SweepMeta, points: Iterable[PointLike], *,
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
            points: The expanded points: a list (:func:`hpcjobs.sweep.points.expand.expand`) or, streamed
                without holding them all, a :class:`hpcjobs.sweep.points.stream.SweepPoints`.
            force: Accept a changed experiment or point set.

        Returns:
            The open ledger.

        Raises:
            LedgerError: The directory holds another sweep, the experiment or points changed (without
                ``force``), duplicate point ids, or the database cannot be written.
            ConfigError: The ledger file is empty or holds no sweep while the folder shows an earlier
                run (scripts, chunk files): refused rather than started over.
        """
        if not _SWEEP_ID_RE.match(meta.sweep_id):
            raise LedgerError(f"invalid sweep id {meta.sweep_id!r}: use letters, digits and _ . -")
        points = prepare_points(points)
        d = Path(sweep_dir)
        d.mkdir(parents=True, exist_ok=True)
        refuse_linked_ledger(d / LEDGER_FILE)  # a FIFO or a folder is said to be one, not "an empty ledger"
        refuse_schemaless(d, meta)
        ledger = cls(d, _connect(d / LEDGER_FILE, choose_journal_mode(d)))
        try:
            with ledger._write() as con:
                if stored_version(con) is None:
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            con.execute(stmt)
                    insert_new(con, meta, points)
                else:
                    upgrade(con, ledger.path)
                    replan(con, d, meta, points, force)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def open(cls, sweep_dir: str | Path, *, allow_read_only: bool = False) -> Ledger:
        """Open an existing ledger (a version 1 ledger is upgraded first, see :mod:`hpcjobs.sweep.ledger.counts`).

        Args:
            sweep_dir: The sweep's folder.
            allow_read_only: When this process may not write the ledger (or its folder), open an
                in-memory copy instead (:attr:`read_only` is then true; changes are not saved).

        Raises:
            LedgerError: No ledger there, its creation was interrupted, or it has another schema version.
        """
        d = Path(sweep_dir)
        path = d / LEDGER_FILE
        if not os.path.lexists(path):
            raise LedgerError(f"no sweep ledger at {path}")
        refuse_linked_ledger(path)  # a link, FIFO, device or folder: said so, never "no sweep"
        what = ledger_file_problem(path)
        if what is not None:
            raise LedgerError(f"cannot open the sweep ledger {path}: it is {what} (its creation was interrupted, "
                              "or it was overwritten); the record of this sweep's submissions is gone")
        writable = os.access(path, os.W_OK) and os.access(d, os.W_OK)
        if allow_read_only and not writable:
            ledger = cls(d, connect_snapshot(path), read_only=True)
        else:
            ledger = cls(d, _connect(path, choose_journal_mode(d)))
        try:
            try:
                version = stored_version(ledger._con)
            except sqlite3.Error:
                version = None
            if version is None:
                raise LedgerError(f"the sweep ledger {path} is empty (its creation was interrupted); plan the sweep "
                                  "again")
            if version != SCHEMA_VERSION:
                if version > SCHEMA_VERSION or version < 1:
                    raise LedgerError(f"the sweep ledger {path} has schema version {version}; this hpcjobs reads "
                                      f"{SCHEMA_VERSION}")
                with ledger._write() as con:
                    upgrade(con, path)
        except BaseException:
            ledger.close()
            raise
        return ledger

    def close(self) -> None:
        """Close the database connection."""
        with contextlib.suppress(sqlite3.Error):
            self._con.close()

    def __enter__(self) -> Ledger:
        # job ids read from this ledger are checked before they reach a command: errors name this file
        self._source = values_from(self.path)
        self._source.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        source, self._source = getattr(self, "_source", None), None
        if source is not None:
            source.__exit__(None, None, None)
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

    def _read(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """Rows of one read-only statement (its own consistent snapshot)."""
        try:
            return self._con.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read the sweep ledger {self.path}: {exc}") from None

    # ------------------------------------------------------------------------------------ submitting

    def plan_chunk(self, point_ids: Sequence[str], chunk: int, *, token: str | None = None,
                   argv: Sequence[str] | None = None, array: bool = True, first_index: int = 0,
                   pack: int = 1) -> str:
        """Record that a chunk is about to be submitted: call right BEFORE the scheduler call.

        In one transaction: the points (all ``PLANNED``) become ``SUBMITTING`` with array indices
        ``first_index + position // pack``, and a ``submitting`` submission row is written.

        Args:
            point_ids: The chunk's points, in array-index order.
            chunk: Chunk number (goes into the job tag).
            token: The submission token (default: :func:`new_token`); create it first when the
                submit command (job comment) must contain it.
            argv: The submit command, kept for the record and for ``--dry-run`` style reports.
            array: Submitted as a job array; ``False`` for a plain job of exactly one point.
            first_index: Array index of the first point.
            pack: Points per array task (the experiment's ``pack:``; :mod:`hpcjobs.sweep.pack`).

        Returns:
            The token.

        Raises:
            LedgerError: Unknown points, points not ``PLANNED`` (already submitted or in flight:
                submitting them again could duplicate them), an empty or repeated list, or a reused token.
        """
        ids = list(point_ids)
        if not ids or len(set(ids)) != len(ids):
            raise LedgerError("a chunk needs at least one point and no point twice")
        if pack < 1:
            raise LedgerError("pack must be at least 1")
        if not array and len(ids) != 1:
            raise LedgerError("a non-array submission carries exactly one point")
        token = token or new_token()
        if not _TOKEN_RE.match(token):
            raise LedgerError(f"invalid submission token {token!r} (8-32 lowercase hex digits)")
        now = time.time()
        members = _in_json(ids)
        with self._write() as con:
            lo, rows = _chunk_rows(con, ids, members)
            missing = [r[0] for r in rows if r[1] is None]
            if missing:
                raise LedgerError(f"unknown points {', '.join(missing[:5])} in sweep ledger {self.path}")
            busy = [f"{r[0]} ({r[1]})" for r in rows if r[1] != PLANNED]
            if busy:
                raise LedgerError(f"{len(busy)} point(s) are not pending and cannot be submitted again: "
                                  f"{', '.join(busy[:5])}")
            if con.execute("SELECT 1 FROM submissions WHERE token = ?", (token,)).fetchone():
                raise LedgerError(f"submission token {token} was already used")
            con.execute("INSERT INTO submissions (token, chunk, state, is_array, first_index, n_points, argv_json, "
                        "created_at, updated_at) VALUES (?, ?, 'submitting', ?, ?, ?, ?, ?, ?)",
                        (token, chunk, int(array), first_index, len(ids),
                         json.dumps(list(argv)) if argv is not None else None, now, now))
            clear = ("state = 'SUBMITTING', submission_token = ?, chunk = ?, array_job_id = NULL, job_id = NULL, "
                     "state_raw = NULL, exit_code = NULL, updated_at = ?")
            if lo is not None:
                run = (lo, lo + len(ids) - 1)
                con.execute("INSERT INTO submission_points (token, point_id, array_index, attempt) "
                            "SELECT ?, point_id, (idx - ?) / ? + ?, attempt FROM points WHERE idx BETWEEN ? AND ?",
                            (token, lo, pack, first_index, *run))
                con.execute(f"UPDATE points SET {clear}, array_index = CASE WHEN ? THEN (idx - ?) / ? + ? END "
                            "WHERE idx BETWEEN ? AND ?", (token, chunk, now, int(array), lo, pack, first_index, *run))
            else:
                con.execute("INSERT INTO submission_points (token, point_id, array_index, attempt) "
                            "SELECT ?, p.point_id, ? + j.key / ?, p.attempt FROM json_each(?) j JOIN points p "
                            "ON p.point_id = j.value", (token, first_index, pack, members))
                if _UPDATE_FROM:
                    con.execute(f"UPDATE points SET {clear}, array_index = CASE WHEN ? THEN ? + j.key / ? END "
                                "FROM json_each(?) AS j WHERE points.point_id = j.value",
                                (token, chunk, now, int(array), first_index, pack, members))
                else:  # pragma: no cover - SQLite before 3.33
                    con.executemany(f"UPDATE points SET {clear}, array_index = ? WHERE point_id = ?",
                                    [(token, chunk, now, first_index + i // pack if array else None, pid)
                                     for i, pid in enumerate(ids)])
            move(con, PLANNED, SUBMITTING, len(ids), now)
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
            n = con.execute("UPDATE points SET state = 'SUBMITTED', array_job_id = ?, job_id = ?, updated_at = ? "
                            "WHERE submission_token = ? AND state = 'SUBMITTING'",
                            (job_id if is_array else None, None if is_array else job_id, now, token)).rowcount
            move(con, SUBMITTING, SUBMITTED, n, now)

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
            n = con.execute("UPDATE points SET state = 'PLANNED', submission_token = NULL, chunk = NULL, "
                            "array_index = NULL, updated_at = ? WHERE submission_token = ? AND state = 'SUBMITTING'",
                            (now, token)).rowcount
            move(con, SUBMITTING, PLANNED, n, now)

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
            deltas: dict[str, int] = {PLANNED: len(ids)}
            for i in ids:
                deltas[found[i].state] = deltas.get(found[i].state, 0) - 1
            shift(con, deltas, now)
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
        now = time.time()
        with self._write() as con:
            n = int(con.execute("UPDATE points SET state = 'CANCELLED', state_raw = 'cancelled before submission', "
                                "updated_at = ? WHERE state = 'PLANNED'", (now,)).rowcount)
            move(con, PLANNED, "CANCELLED", n, now)
            return n

    # ------------------------------------------------------------------------------------- checking

    def check_invariants(self) -> list[str]:
        """Consistency problems of the ledger (empty when consistent). For tests and diagnostics."""
        return _check_invariants(self._con)
