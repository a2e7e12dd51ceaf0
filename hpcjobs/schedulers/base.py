"""What a scheduler backend is: command builders plus pure parsers behind one full contract.

A backend never runs anything itself. :class:`hpcjobs.schedulers.client.SchedulerClient`
(or a test) pairs a backend's ``*_argv`` builders with
:func:`hpcjobs.process.run_command` and feeds the output to the backend's pure
``parse_*`` functions. That keeps every parser testable on recorded real output.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hpcjobs.config.arrays import ArraySpec as ArraySpec  # re-exported: its old home (it lives below resolve)
from hpcjobs.ids import check_values, is_safe_value
from hpcjobs.units import format_memory_slurm

if TYPE_CHECKING:
    from hpcjobs.config.container import ContainerSpec, ResolvedContainer, Word
    from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun, Probe
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob
    from hpcjobs.schedulers.estimates import QueueState, StartEstimate
    from hpcjobs.schedulers.pending import PendingQuery, QueryRun
    from hpcjobs.schedulers.status_table import StatusTable


@dataclass(frozen=True)
class JobDependency:
    """Jobs a submission waits for, and for which ending of them.

    Attributes:
        condition: ``ok``: every job ended successfully (exit code 0; Slurm and PBS ``afterok``);
            ``any``: every job ended, in any state (``afterany``). An array job id stands for all its tasks.
        job_ids: The scheduler's ids (``123``, ``123[].server``).
    """

    condition: str
    job_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.condition not in ("ok", "any"):
            raise ValueError(f"unknown dependency condition {self.condition!r} (ok or any)")


@dataclass(frozen=True)
class SubmitOptions:
    """What a submission needs beyond the script itself.

    Attributes:
        array: Submit as a job array with this range.
        dependencies: Job ids this job must wait for (``afterok``).
        after: Further jobs it waits for, each group with its condition (pipelines: ``after:``).
        job_name: Override of the job name in the script.
        comment: Free text stored with the job (carries the hpcjobs tag).
        hold: Submit in a held state.
        extra_args: Raw extra arguments for the submit command (site escape hatch).
    """

    array: ArraySpec | None = None
    dependencies: tuple[str, ...] = ()
    after: tuple[JobDependency, ...] = ()
    job_name: str | None = None
    comment: str | None = None
    hold: bool = False
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobStatus:
    """One job's (or array task's) state as a status poll saw it.

    Attributes:
        job_id: The id as the scheduler prints it (``123``, ``123_4``, ``1234[7].server``).
        state: Normalised state (:mod:`hpcjobs.states`).
        state_raw: The scheduler's own state text.
        array_job_id: Parent array id, if this is an array task.
        array_task_id: Task index, if this is an array task (``None`` for a collapsed pending range).
        array_task_spec: The pending index range when several tasks share one record (``5-9%2``).
        exit_code: Exit status of the script, when finished and known.
        exit_signal: Signal that ended it, when known.
        reason: Why it is pending or how it ended, when the scheduler says.
        name: Job name.
        comment: Job comment (where the hpcjobs tag lives on Slurm).
    """

    job_id: str
    state: str
    state_raw: str
    array_job_id: str | None = None
    array_task_id: int | None = None
    array_task_spec: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    reason: str | None = None
    name: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class ClusterLimits:
    """Limits a scheduler enforces that shape how hpcjobs submits.

    Attributes:
        max_array_size: Array indices must be below this (Slurm MaxArraySize, PBS max_array_size).
        max_job_count: Jobs the controller holds at once (Slurm MaxJobCount).
        max_submit_jobs: Jobs one user may have queued or running, if limited.
        min_job_age_s: Seconds a finished job stays visible to ``squeue``/``qstat`` without ``-x``.
    """

    max_array_size: int | None = None
    max_job_count: int | None = None
    max_submit_jobs: int | None = None
    min_job_age_s: int | None = None


class JobIdGrammar:
    """:meth:`SchedulerBackend.valid_job_id` and :meth:`SchedulerBackend.check_job_ids` from a backend's
    :attr:`~SchedulerBackend.job_id_pattern`: the one check each backend's argv builders call."""

    #: What a job id of this scheduler is called in messages (``Slurm job id``).
    job_id_what: str = "job id"
    job_id_pattern: re.Pattern[str]
    job_id_grammar: str

    def valid_job_id(self, text: object) -> bool:
        """Whether ``text`` is spelled like one of this scheduler's job ids."""
        return is_safe_value(text, self.job_id_pattern)

    def check_job_ids(self, job_ids: Iterable[object], *, source: str | PathLike[str] | None = None) -> list[str]:
        """``job_ids`` as a list, each checked against :attr:`job_id_pattern` before it reaches an argv.

        Raises:
            UnsafeValueError: One is not a job id of this scheduler.
            TypeError: ``job_ids`` is one string (a list of ids is wanted).
        """
        if isinstance(job_ids, (str, bytes)):
            raise TypeError(f"check_job_ids takes a list of job ids, not the string {job_ids!r}")
        return check_values(job_ids, self.job_id_pattern, what=self.job_id_what, expected=self.job_id_grammar,
                            source=source)


