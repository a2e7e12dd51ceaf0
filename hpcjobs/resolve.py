"""Resolve an experiment against a site: pick the partition, apply defaults, enforce the site's limits.

Everything a request could break is checked here, before a script is written
or anything reaches the scheduler, and reported as one :class:`ConfigError`
naming the file, the key, the limit, and the partitions that would fit.

What a check needs to know of the site's scheduler (does it mail, how a secret from the
environment reaches a job, which launchers it provides, does it signal a job before its wall
time) is a :class:`~hpcjobs.config.scheduler_facts.SchedulerFacts`, never a comparison of the
scheduler's name. This module sits below :mod:`hpcjobs.schedulers` and may not import it, so the
dependency is inverted: the backends hold the facts, and :mod:`hpcjobs.schedulers.registry`
installs the lookup by name (:func:`~hpcjobs.config.scheduler_facts.set_facts_provider`) when it is
imported. :func:`resolve` asks it, unless its caller passes ``scheduler_facts`` itself.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from hpcjobs.config.arrays import ArraySpec
from hpcjobs.config.container import ResolvedContainer, container_problems, resolve_container
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.policy import directive_names, forbidden_in, looks_like_secret
from hpcjobs.config.scheduler_facts import SchedulerFacts, facts_of, set_facts_provider
from hpcjobs.config.site import Partition, SiteConfig
from hpcjobs.config.yamlio import YamlDocument
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.launch.settings import LaunchSettings, launch_problems, resolve_launch, uses_distributed_settings
from hpcjobs.units import format_memory_human, format_walltime_slurm

__all__ = ["JobSecret", "ResolvedJob", "SchedulerFacts", "directive_names", "facts_of", "request_problems",
           "resolve", "set_facts_provider"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSecret:
    """A variable the job reads at run time: from a file (``file``) or the submitter's environment (``env``).

    Only where the value is, never the value, is part of a resolved job.
    """

    name: str
    env: str | None = None
    file: str | None = None


@dataclass(frozen=True)
class ResolvedJob:
    """A job ready to render: every default applied, every limit checked.

    Memory is per node in bytes; wall time in seconds. ``None`` means "leave it
    to the scheduler's default" (and nothing is written for it). ``secrets`` say where the job
    reads each secret (never its value); ``warnings`` are for the person who asked (the command
    line prints them); ``site_file`` is the site config's path, for locating its problems.
    """

    name: str
    site: SiteConfig
    partition: str | None
    account: str | None
    qos: str | None
    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    gpus_per_node: int
    gpu_type: str | None
    memory_per_node: int | None
    walltime: int | None
    exclusive: bool
    environment: tuple[tuple[str, str], ...]
    modules: tuple[str, ...]
    setup: tuple[str, ...]
    body: str
    workdir: str | None
    output_dir: str
    extra_directives: tuple[str, ...]
    params: dict[str, str] = field(default_factory=dict)
    array: ArraySpec | None = None
    launch: LaunchSettings | None = None
    secrets: tuple[JobSecret, ...] = ()
    warnings: tuple[str, ...] = ()
    site_file: str = ""
    #: Mail from the scheduler: ``(address, events)`` with events from ``begin``, ``end``, ``fail``.
    notify: tuple[str, tuple[str, ...]] | None = None
    #: What the job's program runs in (the experiment's ``container:`` on the site's runtimes), or ``None``.
    container: ResolvedContainer | None = None
    #: Where every job is a container already (Swarm, Kubernetes): the registry image the experiment's
    #: ``container:`` names, which replaces the site's; ``None``: the site's.
    job_image: str | None = None

    @property
    def scheduler(self) -> str:
        """The site's scheduler family."""
        return self.site.scheduler

    @property
    def scheduler_partition(self) -> str | None:
        """The partition/queue name written into the script (the entry's ``scheduler_name`` if set)."""
        part = self.partition_config
        return (part.scheduler_name or self.partition) if part else self.partition

    @property
    def partition_config(self) -> Partition | None:
        """The chosen partition's limits, if the site defines partitions."""
        return self.site.partitions.get(self.partition) if self.partition else None


