"""Right-sizing from history: what finished runs used, and what to ask for next time.

From the job rows of a set of finished runs (the accounting schema of :mod:`hpcjobs.accounting.schema`),
:func:`advise` proposes memory (per node), wall time, CPUs and, when the records hold the GPU
utilisation, GPUs:

* the ``quantile`` (default p95) of what the **completed** runs used (peak memory per node: the schema's
  ``mem_used_bytes``, else ``max_rss_bytes``; ``elapsed``; busy CPUs ``cpu_time / elapsed``; busy GPUs
  ``gpus × gpu_utilization``), plus a ``margin`` (default 20 %);
* rounded up to what the scheduler takes (memory to whole GiB from 2 GiB, else to 128 MiB steps; wall
  time to whole minutes; CPUs and GPUs to whole units);
* never above what the runs asked for (they completed with it), nor above the partition's limits.

Runs that hit a limit (``TIMEOUT``, ``OUT_OF_MEMORY``) get a **raise**: the larger of their request
× ``raise_factor`` (default 1.5) and the largest use seen + margin, within the partition's limits; a
raise the limit itself blocks says so. Fewer than ``min_runs`` completed runs give no proposal
(``enough`` is false and the message says how many are needed); raises are given anyway.

The savings are over the finished runs: core-hours and GPU-hours reserved (request × wall-time limit)
as asked and as proposed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hpcjobs.accounting.reports.rows import _job_rows, _seconds
from hpcjobs.states import COMPLETED, OUT_OF_MEMORY, TERMINAL_STATES, TIMEOUT
from hpcjobs.units import format_memory_human, format_memory_slurm, format_walltime_slurm

if TYPE_CHECKING:
    from hpcjobs.config.site import SiteConfig

_GIB = 1024**3
_MIB = 1024**2
#: Below this, memory is rounded up to :data:`_SMALL_STEP` steps; from it on, to whole GiB.
_WHOLE_GIB_FROM = 2 * _GIB
_SMALL_STEP = 128 * _MIB

#: The schema columns :func:`advise` reads.
ADVICE_INPUT = frozenset({"job_id", "job_name", "user", "partition", "state", "scheduler", "sweep_id", "nodes",
                          "cpus", "gpus", "elapsed", "time_limit", "cpu_time", "req_mem_bytes", "max_rss_bytes",
                          "mem_used_bytes", "gpu_utilization", "submit_time"})


@dataclass(frozen=True)
class AdviceSettings:
    """How advice is computed.

    Attributes:
        quantile: The quantile of use the proposal covers (0.95 = p95).
        margin: Added on top of it (0.2 = 20 %).
        min_runs: Completed runs needed before anything is proposed.
        raise_factor: A run that hit its limit asks for at least its request × this.
    """

    quantile: float = 0.95
    margin: float = 0.2
    min_runs: int = 5
    raise_factor: float = 1.5

    def __post_init__(self) -> None:
        if not 0 < self.quantile <= 1:
            raise ValueError(f"quantile {self.quantile} is not in (0, 1]")
        if not 0 <= self.margin <= 10:
            raise ValueError(f"margin {self.margin} is not in [0, 10]")
        if self.min_runs < 1:
            raise ValueError(f"min_runs {self.min_runs} is below 1")
        if self.raise_factor < 1:
            raise ValueError(f"raise_factor {self.raise_factor} is below 1")


@dataclass(frozen=True)
class PartitionLimits:
    """What one job may ask for on a partition (``None``: no limit known).

    Attributes:
        partition: The partition's name (for messages).
        max_walltime: Seconds.
        memory_per_node: Bytes.
        cpus_per_node: CPUs a node has.
        gpus_per_node: GPUs a node has (``None``: unknown).
    """

    partition: str | None = None
    max_walltime: int | None = None
    memory_per_node: int | None = None
    cpus_per_node: int | None = None
    gpus_per_node: int | None = None


def limits_from_site(site: SiteConfig, partition: str | None) -> PartitionLimits:
    """The limits of ``partition`` (a site key or the scheduler's own name) in a site config.

    The QOS ``max_walltime`` of the site's default QOS lowers the partition's when it is shorter.
    An unknown partition (or ``None`` without a default) gives no limits.
    """
    name = partition or site.default_partition
    part = site.partitions.get(name) if name else None
    if part is None and name:
        part = next((p for p in site.partitions.values() if p.scheduler_name == name), None)
    if part is None:
        return PartitionLimits(partition=name)
    wall = part.max_walltime
    qos = site.qos_limits.get(site.default_qos) if site.default_qos else None
    if qos is not None and qos.max_walltime is not None and (wall is None or qos.max_walltime < wall):
        wall = qos.max_walltime
    return PartitionLimits(partition=name, max_walltime=wall, memory_per_node=part.memory_per_node,
                           cpus_per_node=part.cpus_per_node, gpus_per_node=part.gpus_per_node)


# ---------------------------------------------------------------------------- units


def round_memory(nbytes: float) -> int:
    """Round memory up to what a request is written in: whole GiB from 2 GiB, else 128 MiB steps (at least one)."""
    step = _GIB if nbytes >= _WHOLE_GIB_FROM else _SMALL_STEP
    return max(step, math.ceil(nbytes / step) * step)


def round_walltime(seconds: float) -> int:
    """Round a wall time up to whole minutes (at least one)."""
    return max(60, math.ceil(seconds / 60) * 60)


def format_memory(nbytes: int, scheduler: str | None) -> str:
    """Memory as the scheduler takes it (its backend's ``format_memory``): ``8G`` (Slurm, the default), ``8gb`` (PBS,
    Torque)."""
    from hpcjobs.schedulers.registry import find_backend

    backend = find_backend(scheduler)
    return backend.format_memory(nbytes) if backend is not None else format_memory_slurm(nbytes)


def format_walltime(seconds: int) -> str:
    """``[D-]HH:MM:SS`` (Slurm); PBS reads ``HH:MM:SS`` the same way below a day."""
    return format_walltime_slurm(int(seconds))


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ResourceAdvice:
    """The proposal for one resource.

    Attributes:
        resource: ``memory`` (per node, bytes), ``walltime`` (seconds), ``cpus`` or ``gpus`` (per job).
        asked: The largest request among the runs.
        used_max: The most any completed run used.
        used_quantile: The ``quantile`` of use over the completed runs.
        measured: Completed runs with a measurement.
        runs: Finished runs.
        proposed: Rounded and clamped; ``None`` with too few runs or nothing measured.
        proposed_text: ``8G``, ``00:48:00``, ``3``.
        limited_by: The partition limit the proposal was cut to, if any.
        note: One line for people.
    """

    resource: str
    asked: int | None
    used_max: float | None
    used_quantile: float | None
    measured: int
    runs: int
    proposed: int | None
    proposed_text: str | None
    limited_by: str | None
    note: str


@dataclass(frozen=True)
class LimitRaise:
    """What runs that hit a limit need next time.

    Attributes:
        resource: ``walltime`` (for ``TIMEOUT``) or ``memory`` (for ``OUT_OF_MEMORY``, per node).
        state: The state they ended in.
        jobs: Their job ids.
        asked: Their largest request.
        proposed: The raise, rounded and within the limits (``None`` when the limit blocks any raise).
        proposed_text: As the scheduler takes it.
        blocked: The partition's limit is at or below the request: no raise is possible there.
        note: One line for people.
    """

    resource: str
    state: str
    jobs: tuple[str, ...]
    asked: int | None
    proposed: int | None
    proposed_text: str | None
    blocked: bool
    note: str


@dataclass(frozen=True)
class Advice:
    """Advice for one group of runs (one sweep, experiment name, or user and job name).

    Attributes:
        group: What the runs have in common (``{"sweep_id": ...}``, ``{"user": ..., "job_name": ...}``).
        scheduler: The runs' scheduler (for the units).
        partition: Their partition (the most common one).
        runs: Finished runs.
        completed: Of which completed (the basis of the proposals).
        enough: At least ``settings.min_runs`` completed runs.
        settings: How it was computed.
        resources: One proposal per resource.
        raises: What runs that hit a limit need.
        savings: ``core_hours_asked``, ``core_hours_proposed``, ``gpu_hours_asked``, ``gpu_hours_proposed``
            (request × wall-time limit over the finished runs), ``memory_asked_bytes`` and
            ``memory_used_bytes`` (per node: largest request, largest use).
        message: Why nothing is proposed, or empty.
    """

    group: dict[str, str]
    scheduler: str | None
    partition: str | None
    runs: int
    completed: int
    enough: bool
    settings: AdviceSettings
    resources: tuple[ResourceAdvice, ...] = ()
    raises: tuple[LimitRaise, ...] = ()
    savings: dict[str, float | None] = field(default_factory=dict)
    message: str = ""

    def proposed(self, resource: str) -> int | None:
        """The proposal for ``resource`` (``None`` when there is none)."""
        return next((r.proposed for r in self.resources if r.resource == resource), None)

    def raise_for(self, resource: str) -> LimitRaise | None:
        """The raise of ``resource`` (``walltime`` or ``memory``), if runs hit that limit."""
        return next((r for r in self.raises if r.resource == resource), None)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = asdict(self)
        out["raises"] = [{**r, "jobs": list(r["jobs"])} for r in out["raises"]]
        return out


# ---------------------------------------------------------------------------- computation


def _quantile(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q, method="linear"))


def _shown(resource: str, value: float | None, scheduler: str | None) -> str:
    if value is None:
        return "no limit" if resource == "walltime" else "?"
    if resource == "memory":
        return format_memory_human(int(value))
    if resource == "walltime":
        return format_walltime(int(value))
    return str(int(value)) if value == int(value) else f"{value:.2g}"


def _proposal(resource: str, used: pd.Series, asked: pd.Series, runs: int, settings: AdviceSettings,
              enough: bool, limit: int | None, limit_name: str | None, scheduler: str | None) -> ResourceAdvice:
    values = used.dropna().to_numpy(dtype=float)
    known = asked.dropna()
    return resource_advice(resource, float(values.max()) if len(values) else None,
                           _quantile(values, settings.quantile) if len(values) else None, len(values),
                           None if known.empty else int(known.max()), runs, settings, enough, limit, limit_name,
                           scheduler)


def resource_advice(resource: str, used_max: float | None, used_q: float | None, measured: int,
                    asked_max: int | None, runs: int, settings: AdviceSettings, enough: bool, limit: int | None,
                    limit_name: str | None, scheduler: str | None) -> ResourceAdvice:
    """The proposal for one resource from its figures over a group's runs (see :class:`ResourceAdvice`)."""
    proposed: int | None = None
    text: str | None = None
    limited_by: str | None = None
    if enough and used_q is not None:
        raw = used_q * (1 + settings.margin)
        if resource == "memory":
            proposed = round_memory(raw)
        elif resource == "walltime":
            proposed = round_walltime(raw)
        else:
            proposed = max(1, math.ceil(raw - 1e-9))
        if asked_max is not None and proposed > asked_max:
            proposed = asked_max  # they completed with that: never propose more
        if limit is not None and proposed > limit:
            proposed, limited_by = limit, limit_name
        text = (format_memory(proposed, scheduler) if resource == "memory" else
                format_walltime(proposed) if resource == "walltime" else str(proposed))
    verb = {"memory": "used at most", "walltime": "ran at most", "cpus": "kept at most",
            "gpus": "kept at most"}[resource]
    unit = {"memory": "", "walltime": "", "cpus": " CPUs busy", "gpus": " GPUs busy"}[resource]
    asked_words = f"asked {_shown(resource, asked_max, scheduler)}" + (
        {"cpus": " CPUs", "gpus": " GPUs"}.get(resource, ""))
    if used_max is None:
        note = f"{asked_words}, no {resource} use recorded in a completed run"
    else:
        note = f"{asked_words}, {verb} {_shown(resource, used_max, scheduler)}{unit} in {measured} of {runs} runs"
        if proposed is not None:
            note += f": ask {text}" + (f" ({limited_by})" if limited_by else "")
    if not enough:
        note += f" (too few completed runs to advise: {settings.min_runs} needed)"
    return ResourceAdvice(resource, asked_max, used_max, used_q, measured, runs, proposed, text, limited_by, note)


def _raise(resource: str, state: str, hit: pd.DataFrame, asked: pd.Series, seen: pd.Series, settings: AdviceSettings,
           limit: int | None, limit_name: str | None, scheduler: str | None) -> LimitRaise:
    known = asked.dropna()
    seen_known = seen.dropna()
    return limit_raise(resource, state, tuple(str(j) for j in hit["job_id"]), int(known.max()) if len(known) else None,
                       float(seen_known.max()) if len(seen_known) else None, settings, limit, limit_name, scheduler)


def limit_raise(resource: str, state: str, jobs: tuple[str, ...], asked_max: int | None, seen_max: float | None,
                settings: AdviceSettings, limit: int | None, limit_name: str | None,
                scheduler: str | None) -> LimitRaise:
    """The raise for runs that hit a limit, from their largest request and the largest use seen."""
    candidates = []
    if asked_max is not None:
        candidates.append(asked_max * settings.raise_factor)
    if seen_max is not None:
        candidates.append(seen_max * (1 + settings.margin))
    what = "the wall-time limit" if resource == "walltime" else "the memory limit"
    if not candidates:
        return LimitRaise(resource, state, jobs, None, None, None, False,
                          f"{len(jobs)} runs hit {what}; their request is unknown")
    rounded = (round_walltime if resource == "walltime" else round_memory)(max(candidates))

    def fmt(value: int) -> str:
        return format_walltime(value) if resource == "walltime" else format_memory(value, scheduler)

    head = f"{len(jobs)} run{'s' if len(jobs) != 1 else ''} hit {what}"
    if asked_max is not None:
        head += f" (asked {fmt(asked_max)})"
    if limit is not None and asked_max is not None and asked_max >= limit:
        return LimitRaise(resource, state, jobs, asked_max, None, None, True,
                          f"{head}: {limit_name} {fmt(limit)} blocks any raise; split the work or use another "
                          "partition")
    if limit is not None and rounded > limit:
        return LimitRaise(resource, state, jobs, asked_max, limit, fmt(limit), False,
                          f"{head}: ask {fmt(limit)} ({limit_name}; {fmt(rounded)} wanted)")
    return LimitRaise(resource, state, jobs, asked_max, rounded, fmt(rounded), False, f"{head}: ask {fmt(rounded)}")


#: States of a run that may have been killed at its memory request (see :func:`memory_hits`).
_KILLED_STATES = ("FAILED", "CANCELLED")


def memory_hits(state: pd.Series, used_per_node: pd.Series, asked_per_node: pd.Series) -> np.ndarray:
    """Runs that hit their memory limit: ``OUT_OF_MEMORY``, and failed or cancelled runs whose peak reached the request.

    Slurm's ``JobAcctGatherParams=OverMemoryKill`` (without a memory cgroup) kills such a job with SIGKILL and
    records ``FAILED`` (exit ``0:9``) with a MaxRSS above ``--mem``, not ``OUT_OF_MEMORY``; PBS and Torque
    record the exceeded ``resources_used.mem`` too.
    """
    over = (used_per_node >= asked_per_node).fillna(False).to_numpy(dtype=bool)
    killed = state.isin(_KILLED_STATES).to_numpy(dtype=bool)
    return np.asarray((state == OUT_OF_MEMORY).to_numpy(dtype=bool) | (killed & over))


def advise(df: pd.DataFrame, settings: AdviceSettings | None = None, *, limits: PartitionLimits | None = None,
           group: dict[str, str] | None = None) -> Advice:
    """Advice from one group of runs (see the module docs).

    Args:
        df: A schema DataFrame (job and step rows; only finished jobs count).
        settings: Quantile, margin, minimum runs, raise factor.
        limits: The partition's limits (default: none known).
        group: What the runs have in common, for the result.

    Returns:
        The :class:`Advice`.
    """
    settings = settings or AdviceSettings()
    jobs = _job_rows(df, ADVICE_INPUT)
    return _advise(jobs[jobs["state"].isin(TERMINAL_STATES).to_numpy(dtype=bool)], settings, limits, group or {})


def most_common(series: pd.Series) -> str | None:
    """The most common value (the first in text order among equals), ``None`` when all are NA."""
    counts = series.dropna().astype(str).value_counts()
    return None if counts.empty else str(min(counts.index[counts == counts.max()]))


def _advise(jobs: pd.DataFrame, settings: AdviceSettings, limits: PartitionLimits | None,
            group: dict[str, str]) -> Advice:
    limits = limits or PartitionLimits()
    scheduler = most_common(jobs["scheduler"]) if "scheduler" in jobs else None
    partition = most_common(jobs["partition"]) if "partition" in jobs else None
    runs = len(jobs)
    nodes = jobs["nodes"].astype("Float64").fillna(1).clip(lower=1)
    elapsed = _seconds(jobs["elapsed"])
    done = ((jobs["state"] == COMPLETED) & (elapsed > 0)).fillna(False).to_numpy(dtype=bool)
    completed = int(done.sum())
    enough = completed >= settings.min_runs
    used_mem = (jobs["mem_used_bytes"].fillna(jobs["max_rss_bytes"]) if "mem_used_bytes" in jobs
                else jobs["max_rss_bytes"]).astype("Float64") / nodes
    asked_mem = jobs["req_mem_bytes"].astype("Float64") / nodes
    limit_s = _seconds(jobs["time_limit"])
    busy_cpus = _seconds(jobs["cpu_time"]) / elapsed.where(elapsed > 0)
    gpus = jobs["gpus"].astype("Float64")
    util = jobs["gpu_utilization"].astype("Float64") if "gpu_utilization" in jobs else gpus * pd.NA
    busy_gpus = (gpus * util).where(gpus > 0)
    part = f"partition {limits.partition}" if limits.partition else "partition"
    max_nodes = int(nodes.max()) if runs else 1
    cpu_limit = limits.cpus_per_node * max_nodes if limits.cpus_per_node else None
    gpu_limit = limits.gpus_per_node * max_nodes if limits.gpus_per_node else None
    resources = [
        _proposal("memory", used_mem[done], asked_mem, runs, settings, enough, limits.memory_per_node,
                  f"{part} memory_per_node", scheduler),
        _proposal("walltime", elapsed[done], limit_s, runs, settings, enough, limits.max_walltime,
                  f"{part} max_walltime", scheduler),
        _proposal("cpus", busy_cpus[done], jobs["cpus"].astype("Float64"), runs, settings, enough, cpu_limit,
                  f"{part} cpus_per_node", scheduler),
    ]
    if busy_gpus[done].notna().any():
        resources.append(_proposal("gpus", busy_gpus[done], gpus.where(gpus > 0), runs, settings, enough,
                                   gpu_limit, f"{part} gpus_per_node", scheduler))
    raises = []
    timeout = (jobs["state"] == TIMEOUT).to_numpy(dtype=bool)
    if timeout.any():
        raises.append(_raise("walltime", TIMEOUT, jobs[timeout], limit_s[timeout], elapsed[done], settings,
                             limits.max_walltime, f"{part} max_walltime", scheduler))
    oom = memory_hits(jobs["state"], used_mem, asked_mem)
    if oom.any():
        raises.append(_raise("memory", OUT_OF_MEMORY, jobs[oom], asked_mem[oom], used_mem, settings,
                             limits.memory_per_node, f"{part} memory_per_node", scheduler))
    message = "" if enough else (f"too few runs to advise: {completed} completed of {runs} finished, "
                                 f"{settings.min_runs} needed")
    return Advice(dict(group), scheduler, partition, runs, completed, enough, settings, tuple(resources),
                  tuple(raises), _savings(jobs, resources, limit_s, asked_mem, used_mem), message)


def _savings(jobs: pd.DataFrame, resources: Sequence[ResourceAdvice], limit_s: pd.Series, asked_mem: pd.Series,
             used_mem: pd.Series) -> dict[str, float | None]:
    """Reserved core-/GPU-hours (request × wall-time limit) over the finished runs, as asked and as proposed
    (each run's request lowered to the proposal where it asked for more)."""
    by = {r.resource: r.proposed for r in resources}
    cpus = jobs["cpus"].astype("Float64")
    gpus = jobs["gpus"].astype("Float64").fillna(0)
    known = limit_s.notna() & cpus.notna()

    def hours(count: pd.Series, seconds: pd.Series) -> float | None:
        return float((count[known] * seconds[known]).sum() / 3600.0) if known.any() else None

    # each run with the proposal, never above what that run asked (a group may hold several requests)
    new_s = limit_s if by.get("walltime") is None else limit_s.clip(upper=float(by["walltime"] or 0))
    new_cpus = cpus if by.get("cpus") is None else cpus.clip(upper=float(by["cpus"] or 0))
    new_gpus = gpus if by.get("gpus") is None else gpus.clip(upper=float(by.get("gpus") or 0))
    return {
        "core_hours_asked": hours(cpus, limit_s), "core_hours_proposed": hours(new_cpus, new_s),
        "gpu_hours_asked": hours(gpus, limit_s), "gpu_hours_proposed": hours(new_gpus, new_s),
        "memory_asked_bytes": None if asked_mem.dropna().empty else float(asked_mem.max()),
        "memory_used_bytes": None if used_mem.dropna().empty else float(used_mem.max()),
    }


def group_key(jobs: pd.DataFrame) -> pd.Series:
    """The group of each job row: its sweep id, else its job name (prefixed ``job:``)."""
    sweep = jobs["sweep_id"].astype("string")
    return sweep.fillna("job:" + jobs["job_name"].astype("string").fillna("?"))


def advise_groups(df: pd.DataFrame, settings: AdviceSettings | None = None, *, by_user: bool = True,
                  site: SiteConfig | None = None) -> list[Advice]:
    """:func:`advise` per sweep (or job name, for jobs of no sweep), and per user when ``by_user``.

    Args:
        df: A schema DataFrame.
        settings: How advice is computed.
        by_user: Group by user too.
        site: The site config whose partition limits apply (each group's most common partition).

    Returns:
        One :class:`Advice` per group, most finished runs first.
    """
    return _advise_groups(_job_rows(df, ADVICE_INPUT), settings or AdviceSettings(), by_user, site)


def _advise_groups(jobs: pd.DataFrame, settings: AdviceSettings, by_user: bool,
                   site: SiteConfig | None) -> list[Advice]:
    """:func:`advise_groups` of job rows."""
    jobs = jobs[jobs["state"].isin(TERMINAL_STATES).to_numpy(dtype=bool)].reset_index(drop=True)
    if jobs.empty:
        return []
    keys = {"group": group_key(jobs)}
    if by_user:
        keys["user"] = jobs["user"].astype("string").fillna("?")
    frame = pd.DataFrame(keys)
    out = []
    for values, idx in frame.groupby(list(keys), sort=True).groups.items():
        vals = values if isinstance(values, tuple) else (values,)
        named = dict(zip(keys, (str(v) for v in vals), strict=True))
        grp = named.pop("group")
        label = {"job_name": grp[4:]} if grp.startswith("job:") else {"sweep_id": grp}
        sub = jobs.loc[idx]
        limits = limits_from_site(site, most_common(sub["partition"])) if site is not None else None
        out.append(_advise(sub, settings, limits, {**named, **label}))
    return sorted(out, key=lambda a: -a.runs)


__all__ = [
    "ADVICE_INPUT",
    "Advice",
    "AdviceSettings",
    "LimitRaise",
    "PartitionLimits",
    "ResourceAdvice",
    "advise",
    "advise_groups",
    "format_memory",
    "format_walltime",
    "group_key",
    "limit_raise",
    "limits_from_site",
    "most_common",
    "resource_advice",
    "round_memory",
    "round_walltime",
]