@dataclass(frozen=True)
class JobEnv:
    """What a running job of a scheduler finds in its environment, and how its script names directives.

    Attributes:
        job_id_var: The variable that holds the job's id (``SLURM_JOB_ID``, ``PBS_JOBID``).
        array_index_var: The variable that holds the array index of a task (``SLURM_ARRAY_TASK_ID``).
        directive_prefix: The prefix of the script's directive lines (``#SBATCH``, ``#PBS``).
    """

    job_id_var: str
    array_index_var: str
    directive_prefix: str


#: One generated directive: ``(name, text)``. ``text`` is what follows the directive prefix (``#SBATCH``,
#: ``#PBS``); ``name`` is the option or resource a site may forbid (``forbidden_directives``), which
#: rendering then leaves out.
Directive = tuple[str, str]


@dataclass(frozen=True)
class Capabilities:
    """What a scheduler backend can do: the one place the rest of hpcjobs asks, instead of its name.

    A feature flag says what jobs on this scheduler get; a command flag says that the backend
    overrides the hooks of that command family (:data:`CAPABILITY_HOOKS`), which the contract test
    (``tests/schedulers/test_contract.py``) holds it to: a flag that is on has all its hooks, one that
    is off has none of them.

    Attributes:
        packing: Several points per array task (``pack:``), with per-point exit files.
        dependencies: Submissions that wait for other jobs (``after:``, ``afterok``/``afterany``).
        services: Jobs are services or Kubernetes Jobs that run containers, not batch scripts on a
            shared file system: their logs are written by the script, ``notify:`` is refused, and
            ``env:`` secrets are not handed over.
        columnar_status: ``parse_status_table`` reads a status answer by column (a million tasks).
        status_fallback: A second status command (``squeue`` beside ``sacct``, ``qstat`` without
            ``-x``): ``fallback_status_argv`` and ``parse_fallback_status``.
        fallback_for_missing: Ids the status answer leaves out are asked of the fallback (a job
            submitted a moment ago is not in Slurm's accounting yet).
        cluster_limits: ``config_argv``, ``parse_limits`` and ``parse_cluster_name``.
        user_limits: ``user_limits_argv`` and ``parse_user_limits`` (a user's submit limit).
        qos_limits: ``qos_limits_argv`` and ``parse_qos_limits`` (per-user limits of each QOS).
        queued_count: ``queued_argv`` and ``parse_queued`` (the user's jobs in the queue now).
        retire: Finished jobs are removed after their records are saved (Swarm services):
            ``retire_argv``, ``settled_services`` and ``inspect_argv``.
        logs_command: The scheduler prints a job's output (``logs_argv``).
        server_version: The submission depends on the server's version (``needs_server_version``,
            ``server_version_argv``, ``parse_server_version``).
        per_job_cancel: One cancel command per job (``cancel_argvs``).
        submit_in_folder: The submit command names the folder the job runs in (``submit_argv_in``).
        submit_names_job: The job id is chosen in the submit command (``parse_submit_for``).
        job_ids_as_text: Two ids name the same job only when they are equal as text; else
            ``same_job`` and ``job_key`` say (PBS ids with or without a server suffix).
        command_paths: The backend chooses which executable runs a command (``command_path``).
        failed_upstream: What becomes of a job whose ``afterok`` upstream failed: ``"blocked"``, it
            waits forever with a pending reason (Slurm's ``DependencyNeverSatisfied``) and hpcjobs
            cancels it; ``"deleted"``, the server deletes it (PBS); ``"none"``, no dependencies.
        start_estimate: The scheduler estimates when a request would start on a partition without
            submitting it (``start_estimate_argv``, ``parse_start_estimate``: Slurm's ``sbatch --test-only``).
        queue_states: The scheduler lists its queues' states and job counts (``queue_state_argv``,
            ``parse_queue_states``: PBS Pro's ``qstat -Q -f -F json``).
        discoverable: ``hpcjobs site init`` can read a site from the live scheduler (``probe`` and
            ``discover_site``), and site detection asks it whether it answers on this machine.
        runs_here: Jobs run as processes of this machine (the local runner): its sites are never
            detected by host name or environment.
        renders_manifest: A rendered job is also a manifest (Kubernetes Jobs): ``hpcjobs render``
            prints the manifest, and writes it beside the script.
        container_runtimes: The container runtimes a job's program can run in on this scheduler
            (``container:``; a site lists which of them its nodes have). Empty where jobs are
            containers already (Swarm, Kubernetes: the site's image is the job's).
        step_container_runtimes: Those of ``container_runtimes`` the scheduler itself starts, as options
            of its job steps (Slurm's ``srun`` with Pyxis, or with ``--container`` and ``oci.conf``):
            ``container_step_options`` renders them.
        explains_pending: ``explain_pending`` says why jobs wait, in a fixed number of scheduler calls
            (``hpcjobs why``).
    """

    packing: bool = False
    dependencies: bool = False
    services: bool = False
    columnar_status: bool = False
    status_fallback: bool = False
    fallback_for_missing: bool = False
    cluster_limits: bool = False
    user_limits: bool = False
    qos_limits: bool = False
    queued_count: bool = False
    retire: bool = False
    logs_command: bool = False
    server_version: bool = False
    per_job_cancel: bool = False
    submit_in_folder: bool = False
    submit_names_job: bool = False
    job_ids_as_text: bool = True
    command_paths: bool = False
    failed_upstream: str = "none"
    # --- plan capabilities ---
    start_estimate: bool = False
    queue_states: bool = False

    # --- sweep hooks ---
    #: Points run as processes of this machine (the ``local`` site): no scheduler, no scheduler commands
    #: (the backend implements none of the required hooks), no client, no accounting.
    runs_here: bool = False

    # --- site hooks ---
    discoverable: bool = False
    renders_manifest: bool = False
    container_runtimes: frozenset[str] = frozenset()
    step_container_runtimes: frozenset[str] = frozenset()
    explains_pending: bool = False

    def __post_init__(self) -> None:
        if self.failed_upstream not in ("none", "blocked", "deleted"):
            raise ValueError(f"failed_upstream must be none, blocked or deleted, not {self.failed_upstream!r}")
        if not self.step_container_runtimes <= self.container_runtimes:
            raise ValueError("step_container_runtimes must be container_runtimes the backend hosts")
        if self.dependencies == (self.failed_upstream == "none"):
            raise ValueError("a backend with dependencies says what becomes of a job whose upstream failed "
                             "(failed_upstream blocked or deleted), and only such a backend")

    # --- render hooks ---
    #: The scheduler mails ``notify:`` (Slurm ``--mail-*``, PBS ``-M``/``-m``); elsewhere ``notify`` is
    #: ignored with a warning.
    mail: bool = False
    #: The scheduler itself signals a preemptible job its lead time before the wall time ends (Slurm's
    #: ``--signal``), so the job needs no ``resources.walltime``; elsewhere the script signals itself from
    #: a timer, which needs one.
    walltime_signal: bool = False

    # --- advise hooks ---
    #: The scheduler's accounting records what each job used (its memory high-water mark and CPU time), which
    #: ``hpcjobs advise`` and ``resubmit --right-size`` propose the next request from (its ``--scheduler`` choices).
    usage_accounting: bool = False


