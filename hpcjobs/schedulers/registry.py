"""The backends, registered by name (``BACKENDS["slurm"]``), each checked against the contract.

Importing this module imports no heavy dependency: backends are command builders and pure
parsers; :mod:`hpcjobs.schedulers.client` runs them. A backend outside this package registers with
:func:`register`, or through the ``hpcjobs.schedulers`` entry point group (the entry point names a
:class:`~hpcjobs.schedulers.base.BaseBackend` subclass or instance), loaded the first time a name
is not found among the built-in ones.

Importing it also installs :func:`scheduler_facts_of` as the facts provider of :mod:`hpcjobs.resolve`
(:func:`hpcjobs.config.scheduler_facts.set_facts_provider`): resolving sits below this layer and
asks the backends what it needs to know (mail, secrets, launchers) through it, never by comparing names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcjobs.config.scheduler_facts import SchedulerFacts
from hpcjobs.config.scheduler_names import SiteRules
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.base import CAPABILITY_HOOKS, BaseBackend, Capabilities, Directive, JobEnv
from hpcjobs.schedulers.kubernetes.backend import KubernetesBackend
from hpcjobs.schedulers.local.backend import LocalBackend
from hpcjobs.schedulers.pbs.backend import PbsProBackend, TorqueBackend
from hpcjobs.schedulers.slurm.backend import SlurmBackend
from hpcjobs.schedulers.swarm.backend import SwarmBackend

if TYPE_CHECKING:
    from hpcjobs.resolve import ResolvedJob

#: The entry point group out-of-tree backends register under.
ENTRY_POINT_GROUP = "hpcjobs.schedulers"

#: Class attributes every backend sets.
REQUIRED_ATTRIBUTES = ("name", "directive_prefix", "array_index_var", "job_id_var", "job_id_pattern",
                       "job_id_grammar")
#: Commands every backend implements itself, but one that runs its points here (``runs_here``: none of them).
REQUIRED_HOOKS = ("submit_argv", "parse_submit", "status_argv", "parse_status", "cancel_argv",
                  "tag_query_argvs", "parse_tag_query")


class BackendContractError(TypeError):
    """A backend that does not meet the contract (a programming error, raised when it registers)."""


def contract_problems(backend: object) -> list[str]:
    """What ``backend`` lacks of the contract: ``[]`` when it meets it.

    A backend is a :class:`BaseBackend`; it sets :data:`REQUIRED_ATTRIBUTES`, overrides
    :data:`REQUIRED_HOOKS` (none of them when it runs its points here, ``runs_here``: they keep raising
    :class:`~hpcjobs.schedulers.base.UnsupportedCommand`), and for each capability of
    :data:`CAPABILITY_HOOKS` overrides that capability's hooks exactly when the capability is on
    (``job_ids_as_text`` exactly when it is off).
    """
    if not isinstance(backend, BaseBackend):
        return [f"{type(backend).__name__} is not a BaseBackend"]
    cls = type(backend)
    problems = [f"class attribute {a} is not set" for a in REQUIRED_ATTRIBUTES if not hasattr(cls, a)]
    caps = backend.capabilities
    if not isinstance(caps, Capabilities):
        return [*problems, "capabilities is not a Capabilities"]
    for hook in REQUIRED_HOOKS:
        given = getattr(cls, hook) is not getattr(BaseBackend, hook)
        if caps.runs_here and given:
            problems.append(f"{hook} is implemented but capability runs_here says there is no scheduler")
        elif not caps.runs_here and not given:
            problems.append(f"{hook} is not implemented")
    for flag, hooks in CAPABILITY_HOOKS.items():
        wanted = getattr(caps, flag) != (flag == "job_ids_as_text")
        for hook in hooks:
            given = getattr(cls, hook) is not getattr(BaseBackend, hook)
            if wanted and not given:
                problems.append(f"capability {flag} is declared but {hook} is not implemented")
            elif given and not wanted:
                problems.append(f"{hook} is implemented but capability {flag} does not say so")
    return problems


#: Scheduler family -> backend.
BACKENDS: dict[str, BaseBackend] = {}


def register(backend: BaseBackend) -> BaseBackend:
    """Add ``backend`` to :data:`BACKENDS` under its name, after checking it meets the contract.

    Raises:
        BackendContractError: It does not (every problem is listed), or its name is taken by another.
    """
    problems = contract_problems(backend)
    if problems:
        raise BackendContractError(f"scheduler backend {type(backend).__name__}: " + "; ".join(problems))
    known = BACKENDS.get(backend.name)
    if known is not None and type(known) is not type(backend):
        raise BackendContractError(f"scheduler backend name {backend.name!r} is taken by {type(known).__name__}")
    BACKENDS[backend.name] = backend
    return backend


for _backend in (SlurmBackend(), PbsProBackend(), TorqueBackend(), SwarmBackend(), KubernetesBackend(), LocalBackend()):
    register(_backend)
_entry_points_loaded = False


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        register(obj() if isinstance(obj, type) else obj)


def get_backend(name: str) -> BaseBackend:
    """The backend for a scheduler family.

    Raises:
        ConfigError: No backend of that name.
    """
    if name not in BACKENDS:
        _load_entry_points()
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigError(ConfigProblem(f"no scheduler backend {name!r}", key="scheduler",
                                        choices=scheduler_names())) from None


def scheduler_names() -> tuple[str, ...]:
    """The names of the registered backends that are schedulers (the local runner, ``runs_here``, is not)."""
    return tuple(n for n, b in BACKENDS.items() if not b.capabilities.runs_here)


def capabilities_of(scheduler: str) -> Capabilities:
    """What jobs on ``scheduler`` get (the local runner included): ask this, never compare names.

    Raises:
        ConfigError: No backend of that name.
    """
    return get_backend(scheduler).capabilities


def job_env_of(scheduler: str) -> JobEnv:
    """The job id and array index variables and the directive prefix of ``scheduler`` .

    Raises:
        ConfigError: No backend of that name.
    """
    return get_backend(scheduler).job_env


def find_backend(name: str | None) -> BaseBackend | None:
    """The backend named ``name``, or ``None`` where no backend has that name (``None`` included).

    For data that names its scheduler (an accounting row, a sweep's ledger) and code that keeps the
    default behaviour for a name it does not know, instead of failing as :func:`get_backend` does.
    """
    if not name:
        return None
    try:
        return get_backend(name)
    except ConfigError:
        return None


def scheduler_facts_of(scheduler: str) -> SchedulerFacts:
    """What :func:`hpcjobs.resolve.resolve` must know of ``scheduler``, from its backend.

    Raises:
        ConfigError: No backend of that name.
    """
    backend = get_backend(scheduler)
    caps = backend.capabilities
    return SchedulerFacts(mail=caps.mail, walltime_signal=caps.walltime_signal, launchers=backend.launchers,
                          container_runtimes=caps.container_runtimes, env_secret_problem=backend.env_secret_problem,
                          job_container_problems=backend.job_container_problems)


def directives_of(job: ResolvedJob) -> list[Directive]:
    """The directives ``job``'s backend generates (:meth:`BaseBackend.directives`).

    Raises:
        ConfigError: No backend for the job's scheduler, or the job asks for what it cannot run.
    """
    return get_backend(job.scheduler).directives(job)


def template_of(scheduler: str) -> str:
    """The template that renders ``scheduler``'s jobs (:attr:`BaseBackend.template`).

    Raises:
        ConfigError: No backend of that name.
    """
    return get_backend(scheduler).template


def site_facts_of(backend: BaseBackend) -> SiteRules:
    """What a site file of ``backend``'s scheduler may hold, from its site hooks (for the config layer)."""
    return SiteRules(backend.name, site_section=backend.site_section, site_fields=backend.site_fields,
                     partitions=backend.site_partitions, runs_here=backend.capabilities.runs_here,
                     container_runtimes=backend.capabilities.container_runtimes,
                     short_options=backend.short_options)


def site_catalog(everything: bool = False) -> dict[str, SiteRules]:
    """Every scheduler a site file may name, by name, with what its site files may hold.

    The registered backends in their order (the local runner last): what
    :mod:`hpcjobs.config.scheduler_names` answers the site schema with (plugged in by ``hpcjobs/__init__.py``).
    ``everything``: the entry points' backends are loaded first.
    """
    if everything:
        _load_entry_points()
    return {name: site_facts_of(backend) for name, backend in BACKENDS.items()}
