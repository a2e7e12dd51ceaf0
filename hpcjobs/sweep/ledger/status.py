"""Applying a status poll to the ledger: only the points whose record changed are written.

Split out of :mod:`hpcjobs.sweep.ledger.store`; :class:`hpcjobs.sweep.ledger.store.Ledger` inherits these methods.

A poll's answer arrives as a :class:`hpcjobs.schedulers.status_table.StatusTable`: array tasks grouped
by (array job, state, state text, exit code, task id spelling). Each group becomes one ``UPDATE`` of
the points of the submissions with that job id, restricted to their array indices in the group and
to rows whose record differs (``points_token_task`` finds them), preceded by one ``SELECT`` that
counts their old states for ``point_counts``. A poll in which nothing changed writes nothing but
the transaction; one in which a million tasks changed is a few thousand statements, not a million.

Matching is that of :meth:`StatusRecords.record_status`: a task record matches the point at its
array index in a submission accepted under that array job id (compared through ``job_key``); a
collapsed pending range matches each of its indices (the task keeps the job id it had); a plain
job's record matches the point of a non-array submission with that id. Records of jobs that are not
this sweep's, or of attempts its points have left, change nothing.

**The same answer again.** A poll whose answer reported every id asked is remembered in
``poll_memo`` (the SHA-256 of the scheduler's text and of the ids asked, and the ledger's
``updated_at`` after it was applied). Applying it again to the same ledger would change nothing, so
when the next poll asks the same ids and gets the same text while ``updated_at`` has not moved
(every write that changes a point or a submission moves it), :meth:`StatusRecords.poll_memo` says
so and the answer is not read at all: a poll of a million points in which nothing changed costs the
scheduler's answer and one hash.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.status_table import GroupKey, StatusTable
from hpcjobs.sweep.ledger.counts import shift

__all__ = ["StatusRecords"]

#: More separate runs of consecutive indices than this: the indices go as one JSON list instead.
_MAX_RANGES = 4


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted, deduplicated ``indices`` as inclusive ranges of consecutive values."""
    if indices and list(indices) == list(range(indices[0], indices[0] + len(indices))):  # the usual case, at C speed
        return [(indices[0], indices[-1])]
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


