"""The ``sweep:`` section of an experiment: what a researcher writes to describe a parameter sweep.

Two forms are accepted.

**The native form** combines parts, each of which produces a list of points (a point is a
mapping of parameter names to scalar values)::

    sweep:
      grid: {lr: [0.1, 0.01], model.depth: [2, 4]}    # cartesian product, first key varies slowest
      zip: {seed: [1, 2, 3], tag: [a, b, c]}           # paired lists of equal length
      points: [{opt: adam}, {opt: sgd, momentum: 0.9}] # explicit points (keys may differ)
      random:                                          # `samples` draws, reproducible from `seed`
        seed: 0
        samples: 8
        parameters:
          wd: {distribution: log_uniform, min: 1.0e-5, max: 1.0e-2}
      union: [{...}, {...}]                            # sub-sweeps, concatenated
      exclude: [{lr: 0.1, model.depth: 4}]             # drop points matching every pair
      filter: "lr < 0.1 or model.depth >= 4"           # keep points where this is true

The parts present combine as a **product**, in the order written above (grid × zip × points ×
random × union), like nested for-loops whose outermost loop is the first part. ``zip`` may also be
a list of groups (``zip: [{a: .., b: ..}, {c: .., d: ..}]``): each group pairs its own lists and the
groups combine as a product (a grid of zips). ``union`` is the way to nest: each item is a complete
sweep (native or W&B, with its own ``exclude``/``filter``) and their points are concatenated, so
``{grid: {seed: [1, 2]}, union: [A, B]}`` is every seed × (the points of A, then those of B). A
parameter may be defined by only one part of a product (two parts naming ``lr`` is an error);
the items of a ``union`` are independent. An empty ``sweep: {}`` is one point with no parameters.

Native random distributions: ``uniform`` (``min``, ``max``), ``log_uniform`` (``min``, ``max``
are the bounds themselves, ``0 < min < max``: the logarithm is uniform between ``log(min)`` and
``log(max)``; note W&B's ``log_uniform`` takes exponents instead), ``int_uniform`` (integers
``min``..``max`` inclusive), ``choice`` (``values``), ``normal`` (``mu``, ``sigma``).

The numbers of both forms' distributions are checked once, by
:func:`hpcjobs.config.sweep_distributions.check_distribution`: finite, not booleans, ordered bounds,
``sigma > 0``, a ``q`` neither negative nor too small, and ``exp`` of the bounds finite, so that every
draw is a finite number.

**The Weights & Biases form** (``method: grid|random`` with ``parameters``), so people can bring
their W&B sweep files; see :class:`WandbParam` for the distributions. ``metric``, ``program``,
``name``, ``description``, ``early_terminate``, ``command``, ``entity`` and ``project`` are
accepted and ignored. A random W&B sweep draws ``samples`` points if given, else ``run_cap``;
``seed`` (an hpcjobs extension, default 0) makes the draw reproducible. ``run_cap`` also caps a
grid. ``method: bayes`` is refused: hpcjobs expands the whole sweep before submitting it.

``max_points:`` caps the number of points of the sweep's product (default ``$HPCJOBS_MAX_POINTS``,
else 1,000,000; see :mod:`hpcjobs.config.sweep_size`): it is computed before any point is built.

Parameter names are identifiers, dotted allowed (``model.depth``); values are scalars (text,
integer, float, boolean, null). Each point's parameters reach the job as environment variables
named by :func:`env_name` (``model.depth`` → ``model_depth``). The ``filter`` language is
:mod:`hpcjobs.config.sweep_filter`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, PositiveInt, WithJsonSchema, field_validator, model_validator

from hpcjobs.config.sweep_distributions import (
    NATIVE_KINDS,
    FiniteFloat,
    FiniteNumber,
    check_distribution,
    check_finite,
)
from hpcjobs.config.sweep_filter import compile_filter
from hpcjobs.config.types import RESERVED_ENV_NAMES, StrictModel
from hpcjobs.errors import ConfigError, ConfigProblem

#: A parameter value: text, integer, float, boolean or null.
Scalar = Union[bool, int, float, str, None]  # noqa: UP007 (pydantic needs the runtime union)

_PARAM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_value(value: Any) -> Any:
    """Refuse parameter values that cannot travel to a job intact.

    Raises:
        ValueError: A non-finite float (NaN breaks duplicate detection and JSON), text with a NUL
            character or an unpaired surrogate (neither can be an environment variable).
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"parameter values must be finite numbers, got {value!r}")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("parameter values cannot contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"parameter value {value!r} is not valid Unicode text") from None
    return value


def check_param_name(name: str) -> str:
    """Check a parameter name: an identifier, dots allowed (``model.depth``).

    Raises:
        ValueError: The name is not a (dotted) identifier.
    """
    if not _PARAM_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a valid parameter name: use letters, digits and _ (not starting with a digit), "
            "with dots between parts (model.depth)"
        )
    return name


