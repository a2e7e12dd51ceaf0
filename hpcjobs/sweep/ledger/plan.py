"""Writing a sweep's points into its ledger: the first plan, streamed, and a re-plan, compared in SQL.

Split out of :mod:`hpcjobs.sweep.ledger.store` (:meth:`hpcjobs.sweep.ledger.store.Ledger.create` calls these inside
its one transaction, so a ``kill -9`` leaves either no sweep or all of it).

- :func:`insert_new` streams the points (``executemany`` over a generator: one point in memory at a
  time), then builds the indexes of ``points`` (sorting once is faster than keeping an index in
  order row by row), counts them into ``point_counts`` and stores the digest of their ids.
- :func:`replan` recognises the same points by that digest; otherwise (a version 1 ledger, changed
  points) it loads the new ids into a temporary table and lets SQLite find the added, removed and
  revived points, so that a million-point comparison is not a million-element Python set.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.sweep.ledger.counts import create_point_indexes, shift
from hpcjobs.sweep.ledger.schema import PLANNED, REMOVED, SCHEMA_VERSION, PointLike, SweepMeta

__all__ = ["insert_new", "points_digest", "prepare_points", "replan"]

_DUPLICATES = "duplicate point ids: expand the sweep with hpcjobs.sweep.points.expand.expand"
_INSERT = "INSERT INTO points (point_id, idx, params_json, state, updated_at) VALUES (?, ?, ?, 'PLANNED', ?)"


def prepare_points(points: Iterable[PointLike]) -> Any:
    """``points`` as something that can be read more than once (a stream of :class:`SweepPoints` already is)."""
    if hasattr(points, "ledger_rows"):
        return points
    return points if isinstance(points, (list, tuple)) else list(points)


def _rows(points: Any) -> Iterator[tuple[int, str, str]]:
    """``(index, point_id, params_json)`` of each point."""
    if hasattr(points, "ledger_rows"):
        return iter(points.ledger_rows())
    return ((p.index, p.point_id, p.params_json) for p in points)


def points_digest(points: Any) -> str:
    """SHA-256 of the point ids in order (:meth:`hpcjobs.sweep.points.stream.SweepPoints.digest`)."""
    if hasattr(points, "digest"):
        return str(points.digest())
    d = hashlib.sha256()
    for _, pid, _ in _rows(points):
        d.update(pid.encode("utf-8"))
    return d.hexdigest()


def insert_new(con: sqlite3.Connection, meta: SweepMeta, points: Any) -> None:
    """Write a new sweep: its row, every point ``PLANNED``, the indexes, the counts and the digest.

    Raises:
        LedgerError: Two points with one id.
    """
    now = time.time()
    con.execute(
        "INSERT INTO sweep (id, schema_version, sweep_id, created_at, updated_at, experiment_path, "
        "experiment_sha256, site, scheduler, n_points, extra_json) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
        (SCHEMA_VERSION, meta.sweep_id, now, now, meta.experiment_path, meta.experiment_sha256, meta.site,
         meta.scheduler, json.dumps(meta.extra, sort_keys=True)))
    digest = hashlib.sha256()
    count = 0

    def feed() -> Iterator[tuple[str, int, str, float]]:
        nonlocal count
        for idx, pid, text in _rows(points):
            digest.update(pid.encode("utf-8"))
            count += 1
            yield pid, idx, text, now

    try:
        con.executemany(_INSERT, feed())
        create_point_indexes(con)
    except sqlite3.IntegrityError:
        raise LedgerError(_DUPLICATES) from None
    shift(con, {PLANNED: count})
    con.execute("UPDATE sweep SET n_points = ?, points_digest = ?", (count, digest.hexdigest()))


def replan(con: sqlite3.Connection, folder: Path, meta: SweepMeta, points: Any, force: bool) -> None:
    """Plan an existing sweep again: unchanged → nothing; changed → refused, or with ``force`` applied.

    With ``force`` the metadata is updated, new points are appended (indices after the existing
    ones, in expansion order), points no longer in the sweep that were never submitted become
    ``REMOVED``, and removed points back in the sweep become ``PLANNED`` again.

    Raises:
        LedgerError: Another sweep in the folder, duplicate point ids, or (without ``force``) a
            changed experiment or point set.
    """
    old = con.execute("SELECT sweep_id, experiment_sha256, experiment_path, points_digest FROM sweep").fetchone()
    if old[0] != meta.sweep_id:
        raise LedgerError(f"{folder} holds sweep {old[0]!r}, not {meta.sweep_id!r}")
    digest = points_digest(points)
    changed_text = old[1] != meta.experiment_sha256
    added = gone = 0
    loaded = False
    if old[3] != digest:
        _load(con, points)
        loaded = True
        added, gone = con.execute(
            "SELECT (SELECT COUNT(*) FROM temp.replan_points n WHERE NOT EXISTS (SELECT 1 FROM points p WHERE "
            "p.point_id = n.point_id AND p.state != 'REMOVED')), (SELECT COUNT(*) FROM points p WHERE "
            "p.state != 'REMOVED' AND NOT EXISTS (SELECT 1 FROM temp.replan_points n WHERE n.point_id = p.point_id))"
        ).fetchone()
    try:
        if not changed_text and not added and not gone:
            if old[3] != digest:  # same points (a version 1 ledger, or a new order): remember them
                con.execute("UPDATE sweep SET points_digest = ?", (digest,))
            return
        if not force:
            why = []
            if changed_text:
                why.append(f"the experiment file changed since the sweep was planned ({old[2]}: sha256 "
                           f"{old[1][:12]} -> {meta.experiment_sha256[:12]})")
            if added or gone:
                why.append(f"the expanded points differ ({added} new, {gone} no longer in the sweep; "
                           "did the command-line overrides change?)")
            raise LedgerError(f"sweep {meta.sweep_id}: " + "; ".join(why) + ". Re-plan with force to update "
                              "the ledger, or start a new sweep")
        now = time.time()
        if added or gone:
            _apply(con, now)
        total = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        con.execute("UPDATE sweep SET experiment_sha256 = ?, experiment_path = ?, site = ?, scheduler = ?, "
                    "extra_json = ?, n_points = ?, updated_at = MAX(?, updated_at + 0.000001), points_digest = ?",
                    (meta.experiment_sha256, meta.experiment_path, meta.site, meta.scheduler,
                     json.dumps(meta.extra, sort_keys=True), total, now, digest))
    finally:
        if loaded:
            con.execute("DROP TABLE IF EXISTS temp.replan_points")


def _load(con: sqlite3.Connection, points: Any) -> None:
    """The new points into ``temp.replan_points`` (``ord``: their expansion order)."""
    con.execute("DROP TABLE IF EXISTS temp.replan_points")
    con.execute("CREATE TEMP TABLE replan_points (point_id TEXT PRIMARY KEY, ord INTEGER NOT NULL, "
                "params_json TEXT NOT NULL)")
    try:
        con.executemany("INSERT INTO temp.replan_points (point_id, ord, params_json) VALUES (?, ?, ?)",
                        ((pid, idx, text) for idx, pid, text in _rows(points)))
    except sqlite3.IntegrityError:
        raise LedgerError(_DUPLICATES) from None


def _apply(con: sqlite3.Connection, now: float) -> None:
    """Append the new points, revive the removed ones that are back, remove pending ones that are gone."""
    next_idx = con.execute("SELECT COALESCE(MAX(idx), -1) + 1 FROM points").fetchone()[0]
    fresh = con.execute(
        "INSERT INTO points (point_id, idx, params_json, state, updated_at) "
        "SELECT point_id, ? + ROW_NUMBER() OVER (ORDER BY ord) - 1, params_json, 'PLANNED', ? "
        "FROM temp.replan_points n WHERE NOT EXISTS (SELECT 1 FROM points p WHERE p.point_id = n.point_id) "
        "ORDER BY ord",
        (next_idx, now)).rowcount
    revived = con.execute("UPDATE points SET state = 'PLANNED', updated_at = ? WHERE state = 'REMOVED' AND "
                          "point_id IN (SELECT point_id FROM temp.replan_points)", (now,)).rowcount
    removed = con.execute("UPDATE points SET state = 'REMOVED', updated_at = ? WHERE state = 'PLANNED' AND "
                          "point_id NOT IN (SELECT point_id FROM temp.replan_points)", (now,)).rowcount
    shift(con, {PLANNED: fresh + revived - removed, REMOVED: removed - revived}, now)
