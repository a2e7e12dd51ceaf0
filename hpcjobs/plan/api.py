"""The library call behind ``hpcjobs plan`` and ``--partition auto``.

:func:`plan_experiment` loads the experiment (with its ``--set`` overrides) and its site as
``hpcjobs render``/``submit`` do, and for every partition of the site (times every QOS of its
``qos_limits``, when it lists them) makes one :class:`~hpcjobs.plan.rank.PlanRow`:

* fits / why not: the checks that refuse a request before submission
  (:func:`hpcjobs.resolve.request_problems`, then :func:`hpcjobs.resolve.resolve`);
* where the backend estimates starts (``start_estimate``: Slurm), the script rendered for that
  partition, given to its estimate (``sbatch --test-only --partition=P``,
  :mod:`hpcjobs.schedulers.slurm.estimate`); a request the scheduler refuses there does not fit;
* where it lists its queues (``queue_states``: PBS Pro / OpenPBS), the queue's state and its queued and
  running jobs (``qstat -Q -f -F json``);
* the queue wait of similar jobs on that partition (:mod:`hpcjobs.plan.history`: ``sacct`` on
  Slurm, ``qstat -x -f -F json`` on PBS);
* the cost (:mod:`hpcjobs.plan.billing`).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpcjobs import process, transport
from hpcjobs.errors import CommandError, ConfigError, ConfigProblem, HpcJobsError, SchedulerOutputError
from hpcjobs.plan.billing import BillingWeightsError, parse_billing_weights, request_cost
from hpcjobs.plan.rank import PlanRow, recommend
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import find_backend, get_backend
from hpcjobs.sweep.request import site_login

log = logging.getLogger(__name__)

#: Seconds one ``sbatch --test-only`` or ``qstat`` may take.
ESTIMATE_TIMEOUT_S = 60.0
#: Days of history by default.
DEFAULT_DAYS = 14


@dataclass(frozen=True)
class Plan:
    """Where the request could run, and the recommendation.

    Attributes:
        experiment: The experiment's name.
        site: The site's name.
        scheduler: Its scheduler family.
        request: Nodes, CPUs per node, GPUs per node, memory per node (bytes) and wall time (s).
        rows: One per partition (and QOS), in the site's order.
        recommended: The chosen row, ``None`` when the request fits nowhere.
        reason: Why, in one line.
        planned_at: When the estimates were asked for (UTC).
        history_days: Days of history looked at (0: none).
        history_jobs: Jobs in that history.
        history_error: Why the history could not be read, when it could not.
        history_source: Where the history came from, in words.
    """

    experiment: str
    site: str
    scheduler: str
    request: dict[str, Any]
    rows: tuple[PlanRow, ...]
    recommended: PlanRow | None
    reason: str
    planned_at: datetime
    history_days: int = 0
    history_jobs: int = 0
    history_error: str | None = None
    notes: tuple[str, ...] = field(default=())
    history_source: str = ""

    @property
    def queue_states(self) -> bool:
        """Whether the rows show each queue's state and queued/running jobs (PBS Pro) in place of a start
        estimate (the backend's ``queue_states``)."""
        return get_backend(self.scheduler).capabilities.queue_states

    @property
    def billing_without_weights(self) -> str:
        """What a partition's billing-hours are when the site gives it no billing weights (the footnote)."""
        return get_backend(self.scheduler).billing_without_weights

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (times as ISO 8601 UTC)."""
        def row(r: PlanRow) -> dict[str, Any]:
            return {"partition": r.partition, "qos": r.qos, "fits": r.fits, "why_not": list(r.why_not),
                    "expected_start": r.start.isoformat() if r.start else None, "start_nodes": r.start_nodes,
                    "estimate_error": r.estimate_error, "history_jobs": r.wait_jobs,
                    "wait_p50_s": r.wait_p50_s, "wait_p90_s": r.wait_p90_s, "core_hours": r.core_hours,
                    "gpu_hours": r.gpu_hours, "billing_hours": r.billing_hours, "billing_known": r.billing_known,
                    "queue_state": r.queue_state, "queued": r.queued, "running": r.running}
        return {"experiment": self.experiment, "site": self.site, "scheduler": self.scheduler,
                "request": self.request, "planned_at": self.planned_at.isoformat(),
                "history_days": self.history_days, "history_jobs": self.history_jobs,
                "history_error": self.history_error, "history_source": self.history_source,
                "rows": [row(r) for r in self.rows],
                "recommended": ({"partition": self.recommended.partition, "qos": self.recommended.qos}
                                if self.recommended else None),
                "reason": self.reason}


def plan_experiment(path: str | Path, *, site: str | None = None, overrides: tuple[str, ...] = (),
                    days: int = DEFAULT_DAYS, history: bool = True, now: datetime | None = None,
                    cache_dir: str | Path | None = None, remote: str | None = None) -> Plan:
    """Rows for every partition (and QOS) of the experiment's site, and the recommended one.

    Args:
        path: The experiment file.
        site: Site override (name or file), as ``--site``.
        overrides: ``--set KEY=VALUE`` overrides.
        days: Days of accounting history for the queue wait (0: none, pandas is not imported).
        history: Read the history at all.
        now: The current time (tests).
        cache_dir: Cache folder of the accounting windows (default: the user's cache).
        remote: ``--remote [USER@]HOST[:PORT]``: ask the scheduler on that login node (default: the site's
            ``remote:``, else this machine's scheduler).

    Raises:
        ConfigError: Bad experiment or site, or a site whose scheduler has no partitions to plan.
        RemoteConnectionError: ssh could not log in.
    """
    from hpcjobs.config.loading import load_experiment
    from hpcjobs.render.script import load_site_for

    experiment, _doc = load_experiment(path, overrides)
    site_config, site_file = load_site_for(experiment, site, ask_scheduler=True)
    with transport.scope():  # a site's login node (`remote:`, --remote): one SSH connection for the whole plan
        transport.use(site_login(site_config, remote))  # (and its own accounting cache: accounting_cache_root)
        return _plan(experiment, site_config, site_file, days=days, history=history, now=now, cache_dir=cache_dir)


def _plan(experiment: Any, site_config: Any, site_file: str, *, days: int, history: bool, now: datetime | None,
          cache_dir: str | Path | None) -> Plan:
    backend = find_backend(site_config.scheduler)
    if backend is None or not backend.plans_partitions or not site_config.partitions:
        raise ConfigError(ConfigProblem(
            f"site {site_config.name!r} ({site_config.scheduler}) has no partitions or queues to choose from: "
            "hpcjobs plan compares the partitions of a Slurm, PBS Pro/OpenPBS or Torque site", key="site"))
    now_ = now or datetime.now(timezone.utc)
    r = experiment.resources
    request = {"nodes": r.nodes, "cpus_per_node": r.tasks_per_node * r.cpus_per_task,
               "gpus_per_node": r.gpus_per_node, "memory_per_node": r.memory, "walltime_s": r.walltime}
    rows = [_row(experiment, site_config, site_file, pname, qos) for pname, qos in _candidates(experiment,
                                                                                                site_config)]
    notes: list[str] = []
    if backend.capabilities.start_estimate:
        rows = _estimate_starts(rows, experiment, site_config, site_file, backend)
    elif backend.capabilities.queue_states:
        rows = _queue_states(rows, site_config, notes, backend)
    h_jobs, h_error = 0, None
    if history and days > 0 and any(row.fits for row in rows):
        rows, h_jobs, h_error = _with_history(rows, experiment, site_config, days, now_, cache_dir)
    best, reason = recommend(rows, now_)
    source = backend.wait_history_words.format(days=days)
    return Plan(experiment.name, site_config.name, site_config.scheduler, request, tuple(rows), best, reason, now_,
                days if history else 0, h_jobs, h_error, tuple(notes), source)


def choose_partition(path: str | Path, *, site: str | None = None, overrides: tuple[str, ...] = (),
                     days: int = DEFAULT_DAYS) -> tuple[str, str | None, str]:
    """The partition (and QOS) ``--partition auto`` takes: :func:`plan_experiment`'s recommendation.

    Returns:
        The partition, the QOS (``None``: as the experiment says) and the reason in one line.

    Raises:
        ConfigError: The request fits no partition (each one's reasons named).
    """
    plan = plan_experiment(path, site=site, overrides=overrides, days=days)
    if plan.recommended is None:
        raise ConfigError(ConfigProblem(f"--partition auto: {plan.reason}", key="partition"))
    return plan.recommended.partition, plan.recommended.qos, plan.reason


def with_partition(path: str | Path, partition: str | None, *, site: str | None = None,
                   overrides: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str | None]:
    """The ``--set`` overrides of ``submit``/``sweep --partition NAME|auto``, and the line that says the choice.

    Args:
        path: The experiment file.
        partition: ``--partition``: a partition, ``auto`` (:func:`choose_partition`), or ``None``.
        site: ``--site``.
        overrides: The ``--set`` overrides given.

    Returns:
        The overrides with ``partition=`` (and ``qos=`` when the chosen row names one) added, and for
        ``auto`` one line saying what was chosen and why (``None`` otherwise).

    Raises:
        ConfigError: ``auto`` and the request fits no partition.
    """
    if partition is None:
        return overrides, None
    if partition != "auto":
        return (*overrides, f"partition={partition}"), None
    name, qos, reason = choose_partition(path, site=site, overrides=overrides)
    added = (f"partition={name}",) + ((f"qos={qos}",) if qos else ())
    return (*overrides, *added), f"--partition auto: {name}{f' (QOS {qos})' if qos else ''}: {reason}"


def _candidates(exp: Any, site: Any) -> list[tuple[str, str | None]]:
    """(partition, qos) pairs: every partition, times the QOS of ``qos_limits`` the partition allows."""
    out: list[tuple[str, str | None]] = []
    for pname, part in site.partitions.items():
        if exp.qos or not site.qos_limits:
            out.append((pname, exp.qos or site.default_qos))
            continue
        allowed = [q for q in site.qos_limits if not part.qos or q in part.qos]
        out += [(pname, q) for q in allowed] or [(pname, site.default_qos)]
    return out


def _row(exp: Any, site: Any, site_file: str, pname: str, qos: str | None) -> PlanRow:
    from hpcjobs.resolve import request_problems, resolve

    part = site.partitions[pname]
    candidate = exp.model_copy(update={"partition": pname, "qos": qos})
    problems = [msg for _key, msg in request_problems(candidate, site, pname)]
    if not problems:
        try:
            resolve(candidate, site, site_file=site_file)
        except ConfigError as exc:
            problems = [p.message for p in exc.problems]
    r = exp.resources
    walltime = r.walltime or part.default_walltime
    weights: dict[str, float] | None = None
    notes: tuple[str, ...] = ()
    if part.tres_billing_weights:
        try:
            weights = parse_billing_weights(part.tres_billing_weights)
        except BillingWeightsError as exc:
            notes = (str(exc),)
    cost = request_cost(nodes=r.nodes, cpus_per_node=r.tasks_per_node * r.cpus_per_task,
                        gpus_per_node=r.gpus_per_node, memory_per_node=r.memory, walltime_s=walltime,
                        weights=weights, gpu_type=r.gpu_type)
    return PlanRow(pname, qos, not problems, tuple(problems),
                   core_hours=cost.core_hours if cost else None, gpu_hours=cost.gpu_hours if cost else None,
                   billing_hours=cost.billing_hours if cost else None, billing_known=bool(cost and cost.billing_known),
                   notes=notes)


def _client(backend: BaseBackend, env: dict[str, str] | None = None) -> Any:
    from hpcjobs.schedulers.client import SchedulerClient

    return SchedulerClient(backend, env=env)


def _estimate_starts(rows: list[PlanRow], exp: Any, site: Any, site_file: str, backend: BaseBackend) -> list[PlanRow]:
    """Each fitting row with the scheduler's start estimate of the script rendered for it (``sbatch --test-only``)."""
    from hpcjobs.render.script import render_job
    from hpcjobs.resolve import resolve

    client = _client(backend, dict(backend.start_estimate_env))
    over_ssh = process.routed()
    out = []
    with tempfile.TemporaryDirectory(prefix="hpcjobs-plan-") as tmp:
        for i, row in enumerate(rows):
            if not row.fits:
                out.append(row)
                continue
            job = resolve(exp.model_copy(update={"partition": row.partition, "qos": row.qos}), site,
                          site_file=site_file)
            text = render_job(job, template=exp.template).text
            script = Path(tmp) / f"{i}.sh"
            script.write_text(text, encoding="utf-8")
            if over_ssh:  # the script exists here only: the login node reads it from standard input
                argv = backend.start_estimate_argv(Path("/dev/stdin"), job.scheduler_partition or row.partition,
                                                   row.qos)
            else:
                argv = backend.start_estimate_argv(script, job.scheduler_partition or row.partition, row.qos)
            try:
                result = client.run(argv, timeout=ESTIMATE_TIMEOUT_S, check=False, cwd=None if over_ssh else tmp,
                                    input=text if over_ssh else None)
            except CommandError as exc:  # not started, or timed out
                out.append(replace(row, estimate_error=f"{exc}"))
                continue
            est = backend.parse_start_estimate(result.stderr, result.returncode)
            if est.refusal is not None:
                out.append(replace(row, fits=False, why_not=(est.refusal,), estimate_error=est.error))
            else:
                out.append(replace(row, start=est.start, start_nodes=est.nodes, estimate_error=est.error))
    return out


def _queue_states(rows: list[PlanRow], site: Any, notes: list[str], backend: BaseBackend) -> list[PlanRow]:
    """Each row with its queue's state (PBS Pro ``qstat -Q``); a disabled or stopped queue does not fit."""
    try:
        result = _client(backend).run(backend.queue_state_argv(), timeout=ESTIMATE_TIMEOUT_S)
        states = backend.parse_queue_states(result.stdout)
    except (CommandError, SchedulerOutputError) as exc:
        notes.append(f"queue state unknown: {exc}")
        return rows
    out = []
    for row in rows:
        name = site.partitions[row.partition].scheduler_name or row.partition
        q = states.get(name)
        if q is None:
            out.append(replace(row, fits=False, why_not=(*row.why_not, f"qstat -Q does not list queue {name!r}")))
            continue
        row = replace(row, queue_state=q.state, queued=q.queued, running=q.running)
        if row.fits and not (q.enabled and q.started):
            row = replace(row, fits=False, why_not=(f"queue {name} is {q.state}",))
        out.append(row)
    return out


def _with_history(rows: list[PlanRow], exp: Any, site: Any, days: int, now: datetime,
                  cache_dir: str | Path | None) -> tuple[list[PlanRow], int, str | None]:
    """Each row with the wait of similar jobs on its partition; (rows, jobs in the history, error)."""
    from hpcjobs.plan import history as h

    try:
        hist = h.wait_history(site.scheduler, days, now=now, cache_dir=cache_dir)
    except HpcJobsError as exc:
        log.info("history of queue waits not read: %s", exc)
        return rows, 0, str(exc).splitlines()[0]
    if hist is None:
        return rows, 0, f"no live accounting history for {site.scheduler}"
    r = exp.resources
    names = {row.partition: site.partitions[row.partition].scheduler_name or row.partition for row in rows}
    stats = h.wait_by_partition(hist, gpus=r.nodes * r.gpus_per_node, nodes=r.nodes,
                                walltime_s=r.walltime or None, partitions=list(names.values()))
    out = []
    for row in rows:
        s = stats.get(names[row.partition])
        out.append(replace(row, wait_jobs=s.jobs, wait_p50_s=s.p50_s, wait_p90_s=s.p90_s) if s else row)
    return out, len(hist), None