#: A sweep parameter value (validated scalar).
SweepValue = Annotated[Scalar, AfterValidator(check_value)]
#: A sweep parameter name.
ParamName = Annotated[str, AfterValidator(check_param_name)]
Values = Annotated[list[SweepValue], Field(min_length=1)]
#: The most points any setting allows (also the most ``samples``/``run_cap`` a sweep may ask for).
MAX_POINTS_CEILING = 100_000_000


def check_count_setting(value: int) -> int:
    """Refuse a ``samples``/``run_cap``/``max_points`` value above :data:`MAX_POINTS_CEILING`.

    Raises:
        ValueError: The value is over the ceiling (pydantic turns this into a located problem).
    """
    if value > MAX_POINTS_CEILING:
        raise ValueError(f"{value} is over the most points a sweep can have ({MAX_POINTS_CEILING:,}); "
                         "split the sweep into several")
    return value


#: A number of points (``samples``, ``run_cap``, ``max_points``): positive, at most :data:`MAX_POINTS_CEILING`.
PointCount = Annotated[PositiveInt, AfterValidator(check_count_setting)]


def env_name(param: str) -> str:
    """The environment variable a parameter is exported as: ``model.depth`` → ``model_depth``.

    Dots and hyphens become underscores; nothing else is changed.

    Raises:
        ConfigError: The result is not a valid variable name (``[A-Za-z_][A-Za-z0-9_]*``), or is one
            of :data:`RESERVED_ENV_NAMES` or starts with ``HPCJOBS_``.
    """
    name = param.replace(".", "_").replace("-", "_")
    if not _ENV_RE.fullmatch(name):
        raise ConfigError(ConfigProblem(
            f"parameter {param!r} cannot be exported: {name!r} is not a valid environment variable name "
            "([A-Za-z_][A-Za-z0-9_]*)", key="sweep"))
    if name in RESERVED_ENV_NAMES or name.startswith("HPCJOBS_"):
        raise ConfigError(ConfigProblem(
            f"parameter {param!r} would set the environment variable {name}, which a job needs or hpcjobs "
            "reserves; rename the parameter", key="sweep"))
    return name


def env_names(params: Iterable[str]) -> dict[str, str]:
    """Map every parameter name to its environment variable, refusing two that map to the same one.

    Raises:
        ConfigError: A name cannot be mapped (see :func:`env_name`), or two names collide
            (``model.depth`` and ``model_depth`` are both ``model_depth``).
    """
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for p in params:
        if p in out:
            continue
        e = env_name(p)
        if e in seen:
            raise ConfigError(ConfigProblem(
                f"parameters {seen[e]!r} and {p!r} would both be exported as {e}; rename one", key="sweep"))
        seen[e] = p
        out[p] = e
    return out


# ---------------------------------------------------------------------------------------- native random

NativeDistribution = Literal["uniform", "log_uniform", "int_uniform", "choice", "normal"]
_NATIVE_NEEDS: dict[str, tuple[str, ...]] = {
    "uniform": ("min", "max"),
    "log_uniform": ("min", "max"),
    "int_uniform": ("min", "max"),
    "choice": ("values",),
    "normal": ("mu", "sigma"),
}


class RandomParam(StrictModel):
    """How one parameter of a native ``random`` sweep is drawn."""

    distribution: NativeDistribution = Field(description="uniform, log_uniform, int_uniform, choice or normal.")
    min: FiniteNumber | None = Field(None, description="Lower bound (uniform, log_uniform, int_uniform).")
    max: FiniteNumber | None = Field(None, description="Upper bound (uniform, log_uniform, int_uniform).")
    values: Values | None = Field(None, description="The choices (choice).")
    mu: FiniteFloat | None = Field(None, description="Mean (normal).")
    sigma: FiniteFloat | None = Field(None, description="Standard deviation (normal).")

    @model_validator(mode="after")
    def _fields_fit_distribution(self) -> RandomParam:
        needs = _NATIVE_NEEDS[self.distribution]
        given = {k for k in ("min", "max", "values", "mu", "sigma") if getattr(self, k) is not None}
        missing = [k for k in needs if k not in given]
        extra = sorted(given - set(needs))
        if missing:
            raise ValueError(
                f"distribution {self.distribution} needs {', '.join(needs)} (missing {', '.join(missing)})")
        if extra:
            raise ValueError(f"distribution {self.distribution} takes {', '.join(needs)}, not {', '.join(extra)}")
        check_distribution(self.distribution, NATIVE_KINDS[self.distribution], low=self.min, high=self.max,
                           mu=self.mu, sigma=self.sigma, strict_order=True)
        return self


