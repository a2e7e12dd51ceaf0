"""Right-sizing a sweep from its accounting: the advice behind ``hpcjobs advise`` and ``resubmit --right-size``.

:func:`advise_history` reads the accounting rows of one sweep, of every sweep of an experiment name in the
sweep folder, or of a saved scheduler output, and gives the :class:`~hpcjobs.accounting.reports.advise.Advice`
of :mod:`hpcjobs.accounting.reports.advise` with the site's partition limits applied.

:func:`right_size_resubmit` resubmits a sweep's failed points as :func:`hpcjobs.sweep.api.resubmit_sweep`
does (same ledger reset, same submitter: a point is never submitted twice), each failed point with its own
resources: a point that timed out gets the raised wall time, one killed for memory the raised memory,
and every failed point the advised memory, wall time and CPUs where the advice has enough runs. The
changed points form their own job shapes (:mod:`hpcjobs.sweep.points.shapes`), so they go out as their own arrays.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs import states
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.registry import capabilities_of

if TYPE_CHECKING:
    import pandas as pd

    from hpcjobs.accounting.reports.advise import Advice, AdviceSettings
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob
    from hpcjobs.schedulers.client import SchedulerClient
    from hpcjobs.sweep.points.shapes import JobShape
    from hpcjobs.sweep.prepare import PreparedSweep
    from hpcjobs.sweep.submitter import SubmitReport


@dataclass(frozen=True)
class History:
    """The runs advice is drawn from.

    Attributes:
        label: What they are (``sweep fit-1a2b3c4d``, ``3 sweeps named fit``, ``file sacct.txt``).
        sweep_ids: The sweeps read (empty for a file read as a whole).
        jobs: Their accounting rows (schema DataFrame, job and step rows).
        site: The site config of the (last) sweep, when it could be loaded.
    """

    label: str
    sweep_ids: tuple[str, ...]
    jobs: pd.DataFrame
    site: SiteConfig | None = None


def _sweep_meta(folder: Path) -> Any:
    from hpcjobs.sweep.ledger.store import Ledger

    with Ledger.open(folder, allow_read_only=True) as ledger:
        return ledger.meta


def _site_of(meta: Any) -> SiteConfig | None:
    """The sweep's site config (as given to ``sweep --site``, else by the ledger's site name); ``None`` if gone."""
    from hpcjobs.config.sites import load_site

    for name in (meta.extra.get("site_arg"), meta.site):
        if not name:
            continue
        try:
            return load_site(str(name))
        except ConfigError:
            continue
    return None


def history_frame(sweep_ids: Sequence[str], *, since: datetime | None = None, from_file: str | None = None,
                  scheduler: str | None = None, tz: str | None = None,
                  sacct_fields: Sequence[str] | None = None) -> pd.DataFrame:
    """The accounting rows of the jobs tagged with any of ``sweep_ids`` (every row when ``sweep_ids`` is empty).

    Args:
        sweep_ids: Sweeps to keep (by the ``hpcjobs:`` tag of their jobs).
        since: Start of a live ``sacct`` query (default: 7 days ago).
        from_file: A saved scheduler output to read instead (``report --from-file`` formats).
        scheduler: Settles PBS vs Torque for a saved file.
        tz: Time zone of the saved file's times.
        sacct_fields: ``--format`` fields of headerless saved sacct text.
    """
    import pandas as pd

    from hpcjobs.accounting.report_source import ReportFilters, apply_filters, load_report_frame

    df = load_report_frame(ReportFilters(since=since), from_file=from_file, scheduler=scheduler, tz=tz,
                           sacct_fields=sacct_fields)
    if not sweep_ids:
        return df
    parts = [apply_filters(df, ReportFilters(sweep=s)) for s in sweep_ids]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def load_history(sweep: str | None = None, *, name: str | None = None, from_file: str | None = None,
                 root: str | Path | None = None, scheduler: str | None = None, tz: str | None = None,
                 since: datetime | None = None, sacct_fields: Sequence[str] | None = None) -> History:
    """The runs of one sweep, of every sweep of an experiment name, or of a saved file.

    Args:
        sweep: A sweep as ``status`` takes it (id, name, unique prefix or folder).
        name: An experiment name: every sweep of that name in the sweep folder.
        from_file: A saved scheduler output (alone: all its jobs; with ``sweep``/``name``: their jobs in it).
        root: Folder of sweep folders.
        scheduler: Settles PBS vs Torque for a saved file.
        tz: Time zone of the saved file's times.
        since: Start of a live query (default: an hour before the oldest sweep was planned).
        sacct_fields: ``--format`` fields of headerless saved sacct text.

    Raises:
        ConfigError: Nothing to read from, no such sweep or name (exit 2).
        CommandError: ``sacct`` failed.
    """
    from hpcjobs.sweep.find import find_sweep
    from hpcjobs.sweep.identity import find_sweep_root, name_of, sweep_folders

    if sum(x is not None for x in (sweep, name)) > 1:
        raise ConfigError("give one of SWEEP and --name")
    if sweep is None and name is None:
        if from_file is None:
            raise ConfigError("give a SWEEP, --name NAME or --from-file FILE")
        return History(f"file {from_file}", (), history_frame((), from_file=from_file, scheduler=scheduler, tz=tz,
                                                              sacct_fields=sacct_fields))
    if sweep is not None:
        folders = [find_sweep(sweep, root)]
    else:
        base = find_sweep_root(root).path
        folders = [base / s for s in sweep_folders(base) if name_of(s) == name]
        if not folders:
            raise ConfigError(ConfigProblem(f"no sweep named {name!r} in {base}", key="--name"))
    metas = [_sweep_meta(f) for f in folders]
    ids = tuple(m.sweep_id for m in metas)
    label = f"sweep {ids[0]}" if sweep is not None else f"{len(ids)} sweep{'s' if len(ids) != 1 else ''} named {name}"
    if from_file is None:
        scheduler = scheduler or metas[-1].scheduler
        if capabilities_of(scheduler).runs_here:  # no scheduler to ask: what the local runner measured
            from hpcjobs.accounting.sources.local import local_usage_rows
            from hpcjobs.sweep.local_procs import LocalFiles

            jobs = local_usage_rows([r for f in folders for r in LocalFiles(f).usages()])
            return History(label, ids, jobs, _site_of(metas[-1]))
    if since is None and from_file is None:
        since = datetime.fromtimestamp(min(m.created_at for m in metas), tz=timezone.utc) - timedelta(hours=1)
    jobs = history_frame(ids, since=since, from_file=from_file, scheduler=scheduler, tz=tz, sacct_fields=sacct_fields)
    return History(label, ids, jobs, _site_of(metas[-1]))


def advise_history(history: History, settings: AdviceSettings | None = None) -> Advice:
    """The advice for all the runs of ``history`` as one group, within its site's partition limits."""
    from hpcjobs.accounting.reports.advise import advise, limits_from_site, most_common

    limits = None
    if history.site is not None and len(history.jobs):
        limits = limits_from_site(history.site, most_common(history.jobs.loc[history.jobs["step"].isna(), "partition"]))
    group = {"sweeps": ",".join(history.sweep_ids)} if history.sweep_ids else {"source": history.label}
    return advise(history.jobs, settings, limits=limits, group=group)


