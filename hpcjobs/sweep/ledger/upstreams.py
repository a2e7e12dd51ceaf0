"""The ledger's record of a sweep's upstreams (pipelines), and the view of a sweep an upstream gives.

A downstream sweep records, for each upstream it waits for (``after:`` in the experiment, ``--after``
on the command line), the reference as given, the condition, the upstream's sweep id and folder, the
upstream job ids its last submission waited for, and its own jobs cancelled because that upstream
failed (table ``upstreams``). ``hpcjobs sweep`` run again and ``hpcjobs resubmit`` read it back, so the
dependency is kept even when the command line no longer names it.

The table came without a schema version change: a ledger made before it has no ``upstreams`` table,
reads as having no upstreams, and gets the table at its first write that needs it (as
``stray_jobs``/``unseen_jobs``, :mod:`hpcjobs.sweep.ledger.recovery`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcjobs.sweep.ledger.recovery import _ensure_aux

__all__ = ["JobView", "UpstreamRecord", "UpstreamRecords"]


@dataclass(frozen=True)
class UpstreamRecord:
    """One upstream of a sweep, as recorded.

    Attributes:
        ref: The reference as given (an experiment file made absolute, a sweep id or name, a job id).
        condition: ``ok``, ``any`` or ``done``.
        sweep_id: The upstream sweep's (or single job's) id; ``None`` for a bare scheduler job id.
        folder: The upstream's sweep folder; ``None`` for a bare scheduler job id.
        job_ids: The upstream job ids the last submission waited for (none when it had ended already).
        cancelled: This sweep's job ids cancelled because the upstream failed.
        recorded_at: Unix time of the last record.
    """

    ref: str
    condition: str
    sweep_id: str | None
    folder: str | None
    job_ids: tuple[str, ...]
    cancelled: tuple[str, ...] = ()
    recorded_at: float = 0.0


@dataclass(frozen=True)
class JobView:
    """How many points of a sweep are in one state under one job (``job_id`` ``None``: not submitted)."""

    job_id: str | None
    state: str
    n: int


class UpstreamRecords:
    """Mixin of :class:`hpcjobs.sweep.ledger.store.Ledger`: the ``upstreams`` table and the jobs-by-state view."""

    path: Path

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    @contextlib.contextmanager
    def _write_upstreams(self) -> Iterator[sqlite3.Connection]:
        with self._write() as con:
            _ensure_aux(con)
            yield con

    def _has_upstreams_table(self) -> bool:
        return bool(self._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'upstreams'"))

    def upstreams(self) -> list[UpstreamRecord]:
        """The recorded upstreams, in the order they were first recorded (none in a ledger without the table)."""
        if not self._has_upstreams_table():
            return []
        rows = self._read("SELECT ref, condition, sweep_id, folder, job_ids_json, cancelled_json, recorded_at "
                          "FROM upstreams ORDER BY rowid")
        return [UpstreamRecord(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), tuple(json.loads(r[5])), r[6])
                for r in rows]

    def record_upstreams(self, records: Iterable[UpstreamRecord]) -> None:
        """Record (or update) upstreams in one transaction; the jobs cancelled for each are kept."""
        rows = [(r.ref, r.condition, r.sweep_id, r.folder, json.dumps(list(r.job_ids)), time.time()) for r in records]
        if not rows:
            return
        with self._write_upstreams() as con:
            con.executemany(
                "INSERT INTO upstreams (ref, condition, sweep_id, folder, job_ids_json, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(ref) DO UPDATE SET condition = excluded.condition, "
                "sweep_id = excluded.sweep_id, folder = excluded.folder, job_ids_json = excluded.job_ids_json, "
                "recorded_at = excluded.recorded_at", rows)

    def record_upstream_cancelled(self, job_ids: Sequence[str]) -> None:
        """Note this sweep's ``job_ids`` as cancelled because an upstream failed (on every upstream record)."""
        if not job_ids or not self._has_upstreams_table():
            return
        with self._write_upstreams() as con:
            for ref, cancelled in con.execute("SELECT ref, cancelled_json FROM upstreams").fetchall():
                merged = list(dict.fromkeys([*json.loads(cancelled), *job_ids]))
                con.execute("UPDATE upstreams SET cancelled_json = ? WHERE ref = ?", (json.dumps(merged), ref))

    def jobs_by_state(self) -> list[JobView]:
        """Points per (current job, state), removed points left out: what an upstream's dependants wait for."""
        rows = self._read("SELECT s.job_id, p.state, COUNT(*) FROM points p LEFT JOIN submissions s "
                          "ON s.token = p.submission_token AND s.state = 'submitted' WHERE p.state != 'REMOVED' "
                          "GROUP BY s.job_id, p.state ORDER BY s.job_id, p.state")
        return [JobView(r[0], r[1], int(r[2])) for r in rows]