class RandomSweep(StrictModel):
    """``samples`` random points drawn with ``random.Random(seed)`` (same seed, same points)."""

    seed: int = Field(description="Seed of the random generator: the same seed gives the same points.")
    samples: PointCount = Field(description="Number of points drawn (duplicates are dropped after drawing).")
    parameters: dict[ParamName, RandomParam] = Field(min_length=1, description="Distribution of each parameter.")


# ------------------------------------------------------------------------------------------------ W&B

WandbDistribution = Literal[
    "constant", "categorical", "int_uniform", "uniform", "q_uniform", "log_uniform", "log_uniform_values",
    "q_log_uniform", "q_log_uniform_values", "inv_log_uniform", "inv_log_uniform_values", "normal", "q_normal",
    "log_normal", "q_log_normal",
]
#: W&B distributions a grid can enumerate (as W&B's own grid search does).
WANDB_GRID_DISTRIBUTIONS = frozenset({"constant", "categorical", "int_uniform", "q_uniform"})


class WandbParam(StrictModel):
    """One parameter of a W&B sweep file, following W&B's sweep configuration reference.

    ``value`` → ``constant``; ``values`` → ``categorical`` (``probabilities`` weight random draws);
    ``min``/``max`` integers → ``int_uniform``, else ``uniform``; or an explicit ``distribution``:
    ``q_uniform`` (``round(X / q) * q``, ``q`` default 1, integer when ``q`` is), ``log_uniform``
    (``X`` in ``[exp(min), exp(max)]``, ``min``/``max`` are exponents), ``log_uniform_values``
    (``log X`` uniform in ``[log min, log max]``), ``inv_log_uniform`` (``log(1/X)`` uniform in
    ``[min, max]``), ``inv_log_uniform_values`` (``log(1/X)`` uniform in ``[log(1/max), log(1/min)]``),
    ``normal``/``log_normal`` (``mu`` default 0, ``sigma`` default 1) and the quantised ``q_*``
    variants. Nested ``parameters`` become dotted names (``optimizer.lr``).
    """

    value: SweepValue = None
    values: Values | None = None
    probabilities: list[Annotated[float, Field(ge=0), AfterValidator(check_finite)]] | None = None
    distribution: WandbDistribution | None = None
    min: FiniteNumber | None = None
    max: FiniteNumber | None = None
    mu: FiniteFloat | None = None
    sigma: FiniteFloat | None = None
    q: FiniteNumber | None = None
    parameters: dict[ParamName, WandbParam] | None = None

    def kind(self) -> str:
        """The distribution, explicit or inferred the way W&B infers it."""
        if self.distribution:
            return self.distribution
        if "value" in self.model_fields_set:
            return "constant"
        if self.values is not None:
            return "categorical"
        if isinstance(self.min, int) and isinstance(self.max, int):
            return "int_uniform"
        return "uniform"

    @model_validator(mode="after")
    def _fields_fit_distribution(self) -> WandbParam:
        if self.parameters is not None:
            others = sorted(self.model_fields_set - {"parameters"})
            if others:
                raise ValueError(f"a parameter with nested 'parameters' cannot also set {', '.join(others)}")
            return self
        kind = self.kind()
        if kind == "constant" and "value" not in self.model_fields_set:
            raise ValueError("distribution constant needs 'value'")
        if kind == "categorical":
            if self.values is None:
                raise ValueError("distribution categorical needs 'values'")
            if self.probabilities is not None:
                if len(self.probabilities) != len(self.values):
                    raise ValueError(f"'probabilities' has {len(self.probabilities)} entries for "
                                     f"{len(self.values)} values")
                if abs(sum(self.probabilities) - 1.0) > 1e-6:
                    raise ValueError(f"'probabilities' must sum to 1 (they sum to {sum(self.probabilities)})")
        check_distribution(kind, kind, low=self.min, high=self.max, mu=self.mu, sigma=self.sigma, q=self.q)
        return self