# ---------------------------------------------------------------------------- resubmit --right-size


@dataclass(frozen=True)
class PointChange:
    """What ``resubmit --right-size`` changes for one failed point.

    Attributes:
        point_id: The point.
        state: The state it failed in.
        changes: Resource → (before, after), in the resource's units (``memory`` per node in bytes,
            ``walltime`` seconds, ``cpus_per_task``).
        why: Resource → the reason (``raise: TIMEOUT``, ``advice: p95 + 20 %``).
        blocked: A raise the partition's limit prevents (the point goes again unchanged there).
    """

    point_id: str
    state: str
    changes: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    blocked: str = ""


class _Overlay(Mapping[str, int]):
    """Point id → shape index: ``changed`` first, else the sweep's own map (never empty, unlike ``OneShape``)."""

    def __init__(self, base: Mapping[str, int], changed: Mapping[str, int]) -> None:
        self._base = base
        self._changed = dict(changed)

    def __getitem__(self, point_id: str) -> int:
        if point_id in self._changed:
            return self._changed[point_id]
        return int(self._base.get(point_id, 0))

    def __iter__(self) -> Iterator[str]:
        yield from self._changed
        yield from (k for k in self._base if k not in self._changed)

    def __len__(self) -> int:
        return len(self._changed) + sum(1 for k in self._base if k not in self._changed)


