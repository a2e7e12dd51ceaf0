"""What a request costs: core-hours, GPU-hours and Slurm billing units at its requested wall time.

Slurm bills a job by its ``billing`` TRES: "the sum of all TRES types multiplied by their
corresponding billing weight" from the partition's ``TRESBillingWeights`` (slurm.conf(5)), e.g.
``CPU=1.0,Mem=0.25G,GRES/gpu=2.0``. A memory weight without a suffix is per megabyte; a suffix
``K``, ``M``, ``G``, ``T`` or ``P`` makes it per that unit ("a memory weight of mem=.25 on a job
allocated 8GB will be billed 2048 (8192MB *.25) units. A memory weight of mem=.25G on the same job
will be billed 2"). Without ``TRESBillingWeights`` a job is billed its allocated CPUs. Sites with
``PriorityFlags=MAX_TRES`` bill the largest per-node TRES instead of the sum: not modelled here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_WEIGHT = re.compile(r"^(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)(?P<unit>[KMGTP]?)$")
#: A memory-weight suffix → megabytes per unit.
_MB_PER_UNIT = {"": 1.0, "M": 1.0, "K": 1 / 1024, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


class BillingWeightsError(ValueError):
    """A ``TRESBillingWeights`` value that is not ``NAME=NUMBER[,NAME=NUMBER...]``."""


def parse_billing_weights(text: str) -> dict[str, float]:
    """``TRESBillingWeights`` → weight per TRES (names lower-cased; ``mem`` per megabyte).

    Args:
        text: E.g. ``CPU=1.0,Mem=0.25G,GRES/gpu=2.0,GRES/gpu:a100=4``.

    Returns:
        ``{"cpu": 1.0, "mem": 0.000244..., "gres/gpu": 2.0, "gres/gpu:a100": 4.0}``.

    Raises:
        BillingWeightsError: An item is not ``NAME=NUMBER`` (with an optional unit suffix).
    """
    out: dict[str, float] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        m = _WEIGHT.match(value.strip())
        if not sep or not name.strip() or m is None:
            raise BillingWeightsError(f"not a TRES weight: {item!r} (expected NAME=NUMBER, e.g. CPU=1.0 or Mem=0.25G)")
        key = name.strip().lower()
        weight = float(m["value"])
        if key == "mem":
            weight /= _MB_PER_UNIT[m["unit"]]
        out[key] = weight
    return out


@dataclass(frozen=True)
class Cost:
    """A request's cost at its requested wall time.

    Attributes:
        core_hours: CPUs (nodes × tasks per node × CPUs per task) × hours.
        gpu_hours: GPUs (nodes × GPUs per node) × hours.
        billing_hours: Slurm billing units × hours (CPUs × hours when the partition has no weights).
        billing_known: Whether ``billing_hours`` comes from the partition's ``TRESBillingWeights``.
    """

    core_hours: float
    gpu_hours: float
    billing_hours: float
    billing_known: bool


def request_cost(*, nodes: int, cpus_per_node: int, gpus_per_node: int, memory_per_node: int | None,
                 walltime_s: int | None, weights: Mapping[str, float] | None = None,
                 gpu_type: str | None = None) -> Cost | None:
    """The cost of a request; ``None`` when it names no wall time (nothing to multiply by).

    Args:
        nodes: Nodes.
        cpus_per_node: CPUs per node (tasks per node × CPUs per task).
        gpus_per_node: GPUs per node.
        memory_per_node: Bytes per node, ``None`` when not requested (not billed).
        walltime_s: Requested wall time in seconds.
        weights: :func:`parse_billing_weights` of the partition, ``None`` when unknown.
        gpu_type: The GPU model asked for (its ``gres/gpu:<type>`` weight is added when there is one).
    """
    if not walltime_s:
        return None
    hours = walltime_s / 3600
    cpus, gpus = nodes * cpus_per_node, nodes * gpus_per_node
    if weights is None:
        return Cost(cpus * hours, gpus * hours, cpus * hours, False)
    units = cpus * weights.get("cpu", 0.0) + nodes * weights.get("node", 0.0)
    if memory_per_node:
        units += nodes * memory_per_node / 2**20 * weights.get("mem", 0.0)
    units += gpus * weights.get("gres/gpu", 0.0)
    if gpu_type:
        units += gpus * weights.get(f"gres/gpu:{gpu_type.lower()}", 0.0)
    return Cost(cpus * hours, gpus * hours, units * hours, True)