def flatten_wandb(parameters: dict[str, WandbParam], prefix: str = "") -> dict[str, WandbParam]:
    """W&B parameters with nested ``parameters`` flattened to dotted names, sorted by name (W&B's order)."""
    out: dict[str, WandbParam] = {}
    for name in sorted(parameters):
        p = parameters[name]
        full = f"{prefix}{name}"
        if p.parameters is not None:
            out.update(flatten_wandb(p.parameters, f"{full}."))
        else:
            out[full] = p
    return dict(sorted(out.items()))


# ------------------------------------------------------------------------------------------ the section

_NATIVE_PARTS = ("grid", "zip", "points", "random", "union")
_WANDB_ONLY = ("parameters", "run_cap", "samples", "seed", "metric", "program", "early_terminate", "command",
               "entity", "project")

_VALUE_LIST_SCHEMA = {"type": "array", "minItems": 1,
                      "items": {"type": ["boolean", "integer", "number", "string", "null"]}}
_ZIP_GROUP_SCHEMA = {"type": "object", "minProperties": 1, "additionalProperties": _VALUE_LIST_SCHEMA}
#: ``zip`` accepts one group (a mapping) or a list of groups; the model stores a list.
_ZIP_SCHEMA = {"anyOf": [_ZIP_GROUP_SCHEMA, {"type": "array", "items": _ZIP_GROUP_SCHEMA}]}
ZipGroups = Annotated[list[Annotated[dict[ParamName, Values], Field(min_length=1)]], WithJsonSchema(_ZIP_SCHEMA)]

ExcludeRule = dict[ParamName, Union[SweepValue, Annotated[list[SweepValue], Field(min_length=1)]]]  # noqa: UP007