def _fit_problems(req: Experiment, walltime: int | None, memory: int | None, part: Partition) -> list[tuple[str, str]]:
    """Ways the request breaks ``part``'s limits, as (key, message) pairs."""
    r = req.resources
    out: list[tuple[str, str]] = []
    if r.gpus_per_node > part.gpus_per_node:
        out.append(("resources.gpus_per_node",
                    f"{r.gpus_per_node} GPUs per node requested, the limit is {part.gpus_per_node}"))
    if r.gpu_type and part.gpus_per_node and r.gpu_type not in part.gpu_types:
        kinds = ", ".join(part.gpu_types) or "unspecified"
        out.append(("resources.gpu_type", f"GPU type {r.gpu_type!r} is not available (available: {kinds})"))
    if part.max_nodes is not None and r.nodes > part.max_nodes:
        out.append(("resources.nodes", f"{r.nodes} nodes requested, the limit is {part.max_nodes}"))
    cpus = r.tasks_per_node * r.cpus_per_task
    if part.cpus_per_node is not None and cpus > part.cpus_per_node:
        out.append(("resources.cpus_per_task",
                    f"{cpus} CPUs per node requested (tasks_per_node × cpus_per_task), "
                    f"the limit is {part.cpus_per_node}"))
    if memory is not None and part.memory_per_node is not None and memory > part.memory_per_node:
        out.append(("resources.memory",
                    f"{format_memory_human(memory)} per node requested, the limit is "
                    f"{format_memory_human(part.memory_per_node)}"))
    if walltime is not None and part.max_walltime is not None and walltime > part.max_walltime:
        out.append(("resources.walltime",
                    f"wall time {format_walltime_slurm(walltime)} requested, the limit is "
                    f"{format_walltime_slurm(part.max_walltime)}"))
    if req.qos and part.qos and req.qos not in part.qos:
        out.append(("qos", f"QoS {req.qos!r} is not allowed (allowed: {', '.join(part.qos)})"))
    return out


def _qos_limit_problems(exp: Experiment, site: SiteConfig, walltime: int | None, site_file: str
                        ) -> list[tuple[str, str]]:
    """Ways the request breaks the ``qos_limits`` of the QOS it runs under (its ``qos``, else ``default_qos``)."""
    qos = exp.qos or site.default_qos
    limits = site.qos_limits.get(qos) if qos else None
    if limits is None:
        return []
    r = exp.resources
    where = f"QOS {qos!r} of site {site.name!r}" + (f" ({site_file})" if site_file else "")
    out: list[tuple[str, str]] = []
    if walltime is not None and limits.max_walltime is not None and walltime > limits.max_walltime:
        out.append(("resources.walltime",
                    f"wall time {format_walltime_slurm(walltime)} requested, {where} allows at most "
                    f"{format_walltime_slurm(limits.max_walltime)} (its MaxWall): Slurm would keep the job pending "
                    "(QOSMaxWallDurationPerJobLimit); ask for less time or use another QOS"))
    cpus = r.nodes * r.tasks_per_node * r.cpus_per_task
    if limits.max_cpus_per_job is not None and cpus > limits.max_cpus_per_job:
        out.append(("resources.cpus_per_task", f"{cpus} CPUs per job requested (nodes × tasks_per_node × "
                    f"cpus_per_task), {where} allows at most {limits.max_cpus_per_job}"))
    gpus = r.nodes * r.gpus_per_node
    if limits.max_gpus_per_job is not None and gpus > limits.max_gpus_per_job:
        out.append(("resources.gpus_per_node", f"{gpus} GPUs per job requested (nodes × gpus_per_node), "
                    f"{where} allows at most {limits.max_gpus_per_job}"))
    return out


def request_problems(exp: Experiment, site: SiteConfig, partition: str) -> list[tuple[str, str]]:
    """Why ``exp`` would be refused on ``partition`` of ``site`` before submission, as (key, message) pairs.

    The same checks :func:`resolve` makes: the partition's limits (with its default wall time when the
    experiment names none) and the ``qos_limits`` of the QOS the job runs under (``exp.qos``, else the
    site's ``default_qos``). An empty list: the request fits.

    Raises:
        KeyError: ``partition`` is not one of the site's partitions.
    """
    part = site.partitions[partition]
    walltime = exp.resources.walltime or part.default_walltime
    return _fit_problems(exp, walltime, exp.resources.memory, part) + _qos_limit_problems(exp, site, walltime, "")


