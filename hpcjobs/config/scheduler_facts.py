"""What checking a job against its site must know of the site's scheduler, without naming it.

:mod:`hpcjobs.resolve` and :mod:`hpcjobs.launch.settings` sit below :mod:`hpcjobs.schedulers` and
may not import it; the backends there know whether their scheduler mails, how a secret from the
environment reaches a job, which launchers it provides and whether it signals a job before its
wall time. The dependency is inverted: this module defines the facts (:class:`SchedulerFacts`) and
a slot for the lookup by scheduler name (:func:`set_facts_provider`), which
:mod:`hpcjobs` (the package's top module, always imported first) fills with a function that asks
:mod:`hpcjobs.schedulers.registry` on the first job. A caller may also pass the facts itself
(``resolve(..., scheduler_facts=)``). It is a module of its own, importing nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcjobs.config.container import ContainerSpec
    from hpcjobs.config.site import SiteConfig

__all__ = ["FactsProvider", "SchedulerFacts", "facts_of", "set_facts_provider"]


def _secret_arrives(site: SiteConfig, directives: Sequence[str]) -> str | None:
    """The job inherits the submitter's environment: a secret from it arrives (the local runner)."""
    del site, directives
    return None


def _jobs_are_not_containers(site: SiteConfig, spec: ContainerSpec) -> list[tuple[str, str]] | None:
    """A batch scheduler: the job runs in a container runtime of the site's ``containers:`` section."""
    del site, spec
    return None


@dataclass(frozen=True)
class SchedulerFacts:
    """What resolving a job must know of its site's scheduler: the backend's answers, not its name.

    The defaults are those of a scheduler that offers nothing special (the local runner). The
    scheduler backends fill the rest in (:func:`hpcjobs.schedulers.registry.scheduler_facts_of`, from
    their ``capabilities``, ``launchers`` and ``env_secret_problem``).

    Attributes:
        mail: The scheduler mails ``notify:``; elsewhere ``notify`` is ignored with a warning.
        walltime_signal: The scheduler signals a preemptible job before its wall time ends (Slurm's
            ``--signal``); elsewhere the script signals itself from a timer and needs ``resources.walltime``.
        launchers: The scheduler-provided launchers a job may use here
            (:data:`hpcjobs.launch.settings.SCHEDULER_LAUNCHERS`: ``srun``).
        container_runtimes: The container runtimes a job on this scheduler can run in (the backend's
            ``capabilities.container_runtimes``: ``pyxis`` and ``oci`` only with Slurm's ``srun``).
        env_secret_problem: ``(site, the job's directive lines)`` → why a secret from the submitter's
            environment (``secrets: {X: {env: Y}}``) cannot reach the job, or ``None`` when it arrives.
        job_container_problems: ``(site, the experiment's container:)`` → ``None`` where a job runs in a
            runtime of the site's ``containers:``; where every job is a container already (Swarm,
            Kubernetes), what stops the experiment's container from replacing the site's image, as
            ``(key under container., message)`` pairs (empty: it does).
    """

    mail: bool = False
    walltime_signal: bool = False
    launchers: frozenset[str] = frozenset()
    container_runtimes: frozenset[str] = frozenset()
    env_secret_problem: Callable[[SiteConfig, Sequence[str]], str | None] = _secret_arrives
    job_container_problems: Callable[[SiteConfig, ContainerSpec], list[tuple[str, str]] | None] = \
        _jobs_are_not_containers


#: Scheduler name → its facts; installed by :mod:`hpcjobs` (see :func:`set_facts_provider`).
FactsProvider = Callable[[str], SchedulerFacts]
_facts_provider: FactsProvider | None = None


def set_facts_provider(provider: FactsProvider) -> None:
    """Install the lookup :func:`facts_of` asks for a scheduler's facts (dependency inversion).

    :mod:`hpcjobs` calls this when it is imported, with a function that asks the registry's
    ``scheduler_facts_of``: the layers that check a job may not import the one that knows the backends.
    """
    global _facts_provider
    _facts_provider = provider


def facts_of(scheduler: str) -> SchedulerFacts:
    """The facts of ``scheduler`` from the installed provider.

    Raises:
        RuntimeError: No provider is installed (a programming error: :mod:`hpcjobs` installs it).
        ConfigError: The provider knows no scheduler of that name.
    """
    if _facts_provider is None:
        raise RuntimeError(f"hpcjobs.resolve has no scheduler facts for {scheduler!r}: nothing installed them")
    return _facts_provider(scheduler)
