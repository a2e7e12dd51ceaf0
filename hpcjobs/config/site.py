"""The site configuration schema: one YAML file per cluster, maintained by its admins."""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from hpcjobs.config import scheduler_names
from hpcjobs.config.container import SiteContainers
from hpcjobs.config.site_containers import KubernetesSettings, SwarmSettings
from hpcjobs.config.types import EnvName, EnvValue, ExportName, Memory, Name, OneLine, StrictModel, Walltime

#: One item of Slurm's TRESBillingWeights (slurm.conf(5)): ``NAME=NUMBER`` with an optional K/M/G/T/P suffix.
_TRES_WEIGHT = re.compile(r"^[^=\s]+=[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?[KMGTP]?$")


def _choices_text(names: tuple[str, ...]) -> str:
    """``'a', 'b' or 'c'``: how pydantic spells a closed choice (what :mod:`.validation` reads back)."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


class _SchedulerNameType:
    """``scheduler:``: the name of a registered backend (:mod:`hpcjobs.config.scheduler_names`).

    A closed choice like a ``Literal`` (its error is a ``literal_error``, with the choices), but read from
    the backends' registry when the file is validated, so that a backend added at run time or by an entry
    point is accepted; the published JSON schema lists the names known when it is generated.
    """

    @staticmethod
    def _check(value: Any) -> str:
        if not isinstance(value, str) or scheduler_names.facts_of(value) is None:
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": _choices_text(scheduler_names.scheduler_names(everything=True))})
        return value

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(cls._check)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"enum": list(scheduler_names.scheduler_names()), "type": "string"}


#: The type of ``scheduler:``: a ``str`` that names a known backend.
SchedulerName = typing.Annotated[str, _SchedulerNameType]


class SiteDetection(StrictModel):
    """How hpcjobs recognises it runs on this site's login nodes."""

    cluster_names: list[str] = Field(
        default_factory=list,
        description="Slurm ClusterName / SLURM_CLUSTER_NAME or PBS server name values that mean this site.",
    )
    hostname_patterns: list[str] = Field(
        default_factory=list, description="fnmatch patterns of login-node host names (e.g. 'login*.narval.*')."
    )
    environment: dict[EnvName, str] = Field(
        default_factory=dict, description="Environment variables that must have these values (e.g. CC_CLUSTER)."
    )


