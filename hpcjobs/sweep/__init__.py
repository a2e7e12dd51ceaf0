"""Parameter sweeps: a sweep's points, the crash-safe ledger, and the submitter that drives them.

Its parts:

- :mod:`hpcjobs.sweep.points`: the ``sweep:`` spec expanded into points with stable ids
  (:func:`expand`, :func:`parse_overrides`, :func:`point_env_file_text`; streamed for large sweeps).
- :mod:`hpcjobs.sweep.ledger`: :class:`Ledger` (SQLite, one transaction per state change) and
  :class:`SubmitterLock`.
- the modules here: preparing a sweep (``prepare``, ``chunks``, ``chunk_files``, ``pack``), submitting
  and polling it (``submitter``, ``poll``, ``lookup``, ``retire``, ``pipeline``, ``local``,
  ``local_procs``), finding it again (``identity``, ``find``, ``listing``, ``logs``, ``log_files``),
  single jobs (``singles``, ``singles_read``), results (``results``) and the public calls (``api``).

The ``sweep:`` section's pydantic models (:class:`SweepSpec`, :func:`env_name`, ...) are configuration:
:mod:`hpcjobs.config.sweep`, re-exported here. Names are imported lazily, so
``from hpcjobs.sweep.ledger import Ledger`` (status polling on a login node) does not import pydantic.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **dict.fromkeys(("SweepSpec", "RandomParam", "RandomSweep", "WandbParam", "env_name", "env_names", "parse_sweep"),
                    "hpcjobs.config.sweep"),
    **dict.fromkeys(("Filter", "FilterError", "compile_filter"), "hpcjobs.config.sweep_filter"),
    "expand": "hpcjobs.sweep.points.expand", "parse_overrides": "hpcjobs.sweep.points.overrides",
    **dict.fromkeys(("Point", "point_env_file_text", "canonical_json", "point_id", "env_value"),
                    "hpcjobs.sweep.points.point"),
    **dict.fromkeys(("Ledger", "SweepMeta", "PointRecord", "Submission", "SubmitterLock", "new_token",
                     "experiment_sha256"), "hpcjobs.sweep.ledger"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcjobs.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
