"""Parameter sweeps: the ``sweep:`` spec, its expansion into points, and the crash-safe ledger.

- :mod:`hpcjobs.sweep.spec`: the pydantic models of the ``sweep:`` section (native grid / zip /
  points / random / union with exclude and filter, and the W&B sweep format), :func:`env_name`.
- :mod:`hpcjobs.sweep.expand`: :func:`expand` (spec + Hydra-style overrides → :class:`Point` s with
  stable ids), :func:`parse_overrides`, :func:`point_env_file_text`.
- :mod:`hpcjobs.sweep.ledger`: :class:`Ledger` (SQLite, one transaction per state change) and
  :class:`SubmitterLock`.

Names are imported lazily, so ``from hpcjobs.sweep.ledger import Ledger`` (status polling on a
login node) does not import pydantic.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SweepSpec": "spec", "RandomParam": "spec", "RandomSweep": "spec", "WandbParam": "spec", "Filter": "spec",
    "FilterError": "spec", "compile_filter": "spec", "env_name": "spec", "env_names": "spec", "parse_sweep": "spec",
    "Point": "expand", "expand": "expand", "parse_overrides": "expand", "point_env_file_text": "expand",
    "canonical_json": "expand", "point_id": "expand", "env_value": "expand",
    "Ledger": "ledger", "SweepMeta": "ledger", "PointRecord": "ledger", "Submission": "ledger",
    "SubmitterLock": "ledger", "new_token": "ledger", "experiment_sha256": "ledger",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcjobs.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hpcjobs.sweep.{module}"), name)
