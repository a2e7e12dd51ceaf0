"""hpcjobs: from an experiment YAML to jobs on Slurm and PBS clusters, and back to answers.

``import hpcjobs`` is light; :func:`load_sweep` (pandas) loads on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load_sweep"]


def __getattr__(name: str) -> Any:
    if name == "load_sweep":
        from hpcjobs.analysis import load_sweep

        return load_sweep
    raise AttributeError(f"module 'hpcjobs' has no attribute {name!r}")