def _choose_partition(exp: Experiment, site: SiteConfig, doc: YamlDocument | None, site_file: str) -> str | None:
    if not site.partitions:
        if exp.partition:
            raise ConfigError(_problem(doc, "partition", f"site {site.name!r} has no partitions or queues",
                                       site_file))
        return None
    walltime, memory = exp.resources.walltime, exp.resources.memory
    fits = [n for n, p in site.partitions.items() if not _fit_problems(exp, walltime, memory, p)]
    wanted = exp.partition
    if wanted is not None and wanted not in site.partitions:
        raise ConfigError(_problem(
            doc, "partition", f"unknown partition {wanted!r} on site {site.name!r}", site_file,
            choices=tuple(site.partitions),
        ))
    if wanted is None:
        if site.default_partition and site.default_partition in fits:
            return site.default_partition
        if fits:
            return fits[0]
        wanted = site.default_partition or next(iter(site.partitions))
    problems = _fit_problems(exp, walltime, memory, site.partitions[wanted])
    if not problems:
        return wanted
    hint = (f"partitions that would fit: {', '.join(fits)}" if fits
            else "no partition of this site fits the request")
    raise ConfigError([
        _problem(doc, key, f"{msg} on partition {wanted!r} of site {site.name!r} ({site_file}); {hint}", site_file)
        for key, msg in problems
    ])


def _problem(doc: YamlDocument | None, key: str, message: str, site_file: str, **kwargs: Any) -> ConfigProblem:
    del site_file  # named in the message where it helps
    path = tuple(key.split("."))
    if doc is None:
        return ConfigProblem(message, key=key, **kwargs)
    return doc.problem(path, message, **kwargs)


def resolve(
    exp: Experiment,
    site: SiteConfig,
    *,
    doc: YamlDocument | None = None,
    site_file: str = "",
    params: dict[str, str] | None = None,
    array: ArraySpec | None = None,
    scheduler_facts: SchedulerFacts | None = None,
) -> ResolvedJob:
    """Apply ``site``'s defaults to ``exp`` and check it against the site's limits.

    Args:
        exp: The validated experiment.
        site: The site config.
        doc: The experiment's YAML document, to locate errors by line.
        site_file: The site config's path, named in messages.
        params: Parameters of this job (a sweep point), exported as environment variables.
        array: Submit as an array with this range.
        scheduler_facts: What the site's scheduler does (default: asked of the installed provider,
            :func:`facts_of`).

    Raises:
        ConfigError: The request breaks a limit, names an unknown partition/account, or uses a
            directive the site forbids.
    """
    facts = scheduler_facts if scheduler_facts is not None else facts_of(site.scheduler)
    partition = _choose_partition(exp, site, doc, site_file)
    part = site.partitions.get(partition) if partition else None
    problems: list[ConfigProblem] = []

    account = exp.account or site.default_account
    if site.account_required and not account:
        problems.append(_problem(doc, "account", f"site {site.name!r} requires an account", site_file,
                                 choices=tuple(site.accounts)))
    if account and site.accounts and account not in site.accounts:
        problems.append(_problem(doc, "account", f"unknown account {account!r} on site {site.name!r}",
                                 site_file, choices=tuple(site.accounts)))

    forbidden = set(site.forbidden_directives)
    for i, d in enumerate(exp.directives):
        bad = forbidden_in(d, forbidden, site.scheduler)
        if bad:
            problems.append(_problem(doc, f"directives.{i}",
                                     f"site {site.name!r} does not accept the directive(s) {', '.join(sorted(bad))}"
                                     f" in {d!r}", site_file))
    r = exp.resources
    walltime = r.walltime or (part.default_walltime if part else None)
    for key, msg in launch_problems(exp, site, walltime, facts=facts):
        problems.append(_problem(doc, key, msg, site_file))
    problems += [_problem(doc, key, msg, site_file) for key, msg in _qos_limit_problems(exp, site, walltime, site_file)]
    extra = list(site.directives) + (list(part.directives) if part else []) + list(exp.directives)
    problems += _secret_problems(exp, site, extra, doc, site_file, facts)
    if exp.pack is not None:
        from hpcjobs.config.pack import pack_share_problems

        launcher = exp.launch.launcher if exp.launch is not None and exp.launch.active else None
        problems += [_problem(doc, key, msg, site_file) for key, msg in pack_share_problems(
            exp.pack, nodes=r.nodes, cpus=r.tasks_per_node * r.cpus_per_task, gpus=r.gpus_per_node,
            launcher=launcher)]
    # where jobs are containers already (Swarm, Kubernetes) the backend checks the container: against its section
    own = facts.job_container_problems(site, exp.container) if exp.container is not None else None
    job_is_container = own is not None
    if exp.container is not None:
        launcher = exp.launch.launcher if exp.launch is not None else None
        pairs = own if own is not None else container_problems(
            exp.container, site.containers, site_name=site.name, scheduler=site.scheduler,
            hosted=facts.container_runtimes, launcher=launcher)
        problems += [_problem(doc, f"container.{key}", msg, site_file) for key, msg in pairs]
    if problems:
        raise ConfigError(problems)

    memory = r.memory
    distributed = uses_distributed_settings(exp)
    env: dict[str, str] = {"OMP_NUM_THREADS": str(r.cpus_per_task)}
    env.update(site.environment)
    if distributed:
        env.update(site.distributed.environment)
    env.update(exp.environment)
    all_params = dict(exp.params)
    all_params.update(params or {})
    env.update(all_params)
    body = exp.command if exp.command else (exp.script or "")
    warnings = _secret_warnings(exp, doc)
    if exp.notify is not None and not facts.mail:
        warnings += (f"notify: the {site.scheduler} site {site.name} sends no mail; notify is ignored",)
    for text in warnings:
        log.warning("warning: %s", text)
    return ResolvedJob(
        name=exp.name,
        site=site,
        partition=partition,
        account=account,
        qos=exp.qos or site.default_qos,
        nodes=r.nodes,
        tasks_per_node=r.tasks_per_node,
        cpus_per_task=r.cpus_per_task,
        gpus_per_node=r.gpus_per_node,
        gpu_type=r.gpu_type,
        memory_per_node=memory,
        walltime=walltime,
        exclusive=r.exclusive or bool(part and part.exclusive),
        environment=tuple(env.items()),
        modules=tuple(site.modules) + (tuple(site.distributed.modules) if distributed else ()) + tuple(exp.modules),
        setup=tuple(exp.setup),
        body=body.rstrip("\n"),
        workdir=exp.workdir,
        output_dir=exp.output_dir,
        extra_directives=tuple(extra),
        params=all_params,
        array=array,
        launch=resolve_launch(exp.launch, site, gpus_per_node=r.gpus_per_node, tasks_per_node=r.tasks_per_node,
                              walltime=walltime),
        secrets=tuple(JobSecret(name, s.env, s.file) for name, s in exp.secrets.items()),
        warnings=warnings,
        site_file=site_file,
        notify=(exp.notify.email, tuple(exp.notify.on)) if exp.notify is not None else None,
        job_image=exp.container.image.removeprefix("docker://") if exp.container and job_is_container else None,
        container=None if exp.container is None or site.containers is None or job_is_container else resolve_container(
            exp.container, site.containers, gpus=r.gpus_per_node > 0,
            job_env=(*env, *exp.secrets, "HPCJOBS_JOB_NAME", "HPCJOBS_SITE")),
    )