class StatusRecords:
    """Mixin of :class:`hpcjobs.sweep.ledger.store.Ledger`: status polls applied to the points."""

    path: Path

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _read(self, sql: str, args: Any = ()) -> list[Any]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def poll_memo(self, answer_sha256: str, asked_sha256: str) -> bool:
        """Whether this answer to these ids was applied last, to the ledger as it is now (nothing to apply)."""
        try:
            row = self._read("SELECT m.answer_sha256 = ? AND m.asked_sha256 = ? AND m.stamp = s.updated_at "
                             "FROM poll_memo m, sweep s", (answer_sha256, asked_sha256))
        except LedgerError:  # no memo table yet
            return False
        return bool(row and row[0][0])

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
        return self.apply_status(StatusTable.from_records(records), job_key=job_key)

    def apply_status(self, table: StatusTable, *, job_key: Callable[[str], str] | None = None,
                     asked_sha256: str | None = None) -> int:
        """Apply one status poll held by column (:class:`~hpcjobs.schedulers.status_table.StatusTable`).

        Same matching and result as :meth:`record_status`; only the changed points are written.

        Args:
            table: The answer.
            job_key: As in :meth:`record_status`.
            asked_sha256: SHA-256 of the ids asked, when the answer (read from text, ``table.digest``)
                reported every one of them: it is remembered for :meth:`poll_memo` (else forgotten).

        Returns:
            The number of points whose record changed.
        """
        if table.known is not None:  # recognised as the answer applied last (poll_memo): nothing to do
            return 0
        key = job_key or (lambda s: s)
        now = time.time()
        deltas: dict[str, int] = {}
        changed = 0
        with self._write() as con:  # read and write in one transaction: no reset can slip in between
            arrays: dict[str, list[str]] = {}
            plain: dict[str, list[str]] = {}
            for token, job_id, is_array in con.execute(
                    "SELECT token, job_id, is_array FROM submissions WHERE state = 'submitted' AND job_id IS NOT NULL"):
                (arrays if is_array else plain).setdefault(key(job_id), []).append(token)
            for group, indices in table.groups.items():
                tokens = arrays.get(key(group[0]))
                if tokens:
                    changed += self._apply_group(con, tokens, group, indices, now, deltas)
            for job_id, (state, raw, code) in table.plain.items():
                for token in plain.get(key(job_id), ()):
                    where = ("submission_token = ? AND array_job_id IS NULL AND job_id IS NOT NULL AND "
                             "(state IS NOT ? OR state_raw IS NOT ? OR exit_code IS NOT ? OR job_id IS NOT ?)")
                    args = (token, state, raw, code, job_id)
                    changed += _update(con, where, args, "?", (job_id,), (state, raw, code), now, deltas)
            if changed:
                shift(con, deltas, now)
            _ensure_memo(con)
            if asked_sha256 is not None and table.digest is not None:
                con.execute("INSERT OR REPLACE INTO poll_memo (id, answer_sha256, asked_sha256, stamp) "
                            "SELECT 1, ?, ?, updated_at FROM sweep", (table.digest, asked_sha256))
            else:
                con.execute("DELETE FROM poll_memo")
        return changed

    def points_of_submissions(self, tokens: Sequence[str],
                              in_states: Sequence[str]) -> list[tuple[str, str, str, str | None, int | None]]:
        """``(point_id, token, state, state_raw, exit_code)`` of the points of ``tokens`` in ``in_states``."""
        rows = self._read("SELECT point_id, submission_token, state, state_raw, exit_code FROM points WHERE "
                          "submission_token IN (SELECT value FROM json_each(?)) AND state IN (SELECT value FROM "
                          "json_each(?)) ORDER BY idx", (json.dumps(list(tokens)), json.dumps(list(in_states))))
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def set_point_outcomes(self, outcomes: Sequence[tuple[str, str, str, str | None, int | None]]) -> int:
        """Write each ``(point_id, token, state, state_raw, exit_code)`` where the point is still in that submission.

        What a packed task recorded per point (:mod:`hpcjobs.sweep.pack`); one transaction, counts kept.

        Returns:
            The number of points whose record changed.
        """
        now = time.time()
        deltas: dict[str, int] = {}
        changed = 0
        with self._write() as con:
            for pid, token, state, raw, code in outcomes:
                where = ("point_id = ? AND submission_token = ? AND (state IS NOT ? OR state_raw IS NOT ? OR "
                         "exit_code IS NOT ?)")
                changed += _update(con, where, (pid, token, state, raw, code), "job_id", (), (state, raw, code),
                                   now, deltas)
            if changed:
                shift(con, deltas, now)  # moves updated_at: the poll memo no longer matches
        return changed

    @staticmethod
    def _apply_group(con: sqlite3.Connection, tokens: list[str], group: GroupKey, indices: list[int], now: float,
                     deltas: dict[str, int]) -> int:
        _aid, state, raw, code, prefix, suffix = group
        job_args: tuple[str, ...]
        if prefix is None:  # a collapsed range: the task keeps the job id it has
            job_sql, job_args = "job_id", ()
        elif suffix is None:  # an id that does not spell its index
            job_sql, job_args = "?", (prefix,)
        else:
            job_sql, job_args = "? || array_index || ?", (prefix, suffix)
        runs = _runs(indices)
        selections: list[tuple[str, tuple[Any, ...]]]
        if len(runs) <= _MAX_RANGES:
            selections = [("array_index BETWEEN ? AND ?", run) for run in runs]
        else:
            selections = [("array_index IN (SELECT value FROM json_each(?))", (json.dumps(sorted(set(indices))),))]
        changed = 0
        for token in tokens:
            for pick, pick_args in selections:
                where = (f"submission_token = ? AND {pick} AND array_job_id IS NOT NULL AND (state IS NOT ? OR "
                         f"state_raw IS NOT ? OR exit_code IS NOT ? OR job_id IS NOT {job_sql})")
                args = (token, *pick_args, state, raw, code, *job_args)
                changed += _update(con, where, args, job_sql, job_args, (state, raw, code), now, deltas)
        return changed


def _ensure_memo(con: sqlite3.Connection) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS poll_memo (id INTEGER PRIMARY KEY CHECK (id = 1), answer_sha256 TEXT "
                "NOT NULL, asked_sha256 TEXT NOT NULL, stamp REAL NOT NULL)")


def _update(con: sqlite3.Connection, where: str, args: tuple[Any, ...], job_sql: str, job_args: tuple[Any, ...],
            outcome: tuple[str, str | None, int | None], now: float, deltas: dict[str, int]) -> int:
    """Write ``outcome`` to the points ``where`` says (those whose record differs); count the old states."""
    before = con.execute(f"SELECT state, COUNT(*) FROM points WHERE {where} GROUP BY state", args).fetchall()
    if not before:
        return 0
    state, raw, code = outcome
    con.execute(f"UPDATE points SET state = ?, state_raw = ?, exit_code = ?, job_id = {job_sql}, updated_at = ? "
                f"WHERE {where}", (state, raw, code, *job_args, now, *args))
    n = 0
    for old, k in before:
        deltas[old] = deltas.get(old, 0) - k
        n += k
    deltas[state] = deltas.get(state, 0) + n
    return n
