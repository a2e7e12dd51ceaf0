"""The sweep ledger: the crash-safe SQLite record of every point and every submission attempt.

- :mod:`hpcjobs.sweep.ledger.store`: :class:`Ledger` itself (one transaction per state change,
  the submit protocol), :func:`new_token`, :func:`experiment_sha256`, :func:`choose_journal_mode`.
- :mod:`hpcjobs.sweep.ledger.schema`: the SQL schema, the point and submission states, the records
  (:class:`SweepMeta`, :class:`PointRecord`, :class:`Submission`) and the connection.
- :mod:`hpcjobs.sweep.ledger.counts`, :mod:`~hpcjobs.sweep.ledger.plan`, :mod:`~hpcjobs.sweep.ledger.read`,
  :mod:`~hpcjobs.sweep.ledger.status`, :mod:`~hpcjobs.sweep.ledger.recovery`,
  :mod:`~hpcjobs.sweep.ledger.upstreams`: the parts :class:`Ledger` is made of (per-state counts,
  writing the points, reading them, status polls, a lying scheduler's aftermath, pipelines).
- :mod:`hpcjobs.sweep.ledger.lock`: :class:`SubmitterLock`, the ``flock`` one submitter holds.

The public names of :mod:`~hpcjobs.sweep.ledger.store` are re-exported here, so
``from hpcjobs.sweep.ledger import Ledger`` works (it does not import pydantic: status polling on a
login node stays light).
"""

from __future__ import annotations

from hpcjobs.sweep.ledger.store import (
    LEDGER_FILE,
    LOCK_FILE,
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
    Ledger,
    PointLike,
    PointRecord,
    StrayJob,
    Submission,
    SubmitterLock,
    SweepMeta,
    UnseenJob,
    UpstreamRecord,
    choose_journal_mode,
    experiment_sha256,
    new_token,
)

__all__ = [
    "LEDGER_FILE", "LOCK_FILE", "PLANNED", "POINT_STATES", "REMOVED", "SCHEMA_VERSION", "SUBMITTED", "SUBMITTING",
    "SUB_FAILED", "SUB_SUBMITTED", "SUB_SUBMITTING", "SUB_UNKNOWN", "UNRESOLVED", "Ledger", "PointLike", "PointRecord",
    "StrayJob", "Submission", "SubmitterLock", "SweepMeta", "UnseenJob", "UpstreamRecord", "choose_journal_mode",
    "experiment_sha256", "new_token",
]
