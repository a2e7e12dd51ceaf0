"""Reading the ledger: points (all, a page, or by column), counts, submissions, the live ones.

Split out of :mod:`hpcjobs.sweep.ledger.store`; :class:`hpcjobs.sweep.ledger.store.Ledger` inherits these methods.
Each read is one statement (its own consistent snapshot). Only :meth:`LedgerReads.points` without a
limit reads a record per point; the rest answer from the counts, an index, or the submissions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.states import TERMINAL_STATES
from hpcjobs.sweep.ledger.schema import _POINT_COLS, POINT_STATES, UNRESOLVED, PointRecord, Submission, SweepMeta

__all__ = ["LedgerReads"]

_TERMINAL = json.dumps(sorted(TERMINAL_STATES))
_SUB_COLS = "token, chunk, state, is_array, first_index, job_id, argv_json, stderr, created_at, updated_at"


class LedgerReads:
    """Mixin of :class:`hpcjobs.sweep.ledger.store.Ledger`: what it holds, read without changing it."""

    path: Path

    def _read(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    @property
    def meta(self) -> SweepMeta:
        """The sweep's metadata."""
        (r,) = self._read("SELECT sweep_id, experiment_path, experiment_sha256, site, scheduler, extra_json, "
                          "created_at FROM sweep")
        return SweepMeta(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6])

    def points(self, state: str | Iterable[str] | None = None, *, offset: int = 0,
               limit: int | None = None) -> list[PointRecord]:
        """Points in index order, all or those in ``state`` (one state or several).

        Args:
            state: Only points in this state (or these states).
            offset: Skip this many of them first (a page: ``hpcjobs status --points``).
            limit: At most this many (``None``: all; a million-point sweep is a million records).
        """
        sql = f"SELECT {_POINT_COLS} FROM points"
        args: list[Any] = []
        if state is not None:
            states = [state] if isinstance(state, str) else list(state)
            sql += " WHERE state IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(states))
        sql += " ORDER BY idx"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            args += [-1 if limit is None else max(0, limit), max(0, offset)]
        return [PointRecord(*r) for r in self._read(sql, args)]

    def recent_points(self, state: str | Iterable[str], limit: int) -> list[PointRecord]:
        """The ``limit`` points in ``state`` (one state or several) that changed last, the latest first."""
        states = [state] if isinstance(state, str) else list(state)
        return [PointRecord(*r) for r in self._read(
            f"SELECT {_POINT_COLS} FROM points WHERE state IN (SELECT value FROM json_each(?)) "
            "ORDER BY updated_at DESC, idx LIMIT ?", [json.dumps(states), max(0, limit)])]

    def resubmissions(self) -> int:
        """Times the sweep's points were submitted again (each point's attempts after its first)."""
        ((n,),) = self._read("SELECT COALESCE(SUM(attempt - 1), 0) FROM points WHERE attempt > 1")
        return int(n)

    def param_names(self) -> list[str]:
        """Every parameter name any point has, in first-seen order (one pass over the points)."""
        return [r[0] for r in self._read(
            "SELECT j.key FROM points, json_each(points.params_json) AS j GROUP BY j.key ORDER BY MIN(points.idx)")]

    def counts_by_params(self, names: Sequence[str]) -> list[tuple[tuple[Any, ...], str, int]]:
        """Points per (values of the parameters ``names``, state): ``[((v1, v2...), state, n)]``, in order of
        the values' first point (values as JSON text; ``None`` where a point lacks the parameter)."""
        if not names:
            return [((), state, n) for state, n in self.summary().items()]
        cols = ", ".join(f"json_quote(json_extract(params_json, ?)) AS k{i}" for i in range(len(names)))
        keys = ", ".join(f"k{i}" for i in range(len(names)))
        paths = ['$."' + n.replace('\\', '\\\\').replace('"', '\\"') + '"' for n in names]
        rows = self._read(f"SELECT {cols}, state, COUNT(*), MIN(idx) FROM points GROUP BY {keys}, state "
                          "ORDER BY MIN(idx)", paths)
        return [(tuple(r[:len(names)]), r[len(names)], r[len(names) + 1]) for r in rows]

    def point_columns(self, columns: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """Every point's values of ``columns`` (names of :class:`PointRecord` fields; ``index`` is ``idx``),
        one tuple per column in index order: a columnar read, no record per point.

        Raises:
            ValueError: An unknown column name.
        """
        rows = self._read(f"SELECT {', '.join(self._columns(columns))} FROM points ORDER BY idx")
        values = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
        return dict(zip(columns, values, strict=True))

    def point_json(self, columns: Sequence[str]) -> bytes:
        """Every point as one line of JSON, in index order: an object of ``columns`` keyed ``c0``, ``c1``, ...
        (newline-delimited JSON, made by SQLite in one piece, for a columnar reader such as Arrow's).

        Raises:
            ValueError: An unknown column name.
        """
        names = self._columns(columns)
        fields = ", ".join(f"'c{i}', {name}" for i, name in enumerate(names))
        (text,) = self._read(f"SELECT CAST(group_concat(json_object({fields}), char(10)) AS BLOB) "
                             "FROM (SELECT * FROM points ORDER BY idx)")[0]
        return bytes(text or b"")

    def params_json_lines(self) -> bytes:
        """Every point's ``params_json`` on its own line, in index order (newline-delimited JSON)."""
        (text,) = self._read("SELECT CAST(group_concat(params_json, char(10)) AS BLOB) "
                             "FROM (SELECT params_json FROM points ORDER BY idx)")[0]
        return bytes(text or b"")

    def earlier_attempt_columns(self) -> dict[str, tuple[Any, ...]]:
        """Every replaced attempt (as :meth:`hpcjobs.sweep.ledger.store.Ledger.reset_for_resubmit` kept it), by column:
        ``point_id``, ``attempt``, ``chunk``, ``array_job_id``, ``array_index``, ``job_id``, ``state``,
        ``exit_code``; ordered by point index, then attempt."""
        names = ("point_id", "attempt", "chunk", "array_job_id", "array_index", "job_id", "state", "exit_code")
        rows = self._read(f"SELECT {', '.join('a.' + n for n in names)} FROM point_attempts a "
                          "JOIN points p ON p.point_id = a.point_id ORDER BY p.idx, a.attempt")
        values = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        return dict(zip(names, values, strict=True))

    @staticmethod
    def _columns(columns: Sequence[str]) -> list[str]:
        names = {"index": "idx", **{c: c for c in _POINT_COLS.replace(" ", "").split(",")}}
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ValueError(f"unknown point columns {unknown}")
        return [names[c] for c in columns]

    def pending_points(self) -> list[PointRecord]:
        """Points never successfully submitted (``PLANNED``), in index order: what is left to submit."""
        return [PointRecord(*r) for r in self._read(
            f"SELECT {_POINT_COLS} FROM points WHERE state = 'PLANNED' ORDER BY idx")]

    def pending_ids(self) -> list[str]:
        """The ids of :meth:`pending_points` (no record per point)."""
        return [r[0] for r in self._read("SELECT point_id FROM points WHERE state = 'PLANNED' ORDER BY idx")]

    def summary(self) -> dict[str, int]:
        """Number of points per state (states with no points left out), in :data:`POINT_STATES` order."""
        counts = dict(self._read("SELECT state, n FROM point_counts WHERE n != 0"))
        return {s: counts[s] for s in POINT_STATES if s in counts}

    def last_change(self) -> float:
        """When a point last changed (Unix time; the sweep's creation if none has)."""
        return float(self._read("SELECT updated_at FROM sweep")[0][0])

    def submission(self, token: str) -> Submission:
        """One submission by token.

        Raises:
            LedgerError: No such token.
        """
        subs = self._submissions("WHERE token = ?", (token,))
        if not subs:
            raise LedgerError(f"no submission with token {token!r} in sweep ledger {self.path}")
        return subs[0]

    def submissions(self, state: str | Iterable[str] | None = None, *, with_points: bool = True) -> list[Submission]:
        """Submissions in the order they were planned, all or those in ``state``.

        Args:
            state: Only those in this state (or these states).
            with_points: Read each one's point ids (``False``: :attr:`Submission.point_ids` is empty, and a
                million-point sweep's submissions are read without its million memberships).
        """
        if state is None:
            return self._submissions("", (), with_points)
        states = [state] if isinstance(state, str) else list(state)
        return self._submissions("WHERE state IN (SELECT value FROM json_each(?))", (json.dumps(states),),
                                 with_points)

    def unresolved_submissions(self) -> list[Submission]:
        """Submissions left ``submitting`` or ``unknown`` (by a crash or a timeout): the job may exist.

        For each, look for its token in the scheduler (job comment/name) before anything else, then
        call :meth:`mark_submitted` or :meth:`mark_failed`. Their points are not pending meanwhile.
        """
        return self.submissions(UNRESOLVED)

    def live_submissions(self, *, with_unseated: bool = True) -> list[Submission]:
        """Accepted submissions with a job id that still have points not finished (point ids not read).

        Args:
            with_unseated: Also those none of whose points has finished, points or not (an attempt
                whose points all went to a later one is still asked about, as a status poll always has).
        """
        live = ("EXISTS (SELECT 1 FROM points p WHERE p.submission_token = s.token AND p.state NOT IN "
                "(SELECT value FROM json_each(:t)))")
        if with_unseated:
            live += (" OR NOT EXISTS (SELECT 1 FROM points p WHERE p.submission_token = s.token AND p.state IN "
                     "(SELECT value FROM json_each(:t)))")
        rows = self._read(f"SELECT {_SUB_COLS} FROM submissions s WHERE s.state = 'submitted' AND s.job_id IS NOT "
                          f"NULL AND ({live}) ORDER BY s.created_at, s.rowid", {"t": _TERMINAL})
        return [self._submission(r, ()) for r in rows]

    def max_chunk(self) -> int | None:
        """The highest chunk number used by any submission, or ``None``."""
        value = self._read("SELECT MAX(chunk) FROM submissions")[0][0]
        return None if value is None else int(value)

    @staticmethod
    def _submission(r: Sequence[Any], members: tuple[str, ...]) -> Submission:
        return Submission(r[0], r[1], r[2], bool(r[3]), r[4], members, r[5], json.loads(r[6]) if r[6] else None,
                          r[7], r[8], r[9])

    def _submissions(self, where: str, args: tuple[Any, ...], with_points: bool = True) -> list[Submission]:
        rows = self._read(f"SELECT {_SUB_COLS} FROM submissions {where} ORDER BY created_at, rowid", args)
        members: dict[str, list[str]] = {}
        if with_points and rows:
            for token, pid in self._read(
                    f"SELECT token, point_id FROM submission_points WHERE token IN (SELECT token FROM submissions "
                    f"{where}) ORDER BY token, array_index", args):
                members.setdefault(token, []).append(pid)
        return [self._submission(r, tuple(members.get(r[0], ()))) for r in rows]
