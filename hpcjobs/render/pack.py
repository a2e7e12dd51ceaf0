"""What the templates need to render a packed array task (the experiment's ``pack:``).

A packed task runs several sweep points: ``templates/base.sh.j2`` wraps the point's own part of the
script (the sweep preamble that reads the point's parameters, ``workdir``, ``setup``, ``body``) in a
shell function ``hpcjobs_point``, and ``templates/pack.sh.j2`` starts it once per point of the task:

- ``per_node``: all at once, each with ``cpus/K`` CPUs and ``gpus/K`` GPUs. On Slurm each point is a
  job step, ``srun --exact -n1 -c <cpus/K> --job-name=<point id>`` (``--exact`` keeps a step to the
  CPUs it asked for, so the steps run side by side; see the srun man page), and ``sacct`` has one
  step per point with its own MaxRSS and TotalCPU. Elsewhere each point is a background process with
  its slice of ``CUDA_VISIBLE_DEVICES``.
- ``sequential``: one after another, each with the whole allocation (on Slurm, still one step each).

After each point the task writes ``<run folder>/hpcjobs-exit.<token>`` holding its exit status, so
that the ledger can tell the points a killed task had finished from those it had not
(:mod:`hpcjobs.sweep.pack`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXIT_FILE_PREFIX", "PackPlan", "exit_file_name"]

#: A finished point's exit status is in ``<run folder>/<EXIT_FILE_PREFIX><submission token>``.
EXIT_FILE_PREFIX = "hpcjobs-exit."


def exit_file_name(token: str) -> str:
    """The name of the exit-status file a packed task writes for a point of submission ``token``."""
    return f"{EXIT_FILE_PREFIX}{token}"


@dataclass(frozen=True)
class PackPlan:
    """One packed array task, as the templates see it (``pack`` in the context).

    Attributes:
        mode: ``per_node`` (points at once) or ``sequential``.
        size: Points per task (K).
        cpus: CPUs of each point (``cpus/K`` per node for ``per_node``, all of them for ``sequential``).
        gpus: GPUs of each point.
        memory_mb: Memory of each point in MiB on Slurm (``--mem`` of its step), or ``None`` (Slurm's default).
        task_setup: Lines run once by the task before its points (the sweep's exports).
        ids_file: Shell expression of the chunk's ``.ids`` file (point id of chunk index i on line i+1).
    """

    mode: str
    size: int
    cpus: int
    gpus: int
    memory_mb: int | None
    task_setup: tuple[str, ...]
    ids_file: str

    @property
    def parallel(self) -> bool:
        """Whether the points run at once."""
        return self.mode == "per_node"