def _secret_problems(exp: Experiment, site: SiteConfig, directives: list[str], doc: YamlDocument | None,
                     site_file: str, facts: SchedulerFacts) -> list[ConfigProblem]:
    """Secrets from the environment this site cannot deliver (``facts.env_secret_problem`` says why).

    A scheduler may refuse them because it would write their values somewhere others can read
    (PBS's ``qsub -v``), or because they would not arrive (a Slurm ``--export`` directive).
    """
    problems: list[ConfigProblem] = []
    for name, secret in exp.secrets.items():
        if secret.env is None:
            continue
        message = facts.env_secret_problem(site, directives)
        if message is not None:
            problems.append(_problem(doc, f"secrets.{name}.env", message, site_file))
    return problems


def _secret_warnings(exp: Experiment, doc: YamlDocument | None) -> tuple[str, ...]:
    """Warnings about credentials written into the script in clear text, and secrets not set here."""
    out: list[str] = []
    for section, values in (("environment", exp.environment), ("params", exp.params)):
        for name in values:
            if looks_like_secret(name):
                where = _problem(doc, f"{section}.{name}", "", "")
                out.append(f"{where}looks like a credential, and values in {section}: are written into the "
                           f"script in clear text; use `secrets: {{{name}: {{env: {name}}}}}` or "
                           "`{file: PATH}` so the job reads it at run time")
    for name, secret in exp.secrets.items():
        if secret.env is not None and secret.env not in os.environ:
            where = _problem(doc, f"secrets.{name}.env", "", "")
            out.append(f"{where}${secret.env} is not set here; the job stops unless it is set when you submit")
    return tuple(out)
