"""Ledger records for a scheduler that lies: corrected job ids, lost jobs, adopted late arrivals, strays.

Split out of :mod:`hpcjobs.sweep.ledger.store`; :class:`hpcjobs.sweep.ledger.store.Ledger` inherits these methods.
Each is one SQLite transaction, like every other ledger write.

- A submit command may print a wrong job id (exit 0) while the job it queued carries the submission's
  token in its tag: :meth:`RecoveryRecords.correct_job_id` records the id the scheduler has.
- A recorded job id the scheduler never knows (not in the queue, not in accounting, several polls over a
  grace period, and no job with the token): :meth:`RecoveryRecords.mark_lost` releases its points.
- An attempt given up for lost whose job turns up later while its points are still pending is taken
  back (:meth:`RecoveryRecords.adopt_late_submission`); otherwise the job is a stray, cancelled and
  recorded with :meth:`RecoveryRecords.record_stray`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.sweep.ledger.counts import move
from hpcjobs.sweep.ledger.schema import _AUX_SCHEMA, PLANNED, SUB_FAILED, SUB_SUBMITTED, SUBMITTED

__all__ = ["RecoveryRecords", "StrayJob", "UnseenJob"]


@dataclass(frozen=True)
class StrayJob:
    """A job of this sweep that the ledger did not accept, and what was done about it.

    Attributes:
        job_id: The scheduler's id.
        token: The submission token in its tag.
        action: ``cancelled``, or ``cancel failed`` when the cancel command failed.
        reason: Why it is a stray.
        recorded_at: Unix time.
    """

    job_id: str
    token: str | None
    action: str
    reason: str
    recorded_at: float


@dataclass(frozen=True)
class UnseenJob:
    """How long the scheduler has not known a submitted job id.

    Attributes:
        token: The submission.
        misses: Consecutive status polls that did not report the job.
        first_miss_at: Unix time of the first of them.
    """

    token: str
    misses: int
    first_miss_at: float


def _ensure_aux(con: sqlite3.Connection) -> None:
    """Create the additive tables in a ledger made before they existed (inside the caller's transaction)."""
    for stmt in _AUX_SCHEMA.split(";"):
        if stmt.strip():
            con.execute(stmt)


class RecoveryRecords:
    """Mixin of :class:`hpcjobs.sweep.ledger.store.Ledger`: the records of a lying scheduler's aftermath."""

    path: Path

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    @contextlib.contextmanager
    def _write_aux(self) -> Iterator[sqlite3.Connection]:
        with self._write() as con:
            _ensure_aux(con)
            yield con

    def _has_aux(self) -> bool:
        return bool(self._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stray_jobs'"))

    def correct_job_id(self, token: str, job_id: str, reason: str) -> None:
        """Replace the job id of a submitted attempt by the one the scheduler holds under its token.

        Raises:
            LedgerError: Unknown token, or the attempt is not recorded as submitted.
        """
        now = time.time()
        with self._write() as con:
            row = con.execute("SELECT state, is_array, job_id, stderr FROM submissions WHERE token = ?",
                              (token,)).fetchone()
            if row is None or row[0] != SUB_SUBMITTED:
                raise LedgerError(f"submission {token} is not recorded as submitted in {self.path}")
            if row[2] == job_id:
                return
            note = f"job id corrected from {row[2]} to {job_id}: {reason}"
            con.execute("UPDATE submissions SET job_id = ?, stderr = ?, updated_at = ? WHERE token = ?",
                        (job_id, "\n".join(filter(None, (row[3], note))), now, token))
            column = "array_job_id" if row[1] else "job_id"
            con.execute(f"UPDATE points SET {column} = ?, updated_at = ? WHERE submission_token = ?",
                        (job_id, now, token))
            move(con, SUBMITTED, SUBMITTED, 0, now)

    def mark_lost(self, token: str, reason: str) -> int:
        """Record that a submitted attempt's job does not exist; its points return to ``PLANNED``.

        Only when sure: the scheduler knows neither the job id nor any job with the token, over
        several polls. Should the job turn up after all, it is adopted or cancelled as a stray.

        Returns:
            The number of points released.

        Raises:
            LedgerError: Unknown token, the attempt is not submitted, or some of its points have
                had a status from the scheduler (then the job did exist).
        """
        now = time.time()
        with self._write_aux() as con:
            row = con.execute("SELECT state, job_id FROM submissions WHERE token = ?", (token,)).fetchone()
            if row is None or row[0] != SUB_SUBMITTED:
                raise LedgerError(f"submission {token} is not recorded as submitted in {self.path}")
            seen = con.execute("SELECT COUNT(*) FROM points WHERE submission_token = ? AND state != ?",
                               (token, SUBMITTED)).fetchone()[0]
            if seen:
                raise LedgerError(f"job {row[1]} of submission {token} has had a status: it is not lost")
            con.execute("UPDATE submissions SET state = 'failed', stderr = ?, updated_at = ? WHERE token = ?",
                        (f"lost: job {row[1]} {reason}", now, token))
            cur = con.execute("UPDATE points SET state = 'PLANNED', submission_token = NULL, chunk = NULL, "
                              "array_index = NULL, array_job_id = NULL, job_id = NULL, updated_at = ? "
                              "WHERE submission_token = ? AND state = 'SUBMITTED'", (now, token))
            move(con, SUBMITTED, PLANNED, cur.rowcount, now)
            con.execute("DELETE FROM unseen_jobs WHERE token = ?", (token,))
            return int(cur.rowcount)

    def adopt_late_submission(self, token: str, job_id: str) -> bool:
        """Take back an attempt marked failed whose job reached the scheduler after all.

        Possible only while every point it carried is still ``PLANNED`` in the same attempt (no
        other submission has taken them); then the attempt becomes ``submitted`` as ``job_id``.

        Returns:
            Whether it was adopted (``False``: its points went elsewhere; the job is a stray).
        """
        now = time.time()
        with self._write() as con:
            row = con.execute("SELECT state, is_array, stderr FROM submissions WHERE token = ?", (token,)).fetchone()
            if row is None or row[0] != SUB_FAILED:
                return False
            members = con.execute(
                "SELECT sp.point_id, sp.array_index, sp.attempt = p.attempt AND p.state = ?, p.submission_token "
                "FROM submission_points sp JOIN points p ON p.point_id = sp.point_id WHERE sp.token = ?",
                (PLANNED, token)).fetchall()
            if not members or not all(m[2] for m in members):
                return False
            chunk = con.execute("SELECT chunk FROM submissions WHERE token = ?", (token,)).fetchone()[0]
            note = f"adopted: job {job_id} with this token reached the scheduler after the attempt was given up"
            con.execute("UPDATE submissions SET state = 'submitted', job_id = ?, stderr = ?, updated_at = ? "
                        "WHERE token = ?", (job_id, "\n".join(filter(None, (row[2], note))), now, token))
            con.executemany(
                "UPDATE points SET state = 'SUBMITTED', submission_token = ?, chunk = ?, array_index = ?, "
                "array_job_id = ?, job_id = ?, state_raw = NULL, exit_code = NULL, updated_at = ? WHERE point_id = ?",
                [(token, chunk, m[1] if row[1] else None, job_id if row[1] else None, None if row[1] else job_id,
                  now, m[0]) for m in members])
            move(con, PLANNED, SUBMITTED, len(members), now)
            return True

    def record_stray(self, job_id: str, token: str | None, action: str, reason: str) -> None:
        """Record a job of this sweep that the ledger did not accept and what was done with it."""
        with self._write_aux() as con:
            con.execute("INSERT OR REPLACE INTO stray_jobs (job_id, token, action, reason, recorded_at) "
                        "VALUES (?, ?, ?, ?, ?)", (job_id, token, action, reason, time.time()))

    def strays(self) -> list[StrayJob]:
        """The stray jobs recorded so far, oldest first."""
        if not self._has_aux():
            return []
        return [StrayJob(*r) for r in self._read(
            "SELECT job_id, token, action, reason, recorded_at FROM stray_jobs ORDER BY recorded_at, job_id")]

    def note_unseen(self, unseen: Iterable[str], seen: Iterable[str]) -> dict[str, UnseenJob]:
        """Count one more status poll that did not report the submissions ``unseen``; forget ``seen`` ones.

        Returns:
            The running count of every submission in ``unseen``.
        """
        missing, found = list(dict.fromkeys(unseen)), list(dict.fromkeys(seen))
        if not missing and not (found and self._has_aux()):
            return {}
        now = time.time()
        with self._write_aux() as con:
            con.executemany("DELETE FROM unseen_jobs WHERE token = ?", [(t,) for t in found])
            con.executemany("INSERT INTO unseen_jobs (token, misses, first_miss_at) VALUES (?, 1, ?) "
                            "ON CONFLICT(token) DO UPDATE SET misses = misses + 1", [(t, now) for t in missing])
            rows = con.execute("SELECT token, misses, first_miss_at FROM unseen_jobs").fetchall()
        return {r[0]: UnseenJob(*r) for r in rows if r[0] in set(missing)}
