"""The ledger's per-state point counts, and the upgrade of a version 1 ledger to version 2.

``point_counts`` holds how many points are in each state. Every ledger write that moves points
between states adjusts it in the same transaction (:func:`shift`), so ``hpcjobs status`` and
``hpcjobs ls`` read a few rows instead of counting every point;
:meth:`hpcjobs.sweep.ledger.store.Ledger.check_invariants` compares it with the points. The same call
records the time of the change as the sweep's ``updated_at``, which grows with every such write (by a
microsecond at least), so that an unchanged ``updated_at`` means an unchanged ledger.

**Version 1 → 2** (:func:`upgrade`, one transaction, when a version 1 ledger is opened for writing or
read through an in-memory copy): the ``points_digest`` column, the ``point_counts`` table (counted
once), the indexes a status poll and the submitter use (``points_token_task``, ``points_planned``)
instead of those they no longer need (``points_state``, ``points_token``, ``submission_points_point``),
and ``updated_at`` set to the last change of a point. Points, submissions and attempts are kept as
they are; version 1's ``point_id`` primary key serves as the unique index of point ids.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from hpcjobs.errors import LedgerError
from hpcjobs.sweep.ledger.schema import _AUX_SCHEMA, POINT_ID_INDEX, POINT_INDEXES, SCHEMA_VERSION

__all__ = ["create_point_indexes", "recount", "shift", "stored_version", "upgrade"]


def shift(con: sqlite3.Connection, deltas: Mapping[str, int], now: float | None = None) -> None:
    """Add ``deltas`` (state → change in its number of points) to ``point_counts``; note ``now`` as the last change.

    Call inside the transaction that moved the points.
    """
    rows = [(state, n) for state, n in deltas.items() if n]
    if rows:
        con.executemany("INSERT INTO point_counts (state, n) VALUES (?, ?) "
                        "ON CONFLICT(state) DO UPDATE SET n = n + excluded.n", rows)
    if now is not None:  # strictly growing: it also tells whether anything changed since (see poll_memo)
        con.execute("UPDATE sweep SET updated_at = MAX(?, updated_at + 0.000001)", (now,))


def move(con: sqlite3.Connection, old: str, new: str, n: int, now: float) -> None:
    """``n`` points went from state ``old`` to state ``new`` at ``now``."""
    if n and old != new:
        shift(con, {old: -n, new: n}, now)
    else:
        shift(con, {}, now)


def recount(con: sqlite3.Connection) -> None:
    """Count the points of every state again (a new or upgraded ledger)."""
    con.execute("DELETE FROM point_counts")
    con.execute("INSERT INTO point_counts (state, n) SELECT state, COUNT(*) FROM points GROUP BY state")


def create_point_indexes(con: sqlite3.Connection) -> None:
    """The indexes of ``points`` (a new ledger makes them once its points are written)."""
    con.execute(POINT_ID_INDEX)
    for stmt in POINT_INDEXES:
        con.execute(stmt)


def stored_version(con: sqlite3.Connection) -> int | None:
    """The ledger's schema version, or ``None`` when it holds no sweep yet."""
    if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sweep'").fetchone():
        return None
    row = con.execute("SELECT schema_version FROM sweep").fetchone()
    if row is None:
        return None
    if isinstance(row[0], int) and not isinstance(row[0], bool) and 0 < row[0] < 10**6:
        return row[0]
    raise LedgerError(f"the sweep ledger's schema version is {row[0]!r}, not a version number: the ledger was "
                      "written by something other than hpcjobs, or damaged")


def upgrade(con: sqlite3.Connection, path: Path) -> None:
    """Bring the ledger to :data:`SCHEMA_VERSION` inside the caller's write transaction (a no-op when it is).

    Raises:
        LedgerError: The ledger is newer than this hpcjobs, or of a version it does not know.
    """
    version = stored_version(con)
    if version is None or version == SCHEMA_VERSION:
        return
    if version != 1:
        raise LedgerError(f"the sweep ledger {path} has schema version {version}; this hpcjobs reads "
                          f"{SCHEMA_VERSION} (and upgrades 1)")
    columns = {r[1] for r in con.execute("PRAGMA table_info(sweep)")}
    if "points_digest" not in columns:
        con.execute("ALTER TABLE sweep ADD COLUMN points_digest TEXT")
    for stmt in _AUX_SCHEMA.split(";"):
        if stmt.strip():
            con.execute(stmt)
    con.execute("CREATE TABLE IF NOT EXISTS point_counts (state TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
    recount(con)
    for name in ("points_state", "points_token", "submission_points_point"):
        con.execute(f"DROP INDEX IF EXISTS {name}")
    for stmt in POINT_INDEXES:
        con.execute(stmt)
    con.execute("UPDATE sweep SET updated_at = MAX(created_at, COALESCE((SELECT MAX(updated_at) FROM points), 0)), "
                "schema_version = ?", (SCHEMA_VERSION,))