#: The hooks each command capability stands for (``job_ids_as_text`` is on when they are *not* given).
CAPABILITY_HOOKS: dict[str, tuple[str, ...]] = {
    "columnar_status": ("parse_status_table",),
    "explains_pending": ("explain_pending",),
    "status_fallback": ("fallback_status_argv", "parse_fallback_status"),
    "cluster_limits": ("config_argv", "parse_limits", "parse_cluster_name"),
    "user_limits": ("user_limits_argv", "parse_user_limits"),
    "qos_limits": ("qos_limits_argv", "parse_qos_limits"),
    "queued_count": ("queued_argv", "parse_queued"),
    "retire": ("retire_argv", "settled_services", "inspect_argv"),
    "logs_command": ("logs_argv",),
    "server_version": ("needs_server_version", "server_version_argv", "parse_server_version"),
    "per_job_cancel": ("cancel_argvs",),
    "submit_in_folder": ("submit_argv_in",),
    "submit_names_job": ("parse_submit_for",),
    "job_ids_as_text": ("same_job", "job_key"),
    "command_paths": ("command_path",),
    # --- plan capabilities ---
    "start_estimate": ("start_estimate_argv", "parse_start_estimate"),
    "queue_states": ("queue_state_argv", "parse_queue_states"),

    # --- site hooks ---
    "discoverable": ("probe", "discover_site"),
}


