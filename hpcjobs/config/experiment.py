"""The experiment schema: what a researcher writes to describe a job (and its sweep)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from hpcjobs.config.types import (
    DirectivePath,
    EnvName,
    EnvValue,
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


class Experiment(StrictModel):
    """One experiment: a job description, optionally swept over parameters."""

    name: Name = Field(description="Job name (letters, digits, _ . + -).")
    description: str = ""
    site: Name | None = Field(None, description="Site config to use (default: detected, else 'local').")
    partition: Name | None = Field(None, description="Partition (Slurm) or queue (PBS); default: the site's.")
    account: Name | None = None
    qos: Name | None = None
    resources: Resources = Field(default_factory=Resources)
    environment: dict[EnvName, EnvValue] = Field(default_factory=dict, description="Exported, quoted, in the job.")
    modules: list[OneLine] = Field(default_factory=list, description="Modules to load after the site's.")
    setup: list[str] = Field(default_factory=list, description="Shell lines run before the command.")
    workdir: str | None = Field(None, description="Directory the command runs in (default: submit directory).")
    output_dir: DirectivePath = Field("hpcjobs-logs", description="Directory for the job's stdout/stderr files.")
    command: str | None = Field(None, description="The command to run (shell).")
    script: str | None = Field(None, description="A multi-line script body to run instead of a command.")
    directives: list[OneLine] = Field(default_factory=list, description="Extra raw scheduler directives.")
    template: str | None = Field(None, description="Template to render with instead of the site's.")
    params: dict[EnvName, EnvValue] = Field(
        default_factory=dict,
        description="Fixed parameters, exported (quoted) as environment variables and visible to templates.",
    )
    sweep: dict[str, Any] | None = Field(None, description="Parameter sweep (see the sweep documentation).")

    @model_validator(mode="after")
    def _one_body(self) -> Experiment:
        if bool(self.command) == bool(self.script):
            raise ValueError("give exactly one of 'command' or 'script'")
        return self
