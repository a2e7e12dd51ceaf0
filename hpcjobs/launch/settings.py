"""Launch settings of one job: the experiment's ``launch:`` section with the site's defaults applied."""

from __future__ import annotations

from dataclasses import dataclass

from hpcjobs.config.experiment import Experiment, Launch
from hpcjobs.config.scheduler_facts import SchedulerFacts
from hpcjobs.config.site import SiteConfig
from hpcjobs.units import format_walltime_slurm


@dataclass(frozen=True)
class LaunchSettings:
    """Everything the launch templates need, resolved (no ``None`` left where a default exists).

    Attributes:
        launcher: none, srun, torchrun, deepspeed, tf or mpi.
        program: What the launcher starts (``None`` for launcher none).
        args: The program's arguments, quoted one word each when rendered.
        nproc_per_node: Processes per node for torchrun/deepspeed.
        port_base: First rendezvous port.
        port_span: Size of the rendezvous port range.
        rdzv_backend: torchrun rendezvous backend.
        deepspeed_config: DeepSpeed config path, or ``None``.
        deepspeed_launcher: DeepSpeed's --launcher, or ``None`` for its default.
        mpi_flavour: mpich or openmpi (mpiexec syntax off Slurm).
        node_launcher: pbsdsh or mpiexec (PBS/Torque per-node start).
        torchrun: The site's torchrun command (shell words).
        deepspeed: The site's deepspeed command (shell words).
        preemptible: Trap the signal, checkpoint, requeue.
        signal: Signal name without ``SIG``.
        signal_seconds: Lead time before the wall-time limit.
        max_requeues: Requeue cap.
        checkpoint_command: Shell run after the program stopped, or ``None``.
        timer_seconds: PBS/Torque/local: seconds after the script starts when it signals itself
            (wall time − lead time), or ``None`` without a wall time.
        pbs_requeue: exit or qrerun.
        requeue_exit_code: Exit status of a job stopped on the signal and not requeued by hpcjobs.
        gpu_sampler: Run the nvidia-smi sampler.
        gpu_sampler_interval: Seconds between samples.
    """

    launcher: str = "none"
    program: str | None = None
    args: tuple[str, ...] = ()
    nproc_per_node: int = 1
    port_base: int = 20000
    port_span: int = 10000
    rdzv_backend: str = "c10d"
    deepspeed_config: str | None = None
    deepspeed_launcher: str | None = None
    mpi_flavour: str = "mpich"
    node_launcher: str = "pbsdsh"
    torchrun: str = "torchrun"
    deepspeed: str = "deepspeed"
    preemptible: bool = False
    signal: str = "USR1"
    signal_seconds: int = 120
    max_requeues: int = 3
    checkpoint_command: str | None = None
    timer_seconds: int | None = None
    pbs_requeue: str = "exit"
    requeue_exit_code: int = 75
    gpu_sampler: bool = False
    gpu_sampler_interval: int = 30

    @property
    def uses_rendezvous(self) -> bool:
        """Whether the job needs the rendezvous host and port (torchrun, deepspeed, tf)."""
        return self.launcher in ("torchrun", "deepspeed", "tf")


#: Launchers only a scheduler provides → (that scheduler, in words; the launcher to use elsewhere).
#: A backend names those it provides (``BaseBackend.launchers``); the other launchers run anywhere.
SCHEDULER_LAUNCHERS: dict[str, tuple[str, str]] = {"srun": ("Slurm", "mpi")}


def launch_problems(exp: Experiment, site: SiteConfig, walltime: int | None, *,
                    facts: SchedulerFacts) -> list[tuple[str, str]]:
    """Ways ``exp.launch`` cannot work on ``site``, as (key, message) pairs.

    Args:
        exp: The experiment.
        site: The site.
        walltime: The job's resolved wall time in seconds, if any.
        facts: What the site's scheduler does, from its backend: the launchers of
            :data:`SCHEDULER_LAUNCHERS` it provides (``launchers``), and whether it signals a
            preemptible job itself (``walltime_signal``; else the script signals itself from a timer,
            which needs a wall time).

    Returns:
        Problems to report; empty when the launch section is usable.
    """
    launch = exp.launch
    if launch is None:
        return []
    out: list[tuple[str, str]] = []
    needs = SCHEDULER_LAUNCHERS.get(launch.launcher)
    if needs is not None and launch.launcher not in facts.launchers:
        out.append(("launch.launcher", f"launcher {launch.launcher!r} needs {needs[0]}; site {site.name!r} runs "
                                       f"{site.scheduler} (use {needs[1]!r})"))
    if launch.preemptible:
        lead = launch.signal_seconds or site.preemption.signal_seconds
        if walltime is None and not facts.walltime_signal:
            out.append(("launch.preemptible", f"a preemptible job on {site.scheduler} needs resources.walltime "
                                              "(the script signals itself that long before the end)"))
        if walltime is not None and lead >= walltime:
            out.append(("launch.signal_seconds", f"the signal would come {lead} s before a wall time of "
                                                 f"{format_walltime_slurm(walltime)}: before the job starts"))
    return out


def resolve_launch(
    launch: Launch | None, site: SiteConfig, *, gpus_per_node: int, tasks_per_node: int, walltime: int | None
) -> LaunchSettings | None:
    """Apply the site's defaults to an experiment's ``launch:`` section.

    Args:
        launch: The section, or ``None``.
        site: The site.
        gpus_per_node: GPUs per node of the job.
        tasks_per_node: Tasks per node of the job.
        walltime: The job's wall time in seconds, if any.

    Returns:
        The settings, or ``None`` when the section is absent or changes nothing.
    """
    if launch is None or not launch.active:
        return None
    dist, pre = site.distributed, site.preemption
    lead = launch.signal_seconds or pre.signal_seconds
    timer = walltime - lead if (launch.preemptible and walltime is not None and walltime > lead) else None
    return LaunchSettings(
        launcher=launch.launcher,
        program=launch.program,
        args=tuple(launch.args),
        nproc_per_node=launch.nproc_per_node or gpus_per_node or tasks_per_node,
        port_base=launch.rdzv_port_base or dist.port_base,
        port_span=min(dist.port_span, 65536 - (launch.rdzv_port_base or dist.port_base)),
        rdzv_backend=launch.rdzv_backend,
        deepspeed_config=launch.deepspeed_config,
        deepspeed_launcher=launch.deepspeed_launcher,
        mpi_flavour=launch.mpi_flavour or dist.mpi_flavour,
        node_launcher=launch.node_launcher or dist.node_launcher,
        torchrun=dist.torchrun,
        deepspeed=dist.deepspeed,
        preemptible=launch.preemptible,
        signal=launch.signal,
        signal_seconds=lead,
        max_requeues=launch.max_requeues,
        checkpoint_command=launch.checkpoint_command,
        timer_seconds=timer,
        pbs_requeue=pre.pbs_requeue,
        requeue_exit_code=pre.requeue_exit_code,
        gpu_sampler=launch.gpu_sampler,
        gpu_sampler_interval=launch.gpu_sampler_interval,
    )


def uses_distributed_settings(exp: Experiment) -> bool:
    """Whether the site's ``distributed`` modules and environment apply: GPUs or a launcher."""
    return exp.resources.gpus_per_node > 0 or (exp.launch is not None and exp.launch.launcher != "none")
