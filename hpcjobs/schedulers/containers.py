"""What Docker Swarm and Kubernetes share for distributed jobs: which launches they can run.

A job of N nodes runs as N containers (Swarm tasks of one service, Kubernetes pods), one per node,
whose script finds its rank in its task slot or pod index and its peers through the run folder
(``templates/launch/containers.sh.j2``). A launcher that starts the other nodes itself (``mpi``,
``deepspeed``: ssh or an MPI process manager) cannot reach into other containers, and a sweep's
array tasks are already the containers of one service or Job, so neither is rendered.

An experiment's ``container:`` maps onto that container (:meth:`ContainerBackend.job_container_problems`):
its image replaces the site's (a registry image, checked by the grammar the site's image is), its
mounts must be folders the site's section already mounts (by container path), and the script runs in
the submit folder with the job's variables set by the script itself, so ``workdir``, an ``env:`` list
and a ``runtime`` are refused with why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from hpcjobs import states as st
from hpcjobs.config.container import parse_mount
from hpcjobs.config.site_containers import ImageRef
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.base import BaseBackend, JobStatus

if TYPE_CHECKING:
    from hpcjobs.config.container import ContainerSpec
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob

#: Launchers that run one process (group) per container and need nothing but the peers' addresses.
CONTAINER_LAUNCHERS = frozenset({"none", "torchrun", "tf"})
_IMAGE_REF: TypeAdapter[str] = TypeAdapter(ImageRef)


def job_image(spec: ContainerSpec) -> str:
    """The registry image ``spec`` names, as the site's ``image:`` is written (without ``docker://``)."""
    return spec.image.removeprefix("docker://")


def container_spec_problems(spec: ContainerSpec, *, platform: str, section: str,
                            declared: dict[str, str]) -> list[tuple[str, str]]:
    """What stops ``spec`` from being the container a Swarm service or Kubernetes Job runs.

    Args:
        spec: The experiment's ``container:``.
        platform: ``Docker Swarm`` or ``Kubernetes`` (for the messages).
        section: The site's section (``swarm``, ``kubernetes``) that declares the mounts.
        declared: Container path → a description of what the site mounts there.

    Returns:
        ``(key under container., message)`` pairs; empty when the experiment's image replaces the site's.
    """
    problems: list[tuple[str, str]] = []
    image = job_image(spec)
    if spec.image.startswith(("/", "~")) or image.endswith((".sif", ".sqsh")):
        problems.append(("image", f"{platform} pulls registry images (docker://registry/name:tag); {spec.image!r} "
                         "is a file or bundle folder, which its nodes cannot run as a job's image"))
    else:
        try:
            _IMAGE_REF.validate_python(image)
        except ValidationError as exc:
            problems.append(("image", f"{exc.errors()[0]['msg'].removeprefix('Value error, ')}"))
    choices = ", ".join(declared) or f"none (the site's {section}: section declares no mounts)"
    for i, text in enumerate(spec.mounts):
        mount = parse_mount(text)
        if mount.target not in declared:
            problems.append((f"mounts.{i}", f"{platform} mounts only what the site's {section}: section declares; "
                             f"{mount.target!r} is not one of its container paths; choices: {choices}"))
    if spec.workdir:
        problems.append(("workdir", f"on {platform} the job's script runs in the submit folder; remove workdir and "
                         "`cd` in the command instead"))
    if spec.env != "inherit":
        problems.append(("env", f"on {platform} the job's variables are set by its script inside the container and "
                         "nothing else passes in; remove the env: list"))
    if spec.runtime != "auto":
        problems.append(("runtime", f"on {platform} every job is a container already (no runtime runs inside "
                         f"it); remove runtime: {spec.runtime}"))
    return problems


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

    #: The platform's name in messages.
    platform: str = ""

    def declared_mounts(self, site: SiteConfig) -> dict[str, str]:
        """Container path → what the site's section mounts there (each backend reads its own section)."""
        del site
        return {}

    def job_container_problems(self, site: SiteConfig, spec: ContainerSpec) -> list[tuple[str, str]]:
        """The experiment's image replaces the site's; its mounts are the site's (:func:`container_spec_problems`)."""
        return container_spec_problems(spec, platform=self.platform, section=self.site_section or self.name,
                                       declared=self.declared_mounts(site))

    def env_secret_problem(self, site: SiteConfig, directives: Sequence[str]) -> str | None:
        """Refused: the job does not get the submitter's environment (:func:`env_secret_refusal`)."""
        del directives
        return env_secret_refusal(site, self.name)