class SweepSpec(StrictModel):
    """The ``sweep:`` section (native parts, or a W&B sweep with ``method:``). See the module docs."""

    grid: dict[ParamName, Values] | None = Field(None, description="Cartesian product of value lists.")
    zip: ZipGroups | None = Field(
        None, description="Lists of equal length taken in step; a list of such groups is their product.")
    points: Annotated[list[dict[ParamName, SweepValue]], Field(min_length=1)] | None = Field(
        None, description="Explicit points.")
    random: RandomSweep | None = Field(None, description="Random points reproducible from a seed.")
    union: Annotated[list[SweepSpec], Field(min_length=1)] | None = Field(
        None, description="Sub-sweeps whose points are concatenated.")
    exclude: list[Annotated[ExcludeRule, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Drop a point when it matches every pair of a rule (a list value matches any of its items).")
    filter: str | None = Field(None, description="Keep only points for which this expression is true.")
    name: str | None = Field(None, description="A name for the sweep (documentation only).")
    max_points: PointCount | None = Field(
        None, description="Most points the sweep's product may have (default $HPCJOBS_MAX_POINTS, else 1,000,000); "
        "counted before exclude/filter, checked before any point is built. Only the top-level value applies.")
    description: str | None = Field(None, description="Free text (documentation only).")
    # W&B sweep files
    method: str | None = Field(None, description="W&B sweep: grid or random.")
    parameters: dict[ParamName, WandbParam] | None = Field(None, description="W&B sweep parameters.")
    run_cap: PointCount | None = Field(None, description="W&B: random sample count (unless samples); caps a grid.")
    samples: PointCount | None = Field(None, description="W&B random: number of points drawn (overrides run_cap).")
    seed: int | None = Field(None, description="W&B random: seed of the draw (default 0).")
    metric: Any = Field(None, description="W&B: accepted and ignored.")
    program: Any = Field(None, description="W&B: accepted and ignored.")
    early_terminate: Any = Field(None, description="W&B: accepted and ignored.")
    command: Any = Field(None, description="W&B: accepted and ignored.")
    entity: Any = Field(None, description="W&B: accepted and ignored.")
    project: Any = Field(None, description="W&B: accepted and ignored.")

    @field_validator("zip", mode="before")
    @classmethod
    def _zip_groups(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @field_validator("zip")
    @classmethod
    def _zip_equal_lengths(cls, groups: list[dict[str, list[Any]]] | None) -> list[dict[str, list[Any]]] | None:
        for group in groups or []:
            lengths = {k: len(v) for k, v in group.items()}
            if len(set(lengths.values())) > 1:
                detail = ", ".join(f"{k} has {n}" for k, n in lengths.items())
                raise ValueError(f"zip needs lists of equal length: {detail}")
        return groups

    @field_validator("method")
    @classmethod
    def _method(cls, value: str | None) -> str | None:
        if value is not None and value not in ("grid", "random"):
            raise ValueError(
                f"method {value!r} is not supported: hpcjobs expands a sweep before submitting it, so only "
                "W&B's grid and random methods apply (bayes needs a W&B agent)")
        return value

    @field_validator("filter")
    @classmethod
    def _filter_parses(cls, value: str | None) -> str | None:
        if value is not None:
            compile_filter(value)  # syntax and whitelist; names are checked when expanding
        return value

    @property
    def is_wandb(self) -> bool:
        """True for a W&B-format sweep (``method:`` given)."""
        return self.method is not None

    @model_validator(mode="after")
    def _one_form(self) -> SweepSpec:
        native = [k for k in _NATIVE_PARTS if getattr(self, k) is not None]
        wandb_keys = [k for k in _WANDB_ONLY if getattr(self, k) is not None]
        if self.is_wandb:
            if native:
                raise ValueError(f"a W&B-format sweep (method: {self.method}) cannot also have "
                                 f"{', '.join(native)}; combine them with union: [...]")
            if not self.parameters:
                raise ValueError(f"a W&B-format sweep (method: {self.method}) needs 'parameters'")
            flat = flatten_wandb(self.parameters)
            if self.method == "random" and self.samples is None and self.run_cap is None:
                raise ValueError("a W&B random sweep needs run_cap (or samples): the number of points to draw")
            if self.method == "grid":
                bad = [n for n, p in flat.items() if p.kind() not in WANDB_GRID_DISTRIBUTIONS]
                if bad:
                    raise ValueError(
                        f"grid search needs every parameter to be constant, categorical, int_uniform or q_uniform; "
                        f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} continuous (use method: random)")
                with_p = [n for n, p in flat.items() if p.probabilities is not None]
                if with_p:
                    raise ValueError(f"probabilities are not allowed in grid search ({', '.join(with_p)})")
                if self.samples is not None or self.seed is not None:
                    raise ValueError("samples and seed apply to method: random only")
        elif wandb_keys:
            raise ValueError(f"{', '.join(wandb_keys)} belong to a W&B-format sweep: add method: grid|random")
        self._check_no_overlap()
        try:
            env_names(self.param_names())
        except ConfigError as exc:
            raise ValueError(exc.problems[0].message) from None
        return self

    def _part_names(self) -> list[tuple[str, list[str]]]:
        parts: list[tuple[str, list[str]]] = []
        if self.grid:
            parts.append(("grid", list(self.grid)))
        for i, group in enumerate(self.zip or []):
            parts.append((f"zip[{i}]" if len(self.zip or []) > 1 else "zip", list(group)))
        if self.points:
            parts.append(("points", list(dict.fromkeys(k for p in self.points for k in p))))
        if self.random:
            parts.append(("random", list(self.random.parameters)))
        if self.union:
            parts.append(("union", list(dict.fromkeys(k for sub in self.union for k in sub.param_names()))))
        return parts

    def _check_no_overlap(self) -> None:
        owner: dict[str, str] = {}
        for part, names in self._part_names():
            for n in names:
                if n in owner:
                    raise ValueError(f"parameter {n!r} is defined by both {owner[n]} and {part}; "
                                     "each parameter belongs to one part (use union: [...] for alternatives)")
                owner[n] = part

    def param_names(self) -> list[str]:
        """Every parameter name this sweep can produce, in first-seen order."""
        if self.is_wandb:
            return list(flatten_wandb(self.parameters or {}))
        return list(dict.fromkeys(n for _, part in self._part_names() for n in part))


SweepSpec.model_rebuild()
WandbParam.model_rebuild()


def parse_sweep(data: Any) -> SweepSpec:
    """Validate a ``sweep:`` mapping read from anywhere (a dict, e.g. ``yaml.safe_load`` output).

    Experiment files get located messages through :func:`hpcjobs.config.validation.validate_document`
    once ``Experiment.sweep`` is typed :class:`SweepSpec`; this is for other callers (notebooks).

    Raises:
        ConfigError: One problem per validation failure, keyed ``sweep.<path>``.
    """
    from pydantic import ValidationError

    try:
        return SweepSpec.model_validate({} if data is None else data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in ("sweep", *err["loc"]))
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(ConfigProblem(msg, key=key))
        raise ConfigError(problems) from None
