"""The one check of a random sweep's distribution parameters, for the native ``random:`` part and W&B files.

A distribution is drawn with Python's ``random.Random`` (:mod:`hpcjobs.sweep.points.sampling`), in
floating point. Its parameters are accepted only when every draw is a finite number:

- each of ``min``, ``max``, ``mu``, ``sigma`` and ``q`` is a finite real number (not NaN, not
  ``.inf``, not an integer too large for a float) and not a boolean (:data:`FiniteNumber`,
  :data:`FiniteFloat`; booleans are refused for every number of every schema by
  :class:`hpcjobs.config.types.StrictModel`);
- the bounds are ordered, and ``max - min`` is itself finite (``-1e308``..``1e308`` is not);
- ``sigma > 0``, and ``mu ± 13·sigma`` is finite: ``random.Random.normalvariate`` never draws a
  standard normal beyond :data:`NORMAL_REACH` (its ratio-of-uniforms method keeps ``z² ≤ -4 log u``
  with ``u ≥ 2⁻⁵³``, so ``|z| < 12.2``);
- for a distribution that draws ``exp`` of something (``log_uniform`` with exponents,
  ``inv_log_uniform``, ``log_normal``), that something stays at most :data:`EXP_LIMIT`, where ``exp``
  is finite; a distribution given values (``log_uniform_values``) needs ``0 < min``;
- ``q > 0``, and the largest value the distribution reaches is at most :data:`MAX_Q_STEPS` times
  ``q``: beyond it ``round(x / q)`` has no exact integer steps (and a tiny ``q`` overflows).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = ["EXP_LIMIT", "MAX_Q_STEPS", "NATIVE_KINDS", "NORMAL_REACH", "FiniteFloat", "FiniteNumber",
           "check_distribution", "check_finite"]

#: ``exp(x)`` is a finite float for ``x`` up to about 709.78; the bound leaves room for rounding.
EXP_LIMIT = 709.0
#: How many standard deviations a normal draw of ``random.Random.normalvariate`` can reach at most (12.2, rounded up).
NORMAL_REACH = 13.0
#: Most steps of size ``q`` between 0 and the largest value: ``round(x / q)`` is exact up to 2**53.
MAX_Q_STEPS = 2**53

#: The W&B distribution each native distribution draws like (the checks are written for these names).
NATIVE_KINDS = {"uniform": "uniform", "log_uniform": "log_uniform_values", "int_uniform": "int_uniform",
                "choice": "categorical", "normal": "normal"}

_BOUNDED = frozenset({"int_uniform", "uniform", "q_uniform", "log_uniform", "log_uniform_values", "q_log_uniform",
                      "q_log_uniform_values", "inv_log_uniform", "inv_log_uniform_values"})
_NORMAL = frozenset({"normal", "q_normal", "log_normal", "q_log_normal"})
_QUANTISED = frozenset({"q_uniform", "q_log_uniform", "q_log_uniform_values", "q_normal", "q_log_normal"})
_POSITIVE_VALUES = frozenset({"log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values"})


def check_finite(value: Any) -> Any:
    """Refuse a number that is not a finite float (NaN, ±inf, an integer beyond the float range).

    Raises:
        ValueError: What was given and what is expected (pydantic places it at the key's file:line).
    """
    try:
        as_float = float(value)
    except OverflowError:
        raise ValueError(f"expected a finite number, got an integer of {len(str(abs(value)))} digits, beyond "
                         "the range of floating-point numbers") from None
    if not math.isfinite(as_float):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


#: A bound or step (``min``, ``max``, ``q``): an integer or a float, finite.
FiniteNumber = Annotated[int | float, AfterValidator(check_finite)]
#: ``mu`` or ``sigma``: a finite float.
FiniteFloat = Annotated[float, AfterValidator(check_finite)]


def _span(low: float, high: float) -> float:
    """``high - low`` as a float (``inf`` when it overflows)."""
    try:
        return float(high) - float(low)
    except OverflowError:
        return math.inf


def _reach(kind: str, low: float, high: float, mu: float, sigma: float) -> float:
    """The largest absolute value a distribution draws before quantising (the parameters already checked)."""
    if kind in ("log_uniform", "q_log_uniform"):
        return math.exp(high)
    if kind == "inv_log_uniform":
        return math.exp(-low)
    if kind in ("normal", "q_normal"):
        return abs(mu) + NORMAL_REACH * sigma
    if kind in ("log_normal", "q_log_normal"):
        return math.exp(mu + NORMAL_REACH * sigma)
    return max(abs(float(low)), abs(float(high)))


def check_distribution(name: str, kind: str, *, low: float | None = None, high: float | None = None,
                       mu: float | None = None, sigma: float | None = None, q: float | None = None,
                       strict_order: bool = False) -> None:
    """Refuse distribution parameters whose draws could be anything but finite numbers (see the module docs).

    Args:
        name: The distribution as the file spells it (``log_uniform`` of the native form), for messages.
        kind: What it draws, as the W&B name (:data:`NATIVE_KINDS` maps the native names).
        low: ``min`` (present for the bounded distributions; the caller checks presence).
        high: ``max``.
        mu: ``mu`` (``None``: W&B's default 0).
        sigma: ``sigma`` (``None``: W&B's default 1); refused when not positive, even where unused.
        q: ``q`` (``None``: not given; the quantised distributions then use 1).
        strict_order: ``min < max`` (the native form) rather than ``min <= max`` (W&B).

    Raises:
        ValueError: The first problem, naming the keys and what would be accepted.
    """
    if q is not None and q <= 0:
        raise ValueError(f"q must be positive, got {q}")
    if sigma is not None and sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    mu = 0.0 if mu is None else mu
    sigma = 1.0 if sigma is None else sigma
    if kind in _BOUNDED:
        if low is None or high is None:
            raise ValueError(f"distribution {name} needs 'min' and 'max'")
        if strict_order and not low < high:
            raise ValueError(f"min ({low}) must be below max ({high})")
        if not low <= high:
            raise ValueError(f"min ({low}) must not be above max ({high})")
        if kind == "int_uniform" and not (isinstance(low, int) and isinstance(high, int)):
            raise ValueError(f"{name} needs integer min and max")
        if kind in _POSITIVE_VALUES and low <= 0:
            raise ValueError(f"{name} needs 0 < min, got min={low}")
        if not math.isfinite(_span(low, high)):
            raise ValueError(f"min ({low}) and max ({high}) are too far apart: max - min is not a finite number")
        if kind in ("log_uniform", "q_log_uniform") and high > EXP_LIMIT:
            raise ValueError(f"{name} draws exp(x) for x from min to max (exponents): max ({high}) must be at most "
                             f"{EXP_LIMIT:g}, or exp(max) is not a finite number (log_uniform_values takes the "
                             "values themselves)")
        if kind == "inv_log_uniform" and -low > EXP_LIMIT:
            raise ValueError(f"{name} draws exp(-x) for x from min to max: min ({low}) must be at least "
                             f"{-EXP_LIMIT:g}, or exp(-min) is not a finite number")
        if kind == "inv_log_uniform_values" and not math.isfinite(1 / low):
            raise ValueError(f"{name} draws through 1/min: min ({low}) is so small that 1/min is not a finite number")
    if kind in _NORMAL:
        if kind in ("normal", "q_normal") and not math.isfinite(abs(mu) + NORMAL_REACH * sigma):
            raise ValueError(f"{name} draws up to mu ± {NORMAL_REACH:g}·sigma: with mu={mu} and sigma={sigma} that "
                             "is not a finite number")
        if kind in ("log_normal", "q_log_normal") and not mu + NORMAL_REACH * sigma <= EXP_LIMIT:
            raise ValueError(f"{name} draws exp(mu + z·sigma) with |z| up to {NORMAL_REACH:g}: mu + "
                             f"{NORMAL_REACH:g}·sigma (mu={mu}, sigma={sigma}) must be at most {EXP_LIMIT:g}, or the "
                             "value is not a finite number")
    if kind in _QUANTISED:
        step = 1 if q is None else q
        reach = _reach(kind, 0.0 if low is None else low, 0.0 if high is None else high, mu, sigma)
        if not reach / step <= MAX_Q_STEPS:
            raise ValueError(f"q ({step}) is too small for values up to {reach:g}: at most {MAX_Q_STEPS:,} steps "
                             f"of q fit (q must be at least {reach / MAX_Q_STEPS:g})")
