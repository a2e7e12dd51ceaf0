"""What Docker Swarm and Kubernetes share for distributed jobs: which launches they can run.

A job of N nodes runs as N containers (Swarm tasks of one service, Kubernetes pods), one per node,
whose script finds its rank in its task slot or pod index and its peers through the run folder
(``templates/launch/containers.sh.j2``). A launcher that starts the other nodes itself (``mpi``,
``deepspeed``: ssh or an MPI process manager) cannot reach into other containers, and a sweep's
array tasks are already the containers of one service or Job, so neither is rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpcjobs import states as st
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.base import BaseBackend, JobStatus

if TYPE_CHECKING:
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob

#: Launchers that run one process (group) per container and need nothing but the peers' addresses.
CONTAINER_LAUNCHERS = frozenset({"none", "torchrun", "tf"})


def distributed_problem(job: ResolvedJob, platform: str) -> None:
    """Refuse what a container platform cannot run: arrays of launched jobs, ssh-style launchers across nodes.

    Args:
        job: The resolved job.
        platform: ``Docker Swarm`` or ``Kubernetes`` (for the message).

    Raises:
        ConfigError: The job is an array (a sweep chunk) with several nodes or a launcher, or its
            launcher needs ssh or an MPI process manager across several containers.
    """
    site = job.site.name
    if job.array is not None and (job.nodes > 1 or job.launch is not None):
        raise ConfigError(ConfigProblem(
            f"site {site!r} runs {platform}, where a job with several nodes or a launcher runs as a single job "
            "(hpcjobs submit), not as a sweep's array task",
            key="launch" if job.launch is not None else "resources.nodes"))
    if job.launch is not None and job.nodes > 1 and job.launch.launcher not in CONTAINER_LAUNCHERS:
        raise ConfigError(ConfigProblem(
            f"launcher {job.launch.launcher!r} starts the other nodes itself (ssh or an MPI process manager), which "
            f"cannot reach into {platform}'s containers; on site {site!r} a job of {job.nodes} nodes uses "
            f"{', '.join(sorted(CONTAINER_LAUNCHERS))}", key="launch.launcher"))


def env_secret_refusal(site: SiteConfig, scheduler: str) -> str:
    """Why a secret from the submitter's environment cannot reach a container job (Swarm, Kubernetes).

    Neither passes the submitter's environment, and a value in the service or Job spec is shown by
    ``docker service inspect`` / ``kubectl get job -o yaml``.
    """
    return (f"site {site.name!r} runs {scheduler}, which does not pass the submitter's environment to the "
            "job (and a value in the job's spec is shown to anyone who can inspect it); use `file:` instead, "
            "on a folder the job's mounts include")


#: Worst first: the state a distributed job takes when one of its ranks ended so.
_FAILURE_ORDER = (st.OUT_OF_MEMORY, st.TIMEOUT, st.FAILED, st.NODE_FAIL, st.CANCELLED)


def distributed_status(job_id: str, ranks: Sequence[JobStatus], nodes: int, *, cancelled: bool = False) -> JobStatus:
    """One record for a distributed job (one point) from the records of its ranks (``array_task_id`` = rank).

    COMPLETED only when all ``nodes`` ranks completed; a rank that failed (or ran out of time or
    memory) makes the job FAILED (TIMEOUT, OUT_OF_MEMORY) at once, with the rank in the state text,
    even while other ranks still run; else RUNNING while a rank runs, CANCELLED when cancelled,
    PENDING until then.

    Args:
        job_id: The job's id (the service or chunk name the ledger asks for).
        ranks: One record per rank seen (ranks without a container yet are missing).
        nodes: The job's number of ranks.
        cancelled: hpcjobs cancelled the job.

    Returns:
        The job's record, named ``job_id``.
    """
    by_rank = {r.array_task_id if r.array_task_id is not None else i: r for i, r in enumerate(ranks)}
    bad = [(rank, r) for rank, r in sorted(by_rank.items()) if r.state in _FAILURE_ORDER and r.state != st.CANCELLED]
    if bad:
        rank, worst = min(bad, key=lambda item: (_FAILURE_ORDER.index(item[1].state), item[0]))
        return JobStatus(job_id=job_id, state=worst.state, state_raw=f"rank {rank} of {nodes}: {worst.state_raw}",
                         exit_code=worst.exit_code, reason=worst.reason, name=worst.name)
    done = [r for r in by_rank.values() if r.state == st.COMPLETED]
    if len(done) == nodes:
        return JobStatus(job_id=job_id, state=st.COMPLETED, state_raw=f"all {nodes} ranks completed", exit_code=0,
                         name=done[0].name)
    name = next((r.name for r in ranks), None)
    if cancelled or any(r.state == st.CANCELLED for r in by_rank.values()):
        return JobStatus(job_id=job_id, state=st.CANCELLED, state_raw=f"cancelled ({len(done)} of {nodes} ranks "
                         "completed)", name=name)
    running = [r for r in by_rank.values() if r.state == st.RUNNING]
    if running or done:
        return JobStatus(job_id=job_id, state=st.RUNNING, state_raw=f"{len(running)} of {nodes} ranks running, "
                         f"{len(done)} completed", name=name)
    return JobStatus(job_id=job_id, state=st.PENDING, state_raw=f"0 of {nodes} ranks started", name=name)


class ContainerBackend(BaseBackend):
    """What the schedulers that run each job in containers (Swarm services, Kubernetes Jobs) share.

    The job's script sends its output to ``<name>-<object name>`` in the mounted submit directory;
    the run folders are mounted unless the site's section (:attr:`site_section`) says
    ``mount_run_folders: false``; and a secret from the submitter's environment cannot reach the job.
    """

    # --- sweep hooks ---

    def single_log_stem(self, name: str, job_id: str) -> str:
        """``<name>-<object name>``: where the script sends its output (``templates/<name>.sh.j2``)."""
        return f"{name}-{job_id.rsplit('/', 1)[-1]}"

    def run_folders_mounted(self, site: SiteConfig) -> bool:
        """What the site's section (``swarm:``, ``kubernetes:``) says; mounted when the site gives no settings."""
        section = getattr(site, self.site_section or "", None)
        return section is None or bool(section.mount_run_folders)

    # --- render hooks ---

    def env_secret_problem(self, site: SiteConfig, directives: Sequence[str]) -> str | None:
        """Refused: the job does not get the submitter's environment (:func:`env_secret_refusal`)."""
        del directives
        return env_secret_refusal(site, self.name)