def _shape_of(prepared: PreparedSweep, point_id: str) -> JobShape:
    from hpcjobs.sweep.points.shapes import JobShape

    if not prepared.shapes:
        return JobShape({}, prepared.experiment, prepared.job)
    return prepared.shapes[prepared.shape_of.get(point_id, 0)]


def _raised(asked: int | None, advised_raise: int | None, factor: float, limit: int | None,
            rounder: Any) -> tuple[int | None, bool]:
    """The raise of one point's request: the larger of request × factor and the history's raise, within ``limit``."""
    want = max([v for v in ((asked or 0) * factor, advised_raise or 0) if v] or [0])
    if not want:
        return None, False
    if limit is not None and asked is not None and asked >= limit:
        return None, True
    value = int(rounder(want))
    return (min(value, limit) if limit is not None else value), False


def plan_right_size(prepared: PreparedSweep, failed: Sequence[tuple[str, str]], advice: Advice,
                    memory_hit: Collection[str] = ()) -> list[PointChange]:
    """The resources each failed point gets (see the module docs).

    Args:
        prepared: The sweep as prepared from its ledger.
        failed: (point id, state) of the points that go again.
        advice: The sweep's advice (:func:`advise_history`).
        memory_hit: Points whose last run hit its memory limit without ending ``OUT_OF_MEMORY`` (killed by
            SIGKILL at its request: :func:`hpcjobs.accounting.reports.advise.memory_hits`).
    """
    from hpcjobs.accounting.reports.advise import limits_from_site, round_memory, round_walltime

    out = []
    settings = advice.settings
    for point_id, state in failed:
        job = _shape_of(prepared, point_id).job
        limits = limits_from_site(prepared.site, job.partition)
        change = PointChange(point_id, state)
        per_task = max(1, job.nodes * job.tasks_per_node)
        target: dict[str, int | None] = {}
        if advice.enough:
            target["memory"] = advice.proposed("memory")
            target["walltime"] = advice.proposed("walltime")
            cpus = advice.proposed("cpus")
            target["cpus_per_task"] = None if cpus is None else max(1, math.ceil(cpus / per_task))
            for key, why in (("memory", "advice"), ("walltime", "advice"), ("cpus_per_task", "advice")):
                if target.get(key) is not None:
                    change.why[key] = f"{why}: p{settings.quantile * 100:g} + {settings.margin * 100:g} %"
        if state == states.TIMEOUT:
            lr = advice.raise_for("walltime")
            value, blocked = _raised(job.walltime, lr.proposed if lr else None, settings.raise_factor,
                                     limits.max_walltime, round_walltime)
            target["walltime"] = value if value is not None else None
            change.why["walltime"] = "raise: TIMEOUT"
            if blocked:
                change = dataclasses.replace(change, blocked=f"wall time {job.walltime}s is the partition "
                                             f"{limits.partition} max_walltime: no raise possible")
        if state == states.OUT_OF_MEMORY or point_id in memory_hit:
            lr = advice.raise_for("memory")
            value, blocked = _raised(job.memory_per_node, lr.proposed if lr else None, settings.raise_factor,
                                     limits.memory_per_node, round_memory)
            target["memory"] = value
            change.why["memory"] = "raise: OUT_OF_MEMORY" if state == states.OUT_OF_MEMORY else "raise: memory limit"
            if blocked:
                change = dataclasses.replace(change, blocked=f"memory {job.memory_per_node} bytes is the partition "
                                             f"{limits.partition} memory_per_node: no raise possible")
        before = {"memory": job.memory_per_node, "walltime": job.walltime, "cpus_per_task": job.cpus_per_task}
        for key, value in target.items():
            if value is not None and value != before[key]:
                change.changes[key] = (before[key], int(value))
        for key in [k for k in change.why if k not in change.changes]:
            del change.why[key]
        out.append(change)
    return out