class UnsupportedCommand(NotImplementedError):
    """A backend was asked for a command its :class:`Capabilities` say it does not have (a bug)."""


class BaseBackend(JobIdGrammar):
    """Command builders and pure parsers for one scheduler family: the whole contract, with defaults.

    A backend subclasses this, sets the class attributes, implements the required commands
    (:meth:`submit_argv`, :meth:`parse_submit`, :meth:`status_argv`, :meth:`parse_status`,
    :meth:`cancel_argv`, :meth:`tag_query_argvs`, :meth:`parse_tag_query`) and, for each capability
    it declares, that capability's hooks (:data:`CAPABILITY_HOOKS`). A hook it does not declare keeps
    its default here: a neutral answer (``False``, the plain form of a command) or
    :class:`UnsupportedCommand`. :func:`hpcjobs.schedulers.registry.register` checks this when the
    backend is registered.
    """

    #: Registry key: ``slurm``, ``pbspro``, ``torque``, ``swarm``, ``kubernetes``.
    name: str
    #: The prefix of directive lines in a batch script (``#SBATCH``, ``#PBS``).
    directive_prefix: str
    #: Environment variable that holds the array index inside a running task.
    array_index_var: str
    #: Environment variable that holds the job id inside a running job.
    job_id_var: str
    #: The grammar of this scheduler's job ids, matched in full: every id that goes into one of the
    #: ``*_argv`` commands (read from a ledger, an index, a cache or the scheduler's own output) is
    #: checked against it first (:meth:`check_job_ids`), so none can be taken as an option.
    job_id_pattern: re.Pattern[str]
    #: :attr:`job_id_pattern` in words, for error messages.
    job_id_grammar: str
    #: What this backend can do.
    capabilities: Capabilities = Capabilities()

    @property
    def job_env(self) -> JobEnv:
        """The job id and array index variables and the directive prefix, as one value."""
        return JobEnv(self.job_id_var, self.array_index_var, self.directive_prefix)

    # ------------------------------------------------------------------ required

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """The command that submits ``script``."""
        raise UnsupportedCommand(f"{self.name}: submit_argv")

    def parse_submit(self, stdout: str) -> str:
        """The job id from the submit command's standard output."""
        raise UnsupportedCommand(f"{self.name}: parse_submit")

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One command that reports the state of all ``job_ids`` (finished ones included)."""
        raise UnsupportedCommand(f"{self.name}: status_argv")

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """Parse the status command's output into one record per job or array task."""
        raise UnsupportedCommand(f"{self.name}: parse_status")

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """The command that cancels ``job_ids``."""
        raise UnsupportedCommand(f"{self.name}: cancel_argv")

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """The commands that list the user's jobs named ``name`` with their hpcjobs tags (queue and history)."""
        raise UnsupportedCommand(f"{self.name}: tag_query_argvs")

    def parse_tag_query(self, stdout: str) -> list[tuple[str, str]]:
        """``(job id, tag text)`` of each job a tag query's output lists."""
        raise UnsupportedCommand(f"{self.name}: parse_tag_query")

    # ------------------------------------------------------------------ status answers

    def tolerable_status_error(self, stderr: str) -> bool:
        """Whether a status command that exited non-zero still answered for the ids it knows."""
        return False

    def accounting_unavailable(self, stderr: str) -> bool:
        """Whether the status command failed because accounting is down (the fallback then answers)."""
        return False

    def accounting_disabled(self, stderr: str) -> bool:
        """Whether the site keeps no accounting at all (a history query can never answer)."""
        return False

    def history_backlog_argv(self) -> list[str] | None:
        """A call that says how many records the scheduler holds that its history does not have yet.

        ``None`` (the default): no such call, and a history query that answers is taken as complete.
        """
        return None

    def parse_history_backlog(self, stdout: str) -> int | None:
        """The count :meth:`history_backlog_argv` printed, or ``None`` when its output does not say."""
        return None

    def parse_status_table(self, stdout: str) -> StatusTable:
        """The status answer by column (``columnar_status``)."""
        raise UnsupportedCommand(f"{self.name}: parse_status_table")

    def fallback_status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """The second status command (``status_fallback``)."""
        raise UnsupportedCommand(f"{self.name}: fallback_status_argv")

    def parse_fallback_status(self, stdout: str) -> list[JobStatus]:
        """The second status command's answer (``status_fallback``)."""
        raise UnsupportedCommand(f"{self.name}: parse_fallback_status")

    def same_job(self, a: str, b: str) -> bool:
        """Whether two ids name the same job (equal text unless ``job_ids_as_text`` is off)."""
        return a == b

    def job_key(self, job_id: str) -> str:
        """The text two ids of one job share (the id itself unless ``job_ids_as_text`` is off)."""
        return job_id

    # ------------------------------------------------------------------ submitting and cancelling

    def command_path(self, name: str, env: Mapping[str, str]) -> str:
        """The executable that runs command ``name`` (``command_paths``; default: ``name`` on ``$PATH``)."""
        return name

    def command_folder_probe(self) -> list[str] | None:
        """A command whose first output line is the folder of this scheduler's commands on a login node reached
        over SSH (``command_paths``: this machine's files cannot say; ``None``: the remote ``$PATH`` decides)."""
        return None

    def submit_argv_in(self, script: Path, options: SubmitOptions, cwd: Path, *,
                       server_version: tuple[int, int] | None = None) -> list[str]:
        """The submit command for a job that runs in ``cwd`` (``submit_in_folder``; default: :meth:`submit_argv`)."""
        return self.submit_argv(script, options)

    def parse_submit_for(self, argv: Sequence[str], stdout: str) -> str:
        """The job id of the submission ``argv`` (``submit_names_job``; default: :meth:`parse_submit`)."""
        return self.parse_submit(stdout)

    def needs_server_version(self, script: Path) -> bool:
        """Whether submitting ``script`` depends on the server's version (``server_version``)."""
        return False

    def server_version_argv(self) -> list[str]:
        """The command that prints the server's version (``server_version``)."""
        raise UnsupportedCommand(f"{self.name}: server_version_argv")

    def parse_server_version(self, stdout: str) -> tuple[int, int] | None:
        """``(major, minor)`` from :meth:`server_version_argv`'s output (``server_version``)."""
        raise UnsupportedCommand(f"{self.name}: parse_server_version")

    def cancel_argvs(self, job_ids: Sequence[str]) -> list[list[str]]:
        """The commands that cancel ``job_ids`` (``per_job_cancel``; default: one :meth:`cancel_argv`)."""
        return [self.cancel_argv(job_ids)]

    # ------------------------------------------------------------------ limits and the queue

    def config_argv(self) -> list[str]:
        """The command that prints the scheduler's configuration (``cluster_limits``)."""
        raise UnsupportedCommand(f"{self.name}: config_argv")

    def parse_limits(self, stdout: str) -> ClusterLimits:
        """The limits in :meth:`config_argv`'s output (``cluster_limits``)."""
        raise UnsupportedCommand(f"{self.name}: parse_limits")

    def parse_cluster_name(self, stdout: str) -> str | None:
        """The cluster's name in :meth:`config_argv`'s output (``cluster_limits``)."""
        raise UnsupportedCommand(f"{self.name}: parse_cluster_name")

    def user_limits_argv(self, user: str) -> list[str]:
        """The command that prints ``user``'s limits (``user_limits``)."""
        raise UnsupportedCommand(f"{self.name}: user_limits_argv")

    def parse_user_limits(self, stdout: str, qos_limits: Mapping[str, int] | None = None) -> int | None:
        """The user's submit limit (``user_limits``)."""
        raise UnsupportedCommand(f"{self.name}: parse_user_limits")

    def qos_limits_argv(self) -> list[str]:
        """The command that prints each QOS's per-user limits (``qos_limits``)."""
        raise UnsupportedCommand(f"{self.name}: qos_limits_argv")

    def parse_qos_limits(self, stdout: str) -> dict[str, int]:
        """QOS name to per-user submit limit (``qos_limits``)."""
        raise UnsupportedCommand(f"{self.name}: parse_qos_limits")

    def queued_argv(self, user: str) -> list[str]:
        """The command that lists ``user``'s jobs in the queue now (``queued_count``)."""
        raise UnsupportedCommand(f"{self.name}: queued_argv")

    def parse_queued(self, stdout: str) -> int:
        """How many jobs :meth:`queued_argv` listed (``queued_count``)."""
        raise UnsupportedCommand(f"{self.name}: parse_queued")

    # ------------------------------------------------------------------ services and logs

    def retire_argv(self, job_ids: Sequence[str]) -> list[str]:
        """The command that removes finished jobs (``retire``)."""
        raise UnsupportedCommand(f"{self.name}: retire_argv")

    def settled_services(self, stdout: str) -> dict[str, list[str]]:
        """Service name to its object ids, of those that ended (``retire``)."""
        raise UnsupportedCommand(f"{self.name}: settled_services")

    def inspect_argv(self, object_ids: Sequence[str]) -> list[str]:
        """The command that prints the full records of ``object_ids`` (``retire``)."""
        raise UnsupportedCommand(f"{self.name}: inspect_argv")

    def logs_argv(self, job_id: str) -> list[str]:
        """The command that prints a job's output (``logs_command``)."""
        raise UnsupportedCommand(f"{self.name}: logs_argv")

    # --- accounting and plan hooks ---

    #: Where ``hpcjobs report`` asks this scheduler's accounting history live, named as
    #: :data:`hpcjobs.accounting.report_source.LIVE_SOURCES` names its readers (``sacct``, ``kubectl``,
    #: ``docker``); ``None``: only saved files are read (:attr:`saved_accounting_hint` says which).
    live_accounting_source: str | None = None
    #: What to save and pass with ``--from-file`` where there is no live accounting source (for the refusal).
    saved_accounting_hint: str = "save its accounting records"
    #: The negative exit statuses this scheduler's execution daemon records, code to meaning (PBS Pro's and
    #: Torque's JOB_EXEC_* codes); on such a scheduler an exit status above 256 is 256 + the signal that killed
    #: the job's top shell. ``None``: exit statuses are the script's own.
    job_exec_codes: Mapping[int, str] | None = None
    #: ``hpcjobs plan`` compares this scheduler's partitions or queues (``--partition auto`` chooses among them).
    plans_partitions: bool = False
    #: Where ``hpcjobs plan`` and ``advise`` read the queue waits of past jobs: ``sacct`` (Slurm's accounting,
    #: cached by day), or a saved format of :mod:`hpcjobs.accounting.report_source` (``qstat-json``) that
    #: :meth:`wait_history_argv` prints; ``None``: this scheduler has no live history of queue waits.
    wait_history_source: str | None = None
    #: That history in words, for the plan (``{days}``: the days asked for).
    wait_history_words: str = "jobs of the last {days} days"
    #: What a partition's billing-hours are when the site file gives it no billing weights (the plan's footnote).
    billing_without_weights: str = "CPU-hours (no billing weights)"
    #: Environment of the :meth:`start_estimate_argv` command (``start_estimate``).
    start_estimate_env: Mapping[str, str] = MappingProxyType({})

    def saved_format(self, detected: str) -> str:
        """The format a saved file of this scheduler is in, given the one detection named.

        Detection cannot tell every dialect apart: a Torque accounting log reads like a PBS Pro one
        when it has none of PBS Pro's markers, and ``qstat -f`` text looks the same on both. A backend
        whose files are in another dialect names it (``torque-accounting``, ``torque-qstat-text``);
        a folder of accounting logs is detected as ``pbs-accounting``. Default: ``detected`` itself.
        """
        return detected

    def format_memory(self, nbytes: int) -> str:
        """Memory as this scheduler's requests take it (default Slurm's ``8G``; PBS ``8gb``)."""
        return format_memory_slurm(nbytes)

    def wait_history_argv(self) -> list[str]:
        """The command that prints the queue-wait history of :attr:`wait_history_source` (a saved format)."""
        raise UnsupportedCommand(f"{self.name}: wait_history_argv")

    def start_estimate_argv(self, script: Path, partition: str, qos: str | None) -> list[str]:
        """The command that estimates when ``script`` would start on ``partition`` (``start_estimate``)."""
        raise UnsupportedCommand(f"{self.name}: start_estimate_argv")

    def parse_start_estimate(self, stderr: str, returncode: int) -> StartEstimate:
        """What :meth:`start_estimate_argv` answered, from its stderr and exit status (``start_estimate``)."""
        raise UnsupportedCommand(f"{self.name}: parse_start_estimate")

    def queue_state_argv(self) -> list[str]:
        """The command that lists the queues with their state (``queue_states``)."""
        raise UnsupportedCommand(f"{self.name}: queue_state_argv")

    def parse_queue_states(self, stdout: str) -> dict[str, QueueState]:
        """Every queue in :meth:`queue_state_argv`'s output, by name (``queue_states``)."""
        raise UnsupportedCommand(f"{self.name}: parse_queue_states")

    # --- sweep hooks ---

    #: The submitit executor that runs function sweeps here (``"slurm"``, ``"local"``); ``None``: submitit
    #: has no executor for this scheduler (:mod:`hpcjobs.sweep.functions` refuses it).
    submitit_cluster: str | None = None

    def submitit_parameters(self, job: ResolvedJob, params: dict[str, Any]) -> dict[str, Any]:
        """submitit executor parameters for ``job``: ``params`` (the generic ones: name, nodes, tasks, CPUs,
        time, memory, GPUs) with this scheduler's own added or in place of generic ones (default: as given)."""
        return params

    def submitit_chunk_parameters(self, tag: str) -> dict[str, Any]:
        """submitit parameters of one chunk's submission, carrying its hpcjobs ``tag`` where the executor
        can (default: none)."""
        return {}

    def single_log_stem(self, name: str, job_id: str) -> str:
        """The name, without ``.out``/``.err``, of the files a single job named ``name`` with id ``job_id``
        writes under its output directory, as hpcjobs's generated directives name them (default: ``name``,
        PBS's ``-o <output_dir>/<name>.out``)."""
        return name

    def array_log_stem(self, base: Path, name: str, sweep_id: str, chunk: int | None, array_job_id: str | None,
                       array_index: int) -> Path | None:
        """The scheduler's own output file of one array task of a sweep's chunk, under the output folder
        ``base``, without ``.out``/``.err`` (default ``None``: it cannot be named)."""
        return None

    def chunk_log_directives(self, output_dir: str, sweep_id: str, chunk: int,
                             own_directives: Sequence[str]) -> tuple[str, ...]:
        """Directives added after the generated ones of a sweep's chunk so that chunks do not write to each
        other's log files, leaving a flag of ``own_directives`` (the experiment's) as it is (default: none)."""
        return ()

    def run_folders_mounted(self, site: SiteConfig) -> bool:
        """Whether the job sees the submit directory, so that the log files its script writes there are
        read from here (default: ``True``; a container may not mount it)."""
        return True

    def tag_query_hint(self, name: str) -> str:
        """The command a person runs to list the jobs of sweep ``name`` with their hpcjobs tags (in a message
        on a broken ledger; default: PBS's)."""
        return "qstat -x -f | grep HPCJOBS_TAG"

    # --- render hooks ---

    #: Launchers this scheduler itself provides (``srun`` on Slurm): the ones of
    #: :data:`hpcjobs.launch.settings.SCHEDULER_LAUNCHERS` a job here may use (the others run anywhere).
    launchers: frozenset[str] = frozenset()

    @property
    def template(self) -> str:
        """The template that renders this scheduler's jobs, by name: ``<name>.sh.j2`` unless a backend sets it.

        A site's or an experiment's ``template:`` wins over it (:func:`hpcjobs.render.script.template_name`).
        """
        return f"{self.name}.sh.j2"

    @functools.cached_property
    def template_dir(self) -> Path | None:
        """A folder of templates this backend ships (its :attr:`template` among them), or ``None``.

        Default: ``templates/`` beside the module that defines the backend's class, when there is one, so
        that a backend made in its own folder brings its template along. Rendering looks there after the
        user's, the site-wide and hpcjobs' own template folders: a user's template of the same name wins.
        """
        import sys

        module = sys.modules.get(type(self).__module__)
        source = getattr(module, "__file__", None)
        if source is None:
            return None
        folder = Path(source).resolve().parent / "templates"
        return folder if folder.is_dir() else None

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """The directives of ``job``'s script, in order (none by default: a scheduler that reads none).

        Rendering drops those the site forbids, appends the site's, partition's and experiment's own
        and writes each after :attr:`directive_prefix` (:mod:`hpcjobs.render.directives`).

        Raises:
            ConfigError: The job asks for what this scheduler cannot run.
        """
        del job
        return []

    def env_secret_problem(self, site: SiteConfig, directives: Sequence[str]) -> str | None:
        """Why a secret read from the submitter's environment (``secrets: {X: {env: Y}}``) cannot reach a job.

        ``directives`` are the job's own directive lines (site, partition, experiment). ``None``
        (the default): the job inherits the submitter's environment and the secret arrives.
        """
        del site, directives
        return None

    def job_container_problems(self, site: SiteConfig, spec: ContainerSpec) -> list[tuple[str, str]] | None:
        """Where every job is a container already: what stops ``spec`` from being the job's container.

        ``None`` (the default): a job runs in one of the runtimes of the site's ``containers:`` section
        (:func:`hpcjobs.config.container.container_problems` checks it). The container platforms
        (:class:`hpcjobs.schedulers.containers.ContainerBackend`) return ``(key under container., message)``
        pairs instead, empty when the experiment's image replaces the site's.
        """
        del site, spec
        return None

    def container_step_options(self, container: ResolvedContainer, *, standalone: bool = False) -> tuple[Word, ...]:
        """The job-step options that run a step in ``container``, for a runtime the scheduler starts itself.

        ``standalone``: the whole command that starts a one-task step (``srun --nodes=1 --ntasks=1 ...``),
        for a command that no step of hpcjobs' own starts. Only for the runtimes of
        ``capabilities.step_container_runtimes`` (Slurm: Pyxis's ``--container-image``, Slurm's own
        ``--container``); the words are unquoted values and
        :class:`~hpcjobs.config.container.Raw` expansions, which the renderer encodes.

        Raises:
            UnsupportedCommand: This scheduler starts no container itself.
        """
        del container, standalone
        raise UnsupportedCommand(f"{self.name} starts no container runtime itself")

    def explain_pending(self, job_ids: Sequence[str], run: QueryRun) -> PendingQuery:
        """Why ``job_ids`` wait (:mod:`hpcjobs.schedulers.pending`), asking through ``run``.

        Raises:
            UnsupportedCommand: This scheduler does not explain waiting jobs.
            CommandError: The scheduler's main query failed.
        """
        del job_ids, run
        raise UnsupportedCommand(f"{self.name} does not explain waiting jobs")

    def container_pull_command(self, container: ResolvedContainer) -> tuple[Word, ...]:
        """The command that fetches ``container.pull_from`` into the file ``PULL_TARGET`` names (``pull: submit``).

        Only for the runtimes of ``capabilities.step_container_runtimes`` that run an image file (Slurm:
        Pyxis, through ``enroot import``); hpcjobs runs it on the submitting machine before any job is
        queued (:mod:`hpcjobs.containers.pull`).

        Raises:
            UnsupportedCommand: This scheduler fetches no image for a runtime of its own.
        """
        del container
        raise UnsupportedCommand(f"{self.name} fetches no container image itself")

    # --- site hooks ---

    #: The settings section every site file of this scheduler has, named like the site key
    #: (``"swarm"``: ``swarm:``); no other scheduler's site may have it. ``None``: none.
    site_section: str | None = None
    #: Site keys only schedulers listing them accept, each with what it holds in words
    #: (``{"qos_limits": "Slurm QOS limits"}``); default: none.
    site_fields: Mapping[str, str] = MappingProxyType({})
    #: Whether a site of this scheduler has partitions (queues).
    site_partitions: bool = True
    #: Short options of a raw directive and the long option each stands for (``{"p": "partition"}``),
    #: so that a site's ``forbidden_directives`` catch both spellings; default: none.
    short_options: Mapping[str, str] = MappingProxyType({})
    #: The commands that tell whether this scheduler answers, in the message that says none does
    #: (``scontrol show config``; ``discoverable``).
    probe_hint: str = ""

    @property
    def display_name(self) -> str:
        """The scheduler's name in messages (``Slurm``, ``PBS Pro/OpenPBS``); default: :attr:`name` capitalised."""
        return self.name.capitalize()

    @property
    def short_name(self) -> str:
        """The scheduler's name in a list of several (``Slurm, PBS or Torque``); default: :attr:`display_name`."""
        return self.display_name

    @property
    def label(self) -> str:
        """What one of its clusters is called (``Slurm cluster``, ``PBS server``); default: ``<name> cluster``."""
        return f"{self.display_name} cluster"

    def probe(self, run: DiscoveryRun, timeout: float) -> Probe | None:
        """Whether this scheduler answers on this machine, each command given ``timeout`` seconds
        (``discoverable``): its cluster's name, or ``None`` (logged) when it does not answer."""
        raise UnsupportedCommand(f"{self.name}: probe")

    def discover_site(self, run: DiscoveryRun, name: str | None, user: str) -> DiscoveredSite:
        """Partitions, nodes and limits read from the live scheduler (``discoverable``); ``user``'s
        associations give the submit and QOS limits where the scheduler has them.

        Raises:
            CommandError: One of its commands failed.
        """
        raise UnsupportedCommand(f"{self.name}: discover_site")


def job_key_of(backend: BaseBackend) -> Callable[[str], str] | None:
    """``backend.job_key`` where ids need it to be compared, else ``None`` (compared as text, faster)."""
    return None if backend.capabilities.job_ids_as_text else backend.job_key


def same_job_of(backend: BaseBackend) -> Callable[[str, str], bool] | None:
    """``backend.same_job`` where ids need it to be compared, else ``None`` (compared as text, faster)."""
    return None if backend.capabilities.job_ids_as_text else backend.same_job


#: The contract every backend meets (kept as the name the rest of hpcjobs types against).
SchedulerBackend = BaseBackend
