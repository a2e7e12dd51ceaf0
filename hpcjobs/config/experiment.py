"""The experiment schema: what a researcher writes to describe a job (and its sweep)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator

from hpcjobs.config.container import ContainerSpec
from hpcjobs.config.pack import Pack
from hpcjobs.config.pipeline import Notify, Upstream, after_json_schema, short_upstreams
from hpcjobs.config.results import ResultSource, one_or_list_schema
from hpcjobs.config.sweep import SweepSpec
from hpcjobs.config.tracking import Tracking
from hpcjobs.config.types import (
    DirectivePath,
    EnvName,
    EnvValue,
    ExportName,
    Memory,
    Name,
    OneLine,
    StrictModel,
    Walltime,
)


class Resources(StrictModel):
    """Generic resources, translated per scheduler when rendering."""

    nodes: PositiveInt = 1
    tasks_per_node: PositiveInt = Field(1, description="Processes (MPI ranks, launchers) per node.")
    cpus_per_task: PositiveInt = Field(1, description="CPU cores per task (OMP_NUM_THREADS follows it).")
    gpus_per_node: NonNegativeInt = 0
    gpu_type: Name | None = Field(None, description="GPU model, one of the partition's gpu_types.")
    memory: Memory | None = Field(None, description="Memory per node (default: the partition's default).")
    walltime: Walltime | None = Field(None, description="Wall-time limit (default: the partition's default).")
    exclusive: bool = Field(False, description="Ask for whole nodes.")

    @model_validator(mode="after")
    def _gpu_type_needs_gpus(self) -> Resources:
        if self.gpu_type and not self.gpus_per_node:
            raise ValueError("gpu_type is set but gpus_per_node is 0")
        return self


#: Launchers an experiment can ask for (``launch.launcher``).
LauncherName = Literal["none", "srun", "torchrun", "deepspeed", "tf", "mpi"]
LAUNCHERS: tuple[str, ...] = ("none", "srun", "torchrun", "deepspeed", "tf", "mpi")


class Launch(StrictModel):
    """How the job starts its program on its nodes, survives preemption, and samples its GPUs."""

    launcher: LauncherName = Field(
        "none",
        description="none: run `command`/`script` as written; torchrun/deepspeed: one launcher per node "
        "(deepspeed: once, with a hostfile); tf: one worker per task with TF_CONFIG; mpi/srun: one rank per task.",
    )
    program: OneLine | None = Field(
        None, description="What the launcher starts: the Python script (torchrun, deepspeed) or the executable "
        "(tf, mpi, srun). Required with a launcher; `command`/`script` are then not given.",
    )
    args: list[str] = Field(default_factory=list, description="The program's arguments, one word each (quoted).")
    nproc_per_node: PositiveInt | None = Field(
        None, description="Processes per node for torchrun/deepspeed (default: gpus_per_node, else tasks_per_node).",
    )
    rdzv_port_base: int | None = Field(
        None, ge=1024, le=65000,
        description="Rendezvous port = base + job number mod the site's port_span (default: the site's port_base).",
    )
    rdzv_backend: Literal["c10d", "static"] = Field(
        "c10d", description="torchrun rendezvous: c10d (elastic store on the first host) or static (MASTER_ADDR/PORT).",
    )
    deepspeed_config: OneLine | None = Field(
        None, description="DeepSpeed JSON config, passed to the program as --deepspeed --deepspeed_config PATH.",
    )
    deepspeed_launcher: Literal["pdsh", "openmpi", "mvapich", "slurm"] | None = Field(
        None, description="DeepSpeed's multi-node launcher (deepspeed --launcher); default: DeepSpeed's (pdsh).",
    )
    mpi_flavour: Literal["mpich", "openmpi"] | None = Field(
        None, description="PBS/Torque/local mpiexec syntax: mpich (Hydra, Intel MPI, Cray PALS: --ppn) or openmpi "
        "(--map-by ppr:N:node); default: the site's.",
    )
    node_launcher: Literal["pbsdsh", "mpiexec"] | None = Field(
        None, description="PBS/Torque: how one launcher per node is started; default: the site's (pbsdsh).",
    )
    preemptible: bool = Field(
        False, description="Trap the time-limit/preemption signal, forward it, checkpoint, and requeue.",
    )
    signal: Literal["USR1", "USR2", "INT", "URG"] = Field("USR1", description="The preemption signal.")
    signal_seconds: PositiveInt | None = Field(
        None, description="Seconds before the wall-time limit the signal is sent (default: the site's).",
    )
    max_requeues: NonNegativeInt = Field(3, description="Requeue at most this many times (SLURM_RESTART_COUNT).")
    checkpoint_command: str | None = Field(
        None, description="Shell run after the program stopped on the signal, before the requeue (your code).",
    )
    gpu_sampler: bool = Field(
        False, description="Sample nvidia-smi in the background into <output_dir>/<name>-<jobid>.gpu.csv.",
    )
    gpu_sampler_interval: PositiveInt = Field(30, description="Seconds between GPU samples (nvidia-smi -l).")

    @model_validator(mode="after")
    def _program_with_launcher(self) -> Launch:
        if self.launcher != "none" and not self.program:
            raise ValueError(f"launcher {self.launcher!r} needs launch.program")
        if self.launcher == "none" and (self.program or self.args):
            raise ValueError("launch.program/args need a launcher; with launcher 'none' use command or script")
        if self.deepspeed_config and self.launcher != "deepspeed":
            raise ValueError("deepspeed_config is only for launcher 'deepspeed'")
        return self

    @property
    def active(self) -> bool:
        """Whether anything in this section changes the rendered script."""
        return self.launcher != "none" or self.preemptible or self.gpu_sampler


class Secret(StrictModel):
    """Where a job reads a secret at run time; its value is never written into a script or sweep folder."""

    env: EnvName | None = Field(
        None, description="Take the value from this variable of the submitter's environment (Slurm and local "
        "sites: sbatch passes the submitter's environment to the job by default; refused on PBS/Torque, "
        "where `qsub -v` would store the value in the job's attributes that `qstat -f` shows).",
    )
    file: OneLine | None = Field(
        None, description="Read the value from this file when the job starts (~/ is the job's home "
        "directory; trailing newlines are dropped). The job stops if the file is missing or readable by "
        "group or others (chmod 600 it).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Secret:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of 'env' or 'file'")
        return self


class Experiment(StrictModel):
    """One experiment: a job description, optionally swept over parameters."""

    name: Name = Field(description="Job name (letters, digits, _ . + -).")
    description: str = ""
    site: Name | None = Field(None, description="Site config to use (default: detected, else 'local').")
    partition: Name | None = Field(None, description="Partition (Slurm) or queue (PBS); default: the site's.")
    account: Name | None = None
    qos: Name | None = None
    resources: Resources = Field(default_factory=Resources)
    environment: dict[ExportName, EnvValue] = Field(default_factory=dict, description="Exported, quoted, in the job.")
    secrets: dict[ExportName, Secret] = Field(
        default_factory=dict,
        description="Variables the job reads at run time from a file or the submitter's environment; their "
        "values are never written into the script, e.g. {WANDB_API_KEY: {env: WANDB_API_KEY}, "
        "DB_PASSWORD: {file: ~/.db_password}}.",
    )
    modules: list[OneLine] = Field(default_factory=list, description="Modules to load after the site's.")
    setup: list[str] = Field(default_factory=list, description="Shell lines run before the command.")
    workdir: str | None = Field(None, description="Directory the command runs in (default: submit directory).")
    output_dir: DirectivePath = Field("hpcjobs-logs", description="Directory for the job's stdout/stderr files.")
    command: str | None = Field(None, description="The command to run (shell).")
    script: str | None = Field(None, description="A multi-line script body to run instead of a command.")
    directives: list[OneLine] = Field(default_factory=list, description="Extra raw scheduler directives.")
    template: str | None = Field(None, description="Template to render with instead of the site's.")
    params: dict[ExportName, EnvValue] = Field(
        default_factory=dict,
        description="Fixed parameters, exported (quoted) as environment variables and visible to templates.",
    )
    sweep: SweepSpec | None = Field(
        None, description="Parameter sweep: grid/zip/points/random/union with exclude and filter, or a W&B sweep "
        "(see hpcjobs.config.sweep).",
    )
    launch: Launch | None = Field(
        None, description="Distributed launch, preemption/requeue and GPU sampling (see the launch documentation).",
    )
    results: list[ResultSource] | None = Field(
        None, json_schema_extra=one_or_list_schema,
        description="What each run writes that holds its metrics, read by load_sweep and `hpcjobs results`: "
        "{file: metrics.json}, {file: epochs.csv, reduce: max:val_acc}, {stdout_regex: 'acc=(?P<acc>[0-9.]+)'}, "
        "or a list of them; paths are relative to the point's run folder ($HPCJOBS_RUN_DIR).",
    )

    after: list[Upstream] = Field(
        default_factory=list, json_schema_extra=after_json_schema,
        description="Upstreams this experiment waits for (pipelines): experiment files (relative to this file), "
        "sweep ids or names, or job ids of `hpcjobs submit`, each with when: ok (default; afterok), any or done "
        "(afterany), e.g. [prep.yaml] or [{sweep: prep.yaml, when: any}]. Submit the upstream first.",
    )
    pack: Pack | None = Field(
        None, description="Several sweep points per array task: {per_node: K} runs K at once, each with 1/K of the "
        "node's CPUs and GPUs (its own run folder, logs and exit status), {sequential: K} one after another.",
    )
    notify: Notify | None = Field(
        None, description="Mail from the scheduler, e.g. {email: me@example.org, on: [begin, end, fail]} "
        "(Slurm --mail-user/--mail-type, PBS -M/-m).",
    )
    container: ContainerSpec | None = Field(
        None, description="The image the job's command (or each launcher) runs in: {image: docker://..., mounts: "
        "[/scratch], workdir: /workspace, env: inherit, runtime: auto} (see the Containers page).",
    )
    tracking: Tracking | None = Field(
        None, description="An experiment-tracker run per sweep point, resumed when the point is requeued or "
        "resubmitted: {wandb: {project: P, entity: E}} and/or {mlflow: {experiment: E, tracking_uri: URI}}.",
    )

    @field_validator("after", mode="before")
    @classmethod
    def _after_list(cls, value: object) -> object:
        return short_upstreams(value)

    @field_validator("results", mode="before")
    @classmethod
    def _results_list(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _one_body(self) -> Experiment:
        if self.launch is not None and self.launch.launcher != "none":
            if self.command or self.script:
                raise ValueError(f"launcher {self.launch.launcher!r} starts launch.program: "
                                 "give neither 'command' nor 'script'")
            return self
        if bool(self.command) == bool(self.script):
            raise ValueError("give exactly one of 'command' or 'script'")
        return self

    @model_validator(mode="after")
    def _secrets_apart(self) -> Experiment:
        both = sorted(set(self.secrets) & (set(self.environment) | set(self.params)))
        if both:
            raise ValueError(f"{', '.join(both)}: set both as a secret and in environment/params; keep the secret")
        return self