def apply_right_size(prepared: PreparedSweep, changes: Sequence[PointChange]) -> PreparedSweep:
    """``prepared`` with each changed point on a job shape of its own resources (resolved against the site).

    Raises:
        ConfigError: The changed resources break a site limit (the point is named).
    """
    import json

    from hpcjobs.resolve import resolve
    from hpcjobs.sweep.points.shapes import JobShape

    shapes = list(prepared.shapes) or [JobShape({}, prepared.experiment, prepared.job)]
    made: dict[str, int] = {}
    changed: dict[str, int] = {}
    for ch in changes:
        if not ch.changes:
            continue
        base = _shape_of(prepared, ch.point_id)
        update = {("memory" if k == "memory" else k): after for k, (_before, after) in ch.changes.items()}
        key = json.dumps([prepared.shape_of.get(ch.point_id, 0), sorted(update.items())])
        if key not in made:
            exp = base.experiment.model_copy(update={
                "resources": base.experiment.resources.model_copy(update=update)})
            try:
                job: ResolvedJob = resolve(exp, prepared.site)
            except ConfigError as exc:
                raise ConfigError([ConfigProblem(f"point {ch.point_id} right-sized: {p.message}", key=p.key)
                                   for p in exc.problems]) from None
            settings = {**base.settings, **{f"resources.{k}": v for k, v in update.items()}}
            shapes.append(JobShape(settings, exp, job))
            made[key] = len(shapes) - 1
        changed[ch.point_id] = made[key]
    if not changed:
        return prepared
    return dataclasses.replace(prepared, shapes=tuple(shapes), shape_of=_Overlay(prepared.shape_of, changed))


def right_size_resubmit(
    name: str | Path,
    *,
    settings: AdviceSettings | None = None,
    which: Sequence[str] = tuple(sorted(states.FAILURE_STATES)),
    root: str | Path | None = None,
    throttle: int | None = None,
    force: bool = False,
    from_file: str | None = None,
    client: SchedulerClient | None = None,
    dry_run: bool = False,
) -> tuple[PreparedSweep, Advice, list[PointChange], SubmitReport | None, int]:
    """Resubmit a sweep's failed points, each with its right-sized resources.

    The ledger steps are those of :func:`hpcjobs.sweep.api.resubmit_sweep`: one status poll, the failed
    points reset (their earlier attempt kept), then the submitter, which submits each pending point once.

    Args:
        name: The sweep.
        settings: How advice is computed.
        which: States whose points go again.
        root: Folder of sweep folders.
        throttle: At most N tasks of each array at once.
        force: Go on although the experiment file changed.
        from_file: Saved accounting to advise from instead of ``sacct``.
        client: The scheduler client (default: the sweep's scheduler's).
        dry_run: Plan the changes only: nothing is reset or submitted.

    Returns:
        The prepared sweep (with the new shapes), the advice, the per-point changes, the submission
        report (``None`` on a dry run) and how many points were reset.
    """
    from hpcjobs.schedulers.client import client_for
    from hpcjobs.sweep.api import prepared_from_ledger
    from hpcjobs.sweep.find import find_sweep
    from hpcjobs.sweep.ledger.store import Ledger
    from hpcjobs.sweep.poll import poll_status
    from hpcjobs.sweep.submitter import SweepSubmitter

    folder = find_sweep(name, root)
    base = prepared_from_ledger(folder, force=force)
    if capabilities_of(base.site.scheduler).runs_here:
        raise ConfigError("--right-size needs a scheduler's accounting; a local sweep has none")
    c = client or client_for(base.site.scheduler)
    with Ledger.open(folder) as ledger:
        poll_status(ledger, c)
        records = ledger.points(list(which))
    failed = [(p.point_id, p.state) for p in records]
    advice = advise_history(load_history(str(folder), from_file=from_file, root=root), settings)
    hit = advice.raise_for("memory")
    hit_jobs = set(hit.jobs) if hit is not None else set()
    memory_hit = {p.point_id for p in records
                  if {p.job_id, f"{p.array_job_id}_{p.array_index}"} & hit_jobs}
    changes = plan_right_size(base, failed, advice, memory_hit)
    prepared = apply_right_size(base, changes)
    if dry_run:
        return prepared, advice, changes, None, 0
    planned = {pid for pid, _state in failed}
    with Ledger.open(folder) as ledger:  # what is still failed now (a point resubmitted meanwhile is left alone)
        reset = ledger.reset_for_resubmit([p.point_id for p in ledger.points(list(which)) if p.point_id in planned])
        report = SweepSubmitter(prepared, ledger, c, throttle=throttle).submit()
    return prepared, advice, changes, report, reset


__all__ = ["History", "PointChange", "advise_history", "apply_right_size", "history_frame", "load_history",
           "plan_right_size", "right_size_resubmit"]