class Partition(StrictModel):
    """One Slurm partition or PBS/Torque queue and its limits."""

    description: str = ""
    scheduler_name: Name | None = Field(
        None, description="The partition/queue name the scheduler knows, when it differs from this entry's key "
        "(lets one queue appear as several entries, e.g. a queue routing to CPU and GPU nodes).",
    )
    max_walltime: Walltime | None = Field(None, description="Longest wall time the partition accepts.")
    default_walltime: Walltime | None = Field(None, description="Wall time used when a job names none.")
    max_nodes: PositiveInt | None = Field(None, description="Most nodes one job may use.")
    cpus_per_node: PositiveInt | None = Field(None, description="Cores (schedulable CPUs) per node.")
    memory_per_node: Memory | None = Field(None, description="Memory a job can request per node.")
    default_memory_per_cpu: Memory | None = Field(None, description="Memory given per CPU when none is asked.")
    gpus_per_node: NonNegativeInt = Field(0, description="GPUs per node (0 for a CPU partition).")
    gpu_types: list[Name] = Field(default_factory=list, description="GPU models on this partition's nodes.")
    qos: list[Name] = Field(default_factory=list, description="QoS values allowed on this partition (empty: any).")
    exclusive: bool = Field(False, description="Jobs get whole nodes; memory requests are not sent.")
    directives: list[OneLine] = Field(
        default_factory=list, description="Extra directives for jobs on this partition (e.g. '--constraint=gpu')."
    )
    tres_billing_weights: OneLine | None = Field(
        None, description="Slurm TRESBillingWeights of the partition as `scontrol show partition` prints it "
        "(e.g. 'CPU=1.0,Mem=0.25G,GRES/gpu=2.0'): what a job is billed, shown by `hpcjobs plan`.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Partition:
        if self.tres_billing_weights is not None:
            for item in self.tres_billing_weights.split(","):
                if item.strip() and not _TRES_WEIGHT.match(item.strip()):
                    raise ValueError(f"tres_billing_weights: not a TRES weight: {item.strip()!r} (expected "
                                     "NAME=NUMBER, e.g. CPU=1.0 or Mem=0.25G)")
        if self.gpu_types and not self.gpus_per_node:
            raise ValueError("gpu_types is set but gpus_per_node is 0")
        if self.default_walltime and self.max_walltime and self.default_walltime > self.max_walltime:
            raise ValueError("default_walltime is longer than max_walltime")
        return self


class SchedulerLimits(StrictModel):
    """Scheduler-wide limits that shape how hpcjobs submits (override what the scheduler reports)."""

    max_array_size: PositiveInt | None = Field(
        None, description="Array indices must be below this (Slurm MaxArraySize, PBS max_array_size)."
    )
    max_submitted_jobs: PositiveInt | None = Field(
        None, description="Jobs (array tasks count) one user may have queued or running."
    )
    array_throttle: PositiveInt | None = Field(None, description="Default cap on running tasks of one array.")


class QosLimits(StrictModel):
    """Limits of one Slurm QOS, checked before ``sbatch`` for jobs that use the QOS (``sacctmgr show qos``).

    A job above its QOS's MaxWall is accepted by ``sbatch`` and then pends for ever (reason
    ``QOSMaxWallDurationPerJobLimit``) unless the QOS has the ``DenyOnLimit`` flag, so hpcjobs refuses
    it first, naming the QOS.
    """

    max_walltime: Walltime | None = Field(None, description="QOS MaxWall: the longest wall time of one job.")
    max_submitted_jobs: PositiveInt | None = Field(
        None, description="QOS MaxSubmitJobsPerUser: jobs (array tasks count) one user may have queued or running.",
    )
    max_cpus_per_job: PositiveInt | None = Field(
        None, description="CPUs one job may use (the smaller of MaxTRESPerJob cpu and GrpTRES cpu).",
    )
    max_gpus_per_job: PositiveInt | None = Field(
        None, description="GPUs one job may use (the smaller of MaxTRESPerJob gres/gpu and GrpTRES gres/gpu).",
    )


class SiteDistributed(StrictModel):
    """What distributed (multi-GPU, multi-node) jobs need on this cluster: NCCL settings, modules, launchers."""

    environment: dict[ExportName, EnvValue] = Field(
        default_factory=dict,
        description="Exported in jobs with GPUs or a launcher (e.g. NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG).",
    )
    modules: list[OneLine] = Field(
        default_factory=list,
        description="Loaded in jobs with GPUs or a launcher (CUDA, cuDNN, NCCL), after `modules`.",
    )
    port_base: int = Field(
        20000, ge=1024, le=65000,
        description="Rendezvous port = port_base + (job number mod port_span); keep the range below the "
        "ephemeral ports (Linux: 32768-60999).",
    )
    port_span: PositiveInt = Field(10000, le=30000, description="Size of the rendezvous port range.")
    mpi_flavour: Literal["mpich", "openmpi"] = Field(
        "mpich", description="mpiexec syntax on PBS/Torque: mpich (Hydra, Intel MPI, Cray PALS) or openmpi.",
    )
    node_launcher: Literal["pbsdsh", "mpiexec"] = Field(
        "pbsdsh", description="PBS/Torque: start one launcher per node with pbsdsh -n or mpiexec (one rank per node).",
    )
    torchrun: OneLine = Field("torchrun", description="The torchrun command (e.g. 'python -m torch.distributed.run').")
    deepspeed: OneLine = Field("deepspeed", description="The deepspeed launcher command.")

    @model_validator(mode="after")
    def _port_range(self) -> SiteDistributed:
        if self.port_base + self.port_span > 65536:
            raise ValueError("port_base + port_span goes past 65535")
        return self


class SitePreemption(StrictModel):
    """How jobs hear that their time is up, and how they are run again."""

    signal_seconds: PositiveInt = Field(
        120, description="Default lead time: the signal comes this many seconds before the wall-time limit "
        "(Slurm --signal=B:SIG@N; PBS/Torque: a timer in the script).",
    )
    pbs_requeue: Literal["exit", "qrerun"] = Field(
        "exit", description="PBS/Torque after the checkpoint: exit with requeue_exit_code (the sweep ledger "
        "resubmits) or qrerun the job (needs operator rights on most PBS servers).",
    )
    requeue_exit_code: int = Field(
        75, ge=1, le=125,
        description="Exit status of a job that stopped on the signal with a checkpoint and was not requeued by "
        "hpcjobs (75 = EX_TEMPFAIL: resubmit to continue).",
    )


def _sync_path(value: str) -> str:
    parts = value.strip("/").split("/")
    if (not value or value.startswith(("/", "~", "-")) or any(p in ("", ".", "..") for p in parts)
            or any(ord(c) < 32 or c == "\x7f" for c in value)):
        raise ValueError(f"{value!r}: a sync entry is a path relative to the submit folder (no /, ~, -, . or .. "
                         "parts, no control characters), e.g. src/ or train.py")
    return "/".join(parts)


def _sync_pattern(value: str) -> str:
    if not value or any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ValueError(f"{value!r}: an exclude is a shell pattern of names or relative paths (e.g. '*.ckpt')")
    return value


SyncPath = Annotated[str, AfterValidator(_sync_path)]
SyncPattern = Annotated[str, AfterValidator(_sync_pattern)]


class SiteRemote(StrictModel):
    """The login node hpcjobs reaches this cluster through when it runs elsewhere (a laptop), over SSH."""

    host: OneLine = Field(description="Host name or ~/.ssh/config alias of the login node.")
    user: OneLine | None = Field(None, description="Login name (default: ssh's, from ~/.ssh/config or the local user).")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default: ssh's).")
    workdir: OneLine = Field("hpcjobs", description="Folder on the login node for sweeps and submissions "
                             "(relative or ~/: from the remote home).")
    ssh_config: OneLine | None = Field(None, description="ssh_config file used instead of ~/.ssh/config (ssh -F).")
    options: list[OneLine] = Field(default_factory=list, description="Extra ssh -o options (ProxyJump=bastion).")
    ssh: OneLine = Field("ssh", description="The OpenSSH client program.")
    sync: list[SyncPath] = Field(
        default_factory=list, description="Files and folders of the submit folder (relative) copied to the "
        "login node's workdir before the first job of each submission, so the jobs run this copy of your code "
        "(only files that changed since the last copy of that run are sent; links are not followed).")
    sync_exclude: list[SyncPattern] = Field(
        default_factory=lambda: [".git", "__pycache__", "*.pyc", ".venv", ".ipynb_checkpoints"],
        description="Names or relative paths (shell patterns) left out of `sync`.")

    @model_validator(mode="after")
    def _usable(self) -> SiteRemote:
        from hpcjobs.transport.login import login_problems

        problems = login_problems(host=self.host, user=self.user, port=self.port, workdir=self.workdir,
                                  ssh_config=self.ssh_config, options=tuple(self.options), ssh=self.ssh)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class SiteConfig(StrictModel):
    """A cluster: its scheduler, partitions and limits, and what every job script there needs."""

    name: Name
    description: str = ""
    documentation: str | None = Field(None, description="Where the limits below come from (URL).")
    scheduler: SchedulerName
    template: str | None = Field(
        None, description="Template to render with instead of the scheduler's (e.g. 'sites/mysite.sh.j2')."
    )
    detect: SiteDetection = Field(default_factory=SiteDetection)
    default_partition: Name | None = None
    partitions: dict[Name, Partition] = Field(default_factory=dict)
    default_account: Name | None = None
    account_required: bool = Field(False, description="Refuse jobs that name no account.")
    accounts: list[Name] = Field(default_factory=list, description="Accounts known to be valid (empty: any).")
    default_qos: Name | None = None
    qos_limits: dict[Name, QosLimits] = Field(
        default_factory=dict,
        description="Slurm only: limits of QOS, checked before submitting a job that uses the QOS "
        "(its qos:, else default_qos); hpcjobs site init fills them from sacctmgr.",
    )
    gpu_request: Literal["gres", "gpus-per-node"] = Field(
        "gres", description="Slurm only: ask for GPUs with --gres=gpu[:type]:N or --gpus-per-node=[type:]N."
    )
    gpu_type_resource: Name | None = Field(
        "gpu_type",
        description="PBS only: the select-chunk resource that names the GPU model (gpu_type=a100); "
        "null to never send one.",
    )
    modules: list[OneLine] = Field(default_factory=list, description="Modules loaded in every job.")
    module_purge: bool = Field(False, description="Run 'module purge' before loading modules.")
    environment: dict[ExportName, EnvValue] = Field(default_factory=dict, description="Exported in every job.")
    directives: list[OneLine] = Field(default_factory=list, description="Extra directives for every job.")
    forbidden_directives: list[str] = Field(
        default_factory=list,
        description="Directive names this site must not receive (Slurm long options like 'mem', "
        "PBS resources like 'mem'); hpcjobs omits them and refuses user directives that use them.",
    )
    prologue: list[str] = Field(default_factory=list, description="Shell lines run before the job's own.")
    epilogue: list[str] = Field(default_factory=list, description="Shell lines run after the job's own.")
    limits: SchedulerLimits = Field(default_factory=SchedulerLimits)
    distributed: SiteDistributed = Field(default_factory=SiteDistributed)
    preemption: SitePreemption = Field(default_factory=SitePreemption)
    swarm: SwarmSettings | None = Field(
        None, description="Docker Swarm sites: the image, mounts and placement of jobs.")
    kubernetes: KubernetesSettings | None = Field(
        None, description="Kubernetes sites: the namespace, image, volumes and placement of jobs.")
    remote: SiteRemote | None = Field(
        None, description="Reach this cluster from another machine (a laptop) over SSH: its login node.")
    containers: SiteContainers | None = Field(
        None, description="Container runtimes on the nodes (apptainer, singularity, pyxis, podman, oci), their "
        "modules and GPU flags, default mounts and the folders a job may mount.")

    @model_validator(mode="after")
    def _consistent(self) -> SiteConfig:
        if self.default_partition is not None and self.default_partition not in self.partitions:
            choices = ", ".join(self.partitions) or "(none defined)"
            raise ValueError(f"default_partition {self.default_partition!r} is not a partition; choices: {choices}")
        problem = _scheduler_problem(self)
        if problem:
            raise ValueError(problem)
        if self.accounts and self.default_account and self.default_account not in self.accounts:
            raise ValueError(f"default_account {self.default_account!r} is not in accounts")
        return self


def _section_model(key: str) -> type[BaseModel] | None:
    """The settings model of site section ``key`` (``SwarmSettings`` for ``swarm``)."""
    annotation = SiteConfig.model_fields[key].annotation
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    for candidate in (*args, annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _scheduler_problem(site: SiteConfig) -> str | None:
    """What ``site`` holds that its scheduler's sites may not (or lacks that they need), as the backends say.

    Partitions only where the scheduler has them; a scheduler-only key (``qos_limits``) only on the
    schedulers that list it; a settings section (``swarm:``) exactly on its own scheduler's sites.
    """
    facts = scheduler_names.facts_of(site.scheduler)
    if facts is None:
        return None
    if not facts.partitions and site.partitions:
        return f"a {site.scheduler!r} site has no partitions"
    if site.containers is not None:
        foreign = [r for r in site.containers.runtimes if r not in facts.container_runtimes]
        if foreign:
            return (f"containers.runtimes: {', '.join(foreign)} cannot run under {site.scheduler}; its jobs can run in "
                    f"{', '.join(sorted(facts.container_runtimes)) or 'no container runtime (they are containers)'}")
    sections: list[str] = []
    for other in scheduler_names.known().values():
        if other.site_section and other.site_section not in sections:
            sections.append(other.site_section)
        for key in other.site_fields:
            if key in SiteConfig.model_fields and getattr(site, key) and key not in facts.site_fields:
                return f"{key} are {other.site_fields[key]}; this site's scheduler is {site.scheduler}"
    for key in sections:
        if key not in SiteConfig.model_fields:
            continue
        given = getattr(site, key) is not None
        if key == facts.site_section and not given:
            model = _section_model(key)
            needed = [f"`{n}:`" for n, f in model.model_fields.items() if f.is_required()] if model else []
            at_least = f" (at least {', '.join(needed)})" if needed else ""
            return f"a {site.scheduler!r} site needs `{key}:` settings{at_least}"
        if given and key != facts.site_section:
            owners = " or ".join(scheduler_names.field_owners(key)[0])
            return f"`{key}:` settings are for {owners} sites; this one runs {site.scheduler}"
    return None
