"""Random draws and W&B grid values of a sweep's parameters, reproducible from a seed.

:func:`native_sampler` (the native ``random:`` part) and :func:`wandb_sampler` (a W&B random sweep)
give, for one parameter, a function of a ``random.Random`` that draws its value;
:func:`wandb_grid_values` lists what a W&B grid enumerates. The expansion
(:mod:`hpcjobs.sweep.points.stream`) combines them, each draw wrapped by :func:`guarded`.

The distributions' parameters are checked when the file is read
(:func:`hpcjobs.config.sweep_distributions.check_distribution`), so that every draw is a finite
number; :func:`guarded` is the last guard: a draw that still overflows or is not finite is an
error naming the parameter, never a point.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from hpcjobs.config.sweep import RandomParam, WandbParam
from hpcjobs.config.sweep_size import range_count
from hpcjobs.errors import ConfigError, ConfigProblem


def _quantize(x: float, q: float) -> float | int:
    r = round(x / q) * q
    return int(r) if isinstance(q, int) else r


def _num(value: float | None, default: float = 0.0) -> float:
    """A bound the model validated as present (``default`` only for W&B's optional mu/sigma/q)."""
    return default if value is None else value


def _uniform_int(lo: int, hi: int) -> Callable[[random.Random], int]:
    span = hi - lo + 1
    return lambda rng: lo + min(int(rng.random() * span), span - 1)


def _pick(values: Sequence[Any]) -> Callable[[random.Random], Any]:
    n = len(values)
    return lambda rng: values[min(int(rng.random() * n), n - 1)]


def guarded(draw: Callable[[random.Random], Any], *, name: str, key: str) -> Callable[[random.Random], Any]:
    """``draw``, refusing an arithmetic error or a value that is not a finite number.

    Args:
        draw: A sampler of :func:`native_sampler` or :func:`wandb_sampler`.
        name: The parameter (for the message).
        key: Its dotted key path in the experiment (``sweep.random.parameters.lr``), to locate the problem.

    The returned function raises :class:`hpcjobs.errors.ConfigError` (exit 2) instead of ``OverflowError``,
    ``ValueError`` or ``ZeroDivisionError``, and instead of returning NaN or an infinity.
    """
    def checked(rng: random.Random) -> Any:
        try:
            value = draw(rng)
        except (ArithmeticError, ValueError) as exc:
            raise ConfigError(ConfigProblem(
                f"drawing parameter {name!r} failed ({exc}): its distribution's numbers are out of the range of "
                "floating-point arithmetic", key=key, expected="smaller bounds")) from None
        if value.__class__ is float and not math.isfinite(value):
            raise ConfigError(ConfigProblem(
                f"parameter {name!r} drew {value!r}, which is not a finite number", key=key,
                expected="bounds whose draws are finite numbers"))
        return value
    return checked


def native_sampler(p: RandomParam) -> Callable[[random.Random], Any]:
    """A draw for one native random parameter.

    Every draw is built on ``Random.random()`` alone (plus ``normalvariate``, itself built on it),
    whose sequence for a seed has not changed across Python versions, so a sweep expands to the
    same points wherever it is resumed.
    """
    lo, hi = _num(p.min), _num(p.max)
    if p.distribution == "uniform":
        width = hi - lo
        return lambda rng: lo + width * rng.random()
    if p.distribution == "log_uniform":
        a, b = math.log(lo), math.log(hi)
        return lambda rng: math.exp(a + (b - a) * rng.random())
    if p.distribution == "int_uniform":
        return _uniform_int(int(lo), int(hi))
    if p.distribution == "choice":
        return _pick(list(p.values or []))
    mu, sigma = _num(p.mu), _num(p.sigma, 1.0)
    return lambda rng: rng.normalvariate(mu, sigma)


def wandb_sampler(p: WandbParam) -> Callable[[random.Random], Any]:
    """A draw following W&B's documented distributions (sweep configuration reference)."""
    kind = p.kind()
    lo, hi = _num(p.min), _num(p.max)
    q: float = p.q if p.q is not None else 1
    mu, sigma = _num(p.mu), _num(p.sigma, 1.0)
    if kind == "constant":
        value = p.value
        return lambda rng: value
    if kind == "categorical":
        values = list(p.values or [])
        if p.probabilities is not None:
            weights = list(p.probabilities)
            return lambda rng: rng.choices(values, weights=weights)[0]
        return _pick(values)
    if kind == "int_uniform":
        return _uniform_int(int(lo), int(hi))
    if kind == "uniform":
        return lambda rng: rng.uniform(lo, hi)
    if kind == "q_uniform":
        return lambda rng: _quantize(rng.uniform(lo, hi), q)
    if kind in ("log_uniform", "q_log_uniform"):  # min/max are exponents
        if kind == "q_log_uniform":
            return lambda rng: _quantize(math.exp(rng.uniform(lo, hi)), q)
        return lambda rng: math.exp(rng.uniform(lo, hi))
    if kind in ("log_uniform_values", "q_log_uniform_values"):
        a, b = math.log(lo), math.log(hi)
        if kind[0] == "q":
            return lambda rng: _quantize(math.exp(rng.uniform(a, b)), q)
        return lambda rng: math.exp(rng.uniform(a, b))
    if kind == "inv_log_uniform":  # log(1/X) uniform in [min, max]
        return lambda rng: math.exp(-rng.uniform(lo, hi))
    if kind == "inv_log_uniform_values":  # log(1/X) uniform in [log(1/max), log(1/min)]
        a, b = math.log(1 / hi), math.log(1 / lo)
        return lambda rng: math.exp(-rng.uniform(a, b))
    if kind == "normal":
        return lambda rng: rng.normalvariate(mu, sigma)
    if kind == "q_normal":
        return lambda rng: _quantize(rng.normalvariate(mu, sigma), q)
    if kind == "log_normal":
        return lambda rng: math.exp(rng.normalvariate(mu, sigma))
    return lambda rng: _quantize(math.exp(rng.normalvariate(mu, sigma)), q)  # q_log_normal


def wandb_grid_values(p: WandbParam) -> list[Any]:
    """The values W&B's grid search enumerates for one parameter (``q_uniform``: ``arange(min, max, q)``)."""
    kind = p.kind()
    if kind == "constant":
        return [p.value]
    if kind == "categorical":
        return list(p.values or [])
    if kind == "int_uniform":
        return list(range(int(_num(p.min)), int(_num(p.max)) + 1))
    q: float = p.q if p.q is not None else 1  # q_uniform: W&B enumerates arange(min, max, q), max excluded
    lo, hi = _num(p.min), _num(p.max)
    return [lo + i * q for i in range(range_count(lo, hi, q))]
