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

The schema, the point and submission states and the record types are in
:mod:`hpcjobs.sweep.ledger_schema`, the lock in :mod:`hpcjobs.sweep.lock`; both are re-exported here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.states import TERMINAL_STATES
from hpcjobs.sweep.ledger_recovery import RecoveryRecords, StrayJob, UnseenJob
from hpcjobs.sweep.ledger_schema import (
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
    _task_indices,
    choose_journal_mode,
    connect_snapshot,
    experiment_sha256,
    ledger_file_problem,
    new_token,
    refuse_schemaless,
)
from hpcjobs.sweep.lock import LOCK_FILE, SubmitterLock

__all__ = [
    "LEDGER_FILE", "LOCK_FILE", "PLANNED", "POINT_STATES", "REMOVED", "SCHEMA_VERSION", "SUBMITTED", "SUBMITTING",
    "SUB_FAILED", "SUB_SUBMITTED", "SUB_SUBMITTING", "SUB_UNKNOWN", "UNRESOLVED", "Ledger", "PointLike", "PointRecord",
    "StrayJob", "Submission", "SubmitterLock", "SweepMeta", "UnseenJob", "choose_journal_mode", "experiment_sha256",
    "new_token",
]

# ----------------------------------------------------------------------------------------- the ledger

class Ledger(RecoveryRecords):
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
            ConfigError: The ledger file is empty or holds no sweep while the folder shows an earlier
                run (scripts, chunk files): refused rather than started over.
        """
        if not _SWEEP_ID_RE.match(meta.sweep_id):
            raise LedgerError(f"invalid sweep id {meta.sweep_id!r}: use letters, digits and _ . -")
        ids = [p.point_id for p in points]
        if len(set(ids)) != len(ids):
            raise LedgerError("duplicate point ids: expand the sweep with hpcjobs.sweep.expand.expand")
        d = Path(sweep_dir)
        d.mkdir(parents=True, exist_ok=True)
        refuse_schemaless(d, meta)
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
    def open(cls, sweep_dir: str | Path, *, allow_read_only: bool = False) -> Ledger:
        """Open an existing ledger.

        Args:
            sweep_dir: The sweep's folder.
            allow_read_only: When this process may not write the ledger (or its folder), open an
                in-memory copy instead (:attr:`read_only` is then true; changes are not saved).

        Raises:
            LedgerError: No ledger there, its creation was interrupted, or it has another schema version.
        """
        d = Path(sweep_dir)
        path = d / LEDGER_FILE
        if not path.is_file():
            raise LedgerError(f"no sweep ledger at {path}")
        what = ledger_file_problem(path)
        if what is not None:
            raise LedgerError(f"cannot open the sweep ledger {path}: it is {what} (its creation was interrupted, "
                              "or it was overwritten); the record of this sweep's submissions is gone")
        if allow_read_only and not (os.access(path, os.W_OK) and os.access(d, os.W_OK)):
            ledger = cls(d, connect_snapshot(path), read_only=True)
        else:
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
        return _check_invariants(self._con)
