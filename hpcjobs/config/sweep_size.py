"""How many points a sweep has, computed from its spec before a single point is built.

A sweep is a product of parts, so a few short lists can describe more points than any machine
holds (four grid lists of 1,000 values are 10^12 points). :func:`check_sweep_size` multiplies the
sizes of the parts arithmetically (grid and zip list lengths, explicit points, random
``samples``, W&B grid sizes and ``run_cap``, the command-line overrides, the sum over ``union``
items) and refuses a sweep over the limit before :func:`hpcjobs.sweep.points.expand.expand` materialises
anything. ``exclude`` and ``filter`` only drop points after the product is built, so the limit
applies to the product.

The limit is ``max_points:`` under ``sweep:`` in the experiment, else the environment variable
``HPCJOBS_MAX_POINTS``, else :data:`DEFAULT_MAX_POINTS`; none can exceed
:data:`hpcjobs.config.sweep.MAX_POINTS_CEILING` (the spec refuses a larger setting).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hpcjobs.config.sweep import MAX_POINTS_CEILING, flatten_wandb
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.units import is_ascii_digits

#: Points per sweep unless ``max_points:`` or ``$HPCJOBS_MAX_POINTS`` says otherwise.
DEFAULT_MAX_POINTS = 1_000_000
#: The environment variable that sets the limit for sweeps without ``max_points:``.
MAX_POINTS_ENV = "HPCJOBS_MAX_POINTS"


def max_points_limit(setting: int | None = None) -> int:
    """The points-per-sweep limit: ``setting`` (``max_points:``), else ``$HPCJOBS_MAX_POINTS``, else the default.

    Raises:
        ConfigError: ``$HPCJOBS_MAX_POINTS`` is not a positive integer up to :data:`MAX_POINTS_CEILING`.
    """
    if setting is not None:
        return setting
    raw = os.environ.get(MAX_POINTS_ENV, "").strip().replace("_", "")
    if not raw:
        return DEFAULT_MAX_POINTS
    if not is_ascii_digits(raw) or len(raw) > 12 or not 0 < int(raw) <= MAX_POINTS_CEILING:
        raise ConfigError(ConfigProblem(
            f"{MAX_POINTS_ENV}={os.environ[MAX_POINTS_ENV]!r} is not a number of points from 1 to "
            f"{MAX_POINTS_CEILING:,}", key=MAX_POINTS_ENV))
    return int(raw)


def range_count(start: int | float, stop: int | float, step: int | float) -> int:
    """How many values ``range(start, stop, step)`` gives (floats allowed), computed without iterating.

    Raises:
        ValueError: ``step`` is 0, or the count is not a finite number (``range(0, 1e300, 1e-300)``).
    """
    if step == 0:
        raise ValueError("range() step cannot be 0")
    if all(isinstance(a, int) for a in (start, stop, step)):
        if step > 0:
            return int(max(0, (stop - start + step - 1) // step))
        return int(max(0, (start - stop - step - 1) // -step))
    try:
        span = (stop - start) / step
    except OverflowError:
        span = math.inf
    if not math.isfinite(span):
        raise ValueError(f"range({start}, {stop}, {step}) does not have a finite number of values")
    return max(0, math.ceil(span))


def wandb_grid_size(param: Any) -> int:
    """The number of values W&B's grid search enumerates for one parameter (a :class:`WandbParam`).

    Raises:
        ValueError: A ``q_uniform`` whose ``(max - min) / q`` is not finite.
    """
    kind = param.kind()
    if kind == "constant":
        return 1
    if kind == "categorical":
        return len(param.values or [])
    if kind == "int_uniform":
        return max(0, int(param.max) - int(param.min) + 1)
    q = param.q if param.q is not None else 1  # q_uniform: arange(min, max, q), max excluded
    return range_count(param.min, param.max, q)


def _product(sizes: Sequence[int]) -> int:
    out = 1
    for n in sizes:
        out *= n
    return out


def sweep_parts(spec: Any, overrides: Mapping[str, Sequence[Any]] | None = None) -> list[tuple[str, int]]:
    """The factors of a sweep's product: ``(what, size)`` per part, in expansion order.

    Args:
        spec: A :class:`hpcjobs.config.sweep.SweepSpec`.
        overrides: The command-line grid (parameter → values), or ``None``.

    Raises:
        ValueError: A W&B grid parameter with no finite number of values.
    """
    parts: list[tuple[str, int]] = []
    if spec.is_wandb:
        flat = flatten_wandb(spec.parameters or {})
        if spec.method == "grid":
            sizes = [wandb_grid_size(p) for p in flat.values()]
            size = _product(sizes)
            if spec.run_cap:
                size = min(size, spec.run_cap)
            parts.append(("W&B grid " + " × ".join(map(str, sizes)) + (f" capped by run_cap {spec.run_cap}"
                                                                          if spec.run_cap else ""), size))
        else:
            count = spec.samples if spec.samples is not None else spec.run_cap
            parts.append((f"W&B random {count} samples", count or 0))
    else:
        if spec.grid:
            parts.append(("grid " + " × ".join(str(len(v)) for v in spec.grid.values()),
                          _product([len(v) for v in spec.grid.values()])))
        for group in spec.zip or []:
            parts.append((f"zip {len(next(iter(group.values())))}", len(next(iter(group.values())))))
        if spec.points:
            parts.append((f"points {len(spec.points)}", len(spec.points)))
        if spec.random:
            parts.append((f"random {spec.random.samples} samples", spec.random.samples))
        if spec.union:
            sizes = [count_points(sub) for sub in spec.union]
            parts.append(("union " + " + ".join(map(str, sizes)), sum(sizes)))
    if overrides:
        parts.append(("command-line " + " × ".join(str(len(v)) for v in overrides.values()),
                      _product([len(v) for v in overrides.values()])))
    return parts


def count_points(spec: Any, overrides: Mapping[str, Sequence[Any]] | None = None) -> int:
    """The number of points of the sweep's product, before ``exclude``/``filter`` and duplicates.

    Raises:
        ValueError: A W&B grid parameter with no finite number of values.
    """
    return _product([n for _, n in sweep_parts(spec, overrides)])


def check_sweep_size(spec: Any, overrides: Mapping[str, Sequence[Any]] | None = None) -> int:
    """Refuse a sweep whose product has more points than the limit, before any point is built.

    Args:
        spec: A :class:`hpcjobs.config.sweep.SweepSpec`.
        overrides: The command-line grid, or ``None``.

    Returns:
        The number of points of the product.

    Raises:
        ConfigError: Over the limit (the message gives the count, its factors, the limit and how to
            raise it), or a W&B grid parameter with no finite number of values; keyed ``sweep``.
    """
    try:
        parts = sweep_parts(spec, overrides)
    except ValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="sweep.parameters")) from None
    count = _product([n for _, n in parts])
    limit = max_points_limit(getattr(spec, "max_points", None))
    if count <= limit:
        return count
    shown = f"{count:,}" if count < 10**30 else f"about 10^{len(str(count)) - 1}"
    how = (f"raise it with `max_points: N` under `sweep:` or the environment variable {MAX_POINTS_ENV} "
           f"(at most {MAX_POINTS_CEILING:,})")
    if count > MAX_POINTS_CEILING:
        how += ", or, as no setting allows this many, split the sweep into several"
    raise ConfigError(ConfigProblem(
        f"the sweep has {shown} points ({' × '.join(w for w, _ in parts)}), over the limit of {limit:,} points "
        f"per sweep; exclude and filter drop points only after the product is built, so the limit applies "
        f"to the product; {how}", key="sweep"))
