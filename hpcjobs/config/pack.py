"""The experiment's ``pack:`` key: several sweep points in one allocation.

``pack: {per_node: K}`` runs K points at once inside one array task, each with its share of the
node's CPUs and GPUs; ``pack: {sequential: K}`` runs K points one after another in one task. The
packed script is rendered by ``templates/pack.sh.j2`` (see :mod:`hpcjobs.render.pack`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from hpcjobs.config.types import StrictModel

__all__ = ["PACK_MAX", "Pack", "pack_share_problems"]

#: Most points one array task may carry (a bound against typos such as 10000).
PACK_MAX = 1024


class Pack(StrictModel):
    """How many sweep points one array task runs: at once (``per_node``) or one after another (``sequential``)."""

    per_node: PositiveInt | None = Field(
        None, le=PACK_MAX,
        description="Run this many points at once in one job on one node; each gets cpus/K CPUs, gpus/K GPUs "
        "(CUDA_VISIBLE_DEVICES), its own run folder, logs and exit status (Slurm: one srun --exact step each).",
    )
    sequential: PositiveInt | None = Field(
        None, le=PACK_MAX, description="Run this many points one after another in one job.",
    )

    @model_validator(mode="after")
    def _one_mode(self) -> Pack:
        if (self.per_node is None) == (self.sequential is None):
            raise ValueError("give exactly one of 'per_node' or 'sequential', e.g. pack: {per_node: 4}")
        return self

    @property
    def mode(self) -> Literal["per_node", "sequential"]:
        """``per_node`` (points at once) or ``sequential`` (one after another)."""
        return "per_node" if self.per_node is not None else "sequential"

    @property
    def size(self) -> int:
        """Points per array task."""
        return int(self.per_node if self.per_node is not None else self.sequential or 1)


def pack_share_problems(pack: Pack, *, nodes: int, cpus: int, gpus: int, launcher: str | None) -> list[tuple[str, str]]:
    """Why the job cannot be shared among ``pack.per_node`` points, as (key, message) pairs.

    Args:
        pack: The ``pack:`` section.
        nodes: ``resources.nodes``.
        cpus: CPUs per node the job asks for (``tasks_per_node * cpus_per_task``).
        gpus: ``resources.gpus_per_node``.
        launcher: ``launch.launcher`` when the experiment has a ``launch:`` section that starts a program.
    """
    out: list[tuple[str, str]] = []
    if launcher:
        out.append(("pack", f"pack cannot be combined with launch (launcher {launcher!r} starts one program per "
                            "job; packed points run command or script)"))
    if pack.per_node is None:
        return out
    k = pack.per_node
    if nodes != 1:
        out.append(("pack.per_node", f"per_node packs points on one node; resources.nodes is {nodes}"))
    if gpus % k:
        out.append(("pack.per_node", f"{gpus} GPU(s) per node cannot be split evenly among {k} points "
                                     f"(resources.gpus_per_node must be a multiple of {k})"))
    if cpus % k:
        out.append(("pack.per_node", f"{cpus} CPU(s) cannot be split evenly among {k} points (resources."
                                     f"tasks_per_node * cpus_per_task must be a multiple of {k})"))
    return out
