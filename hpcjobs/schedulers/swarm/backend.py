"""The Docker Swarm backend: a job is a ``replicated-job`` service made with ``docker service create``.

Rendering writes the service's options into the script as ``#SWARM`` lines, one argument of
``docker service create`` per line (:func:`swarm_directives`), the way ``#SBATCH`` lines carry
sbatch's: ``hpcjobs render`` shows them, and :meth:`SwarmBackend.submit_argv_in` reads them back as
an argument list. Nothing goes through a shell: every value is one argv word.

A job array (a sweep chunk) of N tasks is one service with ``--replicas N --max-concurrent K``; its
tasks are numbered by their Swarm slot ``0..N-1``, which the script reads from ``{{.Task.Slot}}``
(``templates/swarm.sh.j2``). The service is named after the submission's tag
(:func:`hpcjobs.schedulers.swarm.formats.service_name`) and labelled with it (``hpcjobs.tag``): the name is
the job id hpcjobs records, and ``docker service ls`` finds a submission whose answer was lost.

Commands: ``docker service create`` to submit, one ``docker service ps`` per status poll for every
service of a sweep, ``docker service update`` to cancel (per service: Swarm can stop a job's tasks
only by changing it; the update swaps in a placeholder task that can never be placed, so
``docker service ps`` still tells a cancelled job from one whose tasks have not started yet), and
``docker service scale S=0`` for strays (duplicate submissions). A service is removed
(``docker service rm``) once the ledger has recorded every point of its chunk final and none of its
tasks runs (:mod:`hpcjobs.sweep.retire`, which first saves the service's and its tasks'
``docker inspect`` records in the sweep folder for ``hpcjobs report``): removing a job with a running
task leaves that task behind (:meth:`SwarmBackend.cancel_argv`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpcjobs.config.mounts import mount_path
from hpcjobs.errors import ConfigError, ConfigProblem, SchedulerOutputError
from hpcjobs.schedulers.base import Capabilities, Directive, JobStatus, SubmitOptions
from hpcjobs.schedulers.containers import ContainerBackend, distributed_problem
from hpcjobs.schedulers.swarm import formats as fmt
from hpcjobs.states import parse_job_tag
from hpcjobs.units import format_memory_slurm, is_ascii_digits

if TYPE_CHECKING:  # the render layer imports this module, not the other way round
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob

DIRECTIVE_PREFIX = "#SWARM"
#: A job id on Docker Swarm: the service's name (docker's rule for object names, ``[a-zA-Z0-9][a-zA-Z0-9_.-]``,
#: at most 63 characters), or its id.
JOB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
#: What ``docker inspect`` is given: a service name, or a service, task or container id (64 hex digits).
OBJECT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: The one directive that is not a ``docker service create`` option: the image the tasks run.
IMAGE_KEY = "image="
#: Labels that carry the site's submit-time choices from the rendered script to ``docker service create``.
NO_RUN_FOLDERS = "--label=hpcjobs.run-folders=no"
RUN_AS_IMAGE_USER = "--label=hpcjobs.run-as=image"
#: The label of a distributed job: its number of tasks (one per node), all of one point.
NODES_LABEL = "--label=hpcjobs.nodes="
#: Variables the service sets in each task from Swarm's templates (``docker service create --env``).
TASK_ENV = (
    ("HPCJOBS_SWARM_SLOT", "{{.Task.Slot}}"),
    ("HPCJOBS_SWARM_NODE_ID", "{{.Node.ID}}"),
    ("HPCJOBS_SWARM_SERVICE", "{{.Service.Name}}"),
)


def swarm_directives(job: ResolvedJob) -> list[Directive]:
    """``#SWARM`` lines: the ``docker service create`` options of ``job``, one argument each.

    Raises:
        ConfigError: The site has no ``swarm:`` settings, or the job needs what this backend does not
            do (:func:`hpcjobs.schedulers.containers.distributed_problem`), or a job of several nodes
            has no network to share.
    """
    settings = job.site.swarm
    if settings is None:
        raise ConfigError(ConfigProblem(f"site {job.site.name!r} runs swarm but has no `swarm:` settings (image, "
                                        "mounts)", key="swarm"))
    distributed_problem(job, "Docker Swarm")
    if job.nodes > 1 and not settings.networks:
        raise ConfigError(ConfigProblem(
            f"a job of {job.nodes} nodes on site {job.site.name!r} needs an overlay network its tasks share "
            "(swarm.networks: an attachable overlay network, `docker network create -d overlay --attachable NAME`)",
            key="swarm.networks"))
    tasks = job.array.size if job.array is not None else job.nodes
    if job.array is not None and (job.array.start != 0 or job.array.step != 1):
        raise ConfigError(ConfigProblem(f"a Swarm job's tasks are numbered 0..N-1; array {job.array.start}-"
                                        f"{job.array.end}:{job.array.step} cannot be run as one", key="array"))
    # the tasks of a multi-node job all run at once, whatever max_parallel says
    throttles = (job.array.throttle if job.array else None, settings.max_parallel)
    limits = [] if job.nodes > 1 else [t for t in throttles if t]
    d: list[Directive] = [
        ("mode", "--mode=replicated-job"),
        ("replicas", f"--replicas={tasks}"),
        ("max-concurrent", f"--max-concurrent={min([tasks, *limits])}"),
        # a failed slot is started again whatever this says (see the template); `none` keeps the
        # restart supervisor from adding a delayed second task of its own
        ("restart-condition", "--restart-condition=none"),
    ]
    cpus = job.cpus_per_task * job.tasks_per_node
    if job.nodes == 1:
        d.append(("reserve-cpu", f"--reserve-cpu={cpus}"))
    # else no CPU reservation: Docker 20.10 rejected every task of a job that reserved CPUs and joined an
    # overlay network ("assigned node no longer meets constraints", seen on the testbed, even at 0.1 CPU,
    # with one task or two); the limit and the memory reservation stay
    if settings.limit_resources:
        d.append(("limit-cpu", f"--limit-cpu={cpus}"))
    if job.memory_per_node is not None:
        memory = format_memory_slurm(job.memory_per_node)
        d.append(("reserve-memory", f"--reserve-memory={memory}"))
        if settings.limit_resources:
            d.append(("limit-memory", f"--limit-memory={memory}"))
    if job.gpus_per_node:
        d.append(("generic-resource", f"--generic-resource={settings.gpu_resource}={job.gpus_per_node}"))
    d += [("network", f"--network={n}") for n in settings.networks]
    d += [("constraint", f"--constraint={c}") for c in settings.constraints]
    d += [("mount", f"--mount={m.argument()}") for m in settings.mounts]
    if settings.init:
        d.append(("init", "--init"))
    d.append(("endpoint-mode", "--endpoint-mode=dnsrr"))  # no virtual IP: jobs publish no ports
    if not settings.resolve_image:
        d.append(("no-resolve-image", "--no-resolve-image"))
    if not settings.mount_run_folders:
        d.append(("label", NO_RUN_FOLDERS))
    if settings.run_as == "image":
        d.append(("label", RUN_AS_IMAGE_USER))
    if job.nodes > 1:  # N tasks of one point: the name says so (hpcjobs.schedulers.swarm.formats.service_name)
        d.append(("label", f"{NODES_LABEL}{job.nodes}"))
    if job.walltime is not None:  # Swarm has no time limit: the template enforces it (and it is shown)
        d.append(("label", f"--label=hpcjobs.walltime={job.walltime}"))
    d += [("env", f"--env={k}={v}") for k, v in TASK_ENV]
    d.append(("image", f"{IMAGE_KEY}{job.job_image or settings.image}"))
    return d


def read_directives(script: Path) -> tuple[list[str], str]:
    """The ``#SWARM`` options of a rendered script and its image, as sbatch reads ``#SBATCH`` lines.

    Directives are the ``#SWARM`` lines before the first line that is neither blank nor a comment.

    Raises:
        ConfigError: The script cannot be read, names no image or two, or has a line that is not an option.
    """
    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(ConfigProblem(f"cannot read the script: {exc}", file=str(script))) from None
    options: list[str] = []
    images: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if not line.startswith(DIRECTIVE_PREFIX + " "):
            continue
        word = line[len(DIRECTIVE_PREFIX) + 1:].strip()
        if word.startswith(IMAGE_KEY):
            images.append(word[len(IMAGE_KEY):])
        elif word.startswith("-"):
            options.append(word)
        else:
            raise ConfigError(ConfigProblem(f"{DIRECTIVE_PREFIX} line {word!r} is neither an option (--name=value) "
                                            f"nor {IMAGE_KEY}<image>", file=str(script), line=n))
    if len(images) != 1:
        raise ConfigError(ConfigProblem(f"the script has {len(images)} `{DIRECTIVE_PREFIX} {IMAGE_KEY}` lines; it "
                                        "needs exactly one", file=str(script)))
    return options, images[0]


def _replicas(options: Sequence[str]) -> int:
    found = [o.split("=", 1)[1] for o in options if o.startswith("--replicas=")]
    return int(found[-1]) if found and is_ascii_digits(found[-1]) else 1


def _nodes(options: Sequence[str]) -> int:
    found = [o[len(NODES_LABEL):] for o in options if o.startswith(NODES_LABEL)]
    return int(found[-1]) if found and is_ascii_digits(found[-1]) else 1


def _run_folders(script: Path, cwd: Path) -> list[Path]:
    """The submit directory and the folder above the script's (the sweep folder), outermost first."""
    folders: list[Path] = []
    for p in sorted({cwd.resolve(), script.resolve().parent.parent}, key=lambda p: (len(p.parts), str(p))):
        if p != Path("/") and not any(p.is_relative_to(f) for f in folders):
            folders.append(p)
    return folders


class SwarmBackend(ContainerBackend):
    """Docker Swarm commands (the ``docker`` CLI) and output parsers.

    Every service name and object id is checked (:meth:`check_job_ids`, :meth:`check_object_ids`)
    before it goes into an argv, as operands after ``--`` (docker's flags stop there).
    """

    name = "swarm"
    capabilities = Capabilities(services=True, submit_in_folder=True, submit_names_job=True, per_job_cancel=True,
                                retire=True, logs_command=True)
    directive_prefix = DIRECTIVE_PREFIX
    array_index_var = "HPCJOBS_TASK_INDEX"
    job_id_var = "HPCJOBS_JOB_ID"
    job_id_what = "Docker Swarm service name"
    job_id_pattern = JOB_ID_RE
    job_id_grammar = "a docker object name: a letter or digit, then letters, digits, _ . - (at most 63)"
    # --- accounting and plan hooks ---
    live_accounting_source = "docker"

    def check_object_ids(self, object_ids: Sequence[object], *, source: str | None = None) -> list[str]:
        """``object_ids`` (service names, task or container ids from docker's answers) checked for an argv.

        Raises:
            UnsafeValueError: One is not a docker object name or id.
        """
        from hpcjobs.ids import check_values

        return check_values(object_ids, OBJECT_ID_RE, what="docker object id",
                            expected="a letter or digit, then letters, digits, _ . - (at most 128)", source=source)

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """:meth:`submit_argv_in` the current directory."""
        return self.submit_argv_in(script, options, Path.cwd())

    def submit_argv_in(self, script: Path, options: SubmitOptions, cwd: Path, *,
                       server_version: tuple[int, int] | None = None) -> list[str]:
        """``docker service create`` of ``script``, submitted from ``cwd`` (the job starts there).

        The service is named after the tag and labelled with it; the submit directory and the sweep
        folder are bind-mounted at their own paths unless the site says otherwise; the job runs as the
        submitting user unless the site says otherwise.

        Raises:
            ConfigError: The script's ``#SWARM`` lines are not usable, or the options carry no hpcjobs tag.
        """
        if script.exists():
            words, image = read_directives(script)
        else:  # a dry run shows the command before the script is written
            words, image = [f"<the {DIRECTIVE_PREFIX} lines of the script>"], "<image>"
        tag = parse_job_tag(options.comment)
        if tag is None:
            raise ConfigError(ConfigProblem("a Swarm job is named after its hpcjobs tag, and none was given",
                                            key="comment"))
        experiment, _digest = fmt.experiment_of(tag.sweep_id)
        argv = ["docker", "service", "create", "--detach", "--quiet",
                "--name", fmt.service_name(tag, _replicas(words), nodes=_nodes(words)),
                "--label", f"hpcjobs.tag={tag.render()}", "--label", f"hpcjobs.name={experiment}",
                "--workdir", str(cwd)]
        if NO_RUN_FOLDERS not in words:
            for folder in _run_folders(script, cwd):
                try:
                    mount_path(str(folder))
                except ValueError as exc:
                    raise ConfigError(ConfigProblem(f"cannot bind-mount the run folder into the job: {exc}",
                                                    key="swarm.mount_run_folders")) from None
                argv += ["--mount", f"type=bind,source={folder},target={folder}"]
        if RUN_AS_IMAGE_USER not in words:
            argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
        if options.job_name:
            argv += ["--label", f"hpcjobs.job-name={options.job_name}"]
        argv += words
        argv += list(options.extra_args)
        argv += [image, "/bin/bash", str(script)]
        return argv

    def parse_submit(self, stdout: str) -> str:
        """The service id ``docker service create --quiet`` printed (the job id is the name: see parse_submit_for)."""
        return fmt.parse_service_create(stdout)

    def parse_submit_for(self, argv: Sequence[str], stdout: str) -> str:
        """The job id of a submission: the ``--name`` it was created with, once docker printed a service id.

        Raises:
            SchedulerOutputError: docker printed no service id.
        """
        fmt.parse_service_create(stdout)
        names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--name"]
        if not names:
            raise SchedulerOutputError("the submit command names no service")
        return names[-1]

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One ``docker service ps`` for every service (their finished tasks included)."""
        return ["docker", "service", "ps", "--no-trunc", "--format", "{{json .}}", "--", *self.check_job_ids(job_ids)]

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """One record per task slot (:func:`hpcjobs.schedulers.swarm.formats.job_statuses`)."""
        return fmt.parse_service_ps(stdout)

    def tolerable_status_error(self, stderr: str) -> bool:
        """``docker service ps`` exits 1 when some services are unknown, after listing the others' tasks."""
        return bool(fmt.unknown_services(stderr))

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``docker service scale S=0 ...``: stop every task of duplicate submissions (strays), in one call.

        Not ``docker service rm``: removing a job service leaves its tasks behind, running
        (https://github.com/moby/moby/issues/42789, seen on Docker 20.10). Scaling to 0 starts an empty
        iteration of the job, which stops and deletes the running tasks; the service stays, with
        its tag, so later lookups still see the stray (and the ledger records it as cancelled).
        """
        return ["docker", "service", "scale", "--detach", "--", *(f"{j}=0" for j in self.check_job_ids(job_ids))]

    def cancel_argvs(self, job_ids: Sequence[str]) -> list[list[str]]:
        """Cancel each service, keeping its finished tasks visible: one ``docker service update`` per service.

        Any update of a job service starts a new iteration of the job: Swarm stops its running
        tasks and deletes them, and keeps the finished ones. The new iteration is a single
        placeholder task that no node can take (:data:`hpcjobs.schedulers.swarm.formats.NEVER_PLACED`), whose
        image marks the service as cancelled for :func:`hpcjobs.schedulers.swarm.formats.job_statuses`.
        """
        return [["docker", "service", "update", "--detach", "--quiet", "--no-resolve-image",
                 "--image", fmt.CANCELLED_IMAGE,
                 "--constraint-add", fmt.NEVER_PLACED, "--label-add", "hpcjobs.cancelled=true", "--", job_id]
                for job_id in self.check_job_ids(job_ids)]

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """The services of experiment ``name`` (label ``hpcjobs.name``), each line prefixed with the name.

        ``docker service ls`` prints no labels; the tag is read back from the service name, whose
        sweep part is the experiment's name (the line's prefix) and the sweep hash. Swarm has no
        users: every service of the experiment is listed, whoever made it.
        """
        del user
        return [["docker", "service", "ls", "--filter", f"label=hpcjobs.name={name}",
                 "--format", name + "\t{{json .}}"]]

    def parse_tag_query(self, stdout: str) -> list[tuple[str, str]]:
        """``(service name, hpcjobs tag)`` of each service :meth:`tag_query_argvs` listed."""
        return fmt.parse_tagged_services(stdout)

    def settled_services(self, stdout: str) -> dict[str, list[str]]:
        """The services of a ``docker service ps`` answer that nothing of runs any more, with their task ids."""
        return fmt.settled_services(fmt.parse_tasks(stdout))

    def inspect_argv(self, object_ids: Sequence[str]) -> list[str]:
        """``docker inspect`` of services, tasks or containers (exit 1 when one is unknown, after the others)."""
        return ["docker", "inspect", "--", *self.check_object_ids(object_ids)]

    def retire_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``docker service rm`` of finished services (Swarm keeps a finished job until it is removed)."""
        return ["docker", "service", "rm", "--", *self.check_job_ids(job_ids)]

    def logs_argv(self, job_id: str) -> list[str]:
        """What the job's script printed before it sent its output to the point's files."""
        return ["docker", "service", "logs", "--raw", "--no-task-ids", "--", *self.check_job_ids([job_id])]

    # --- render hooks ---

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """``#SWARM`` lines (:func:`swarm_directives`)."""
        return swarm_directives(job)

    platform = "Docker Swarm"

    def declared_mounts(self, site: SiteConfig) -> dict[str, str]:
        """``swarm.mounts`` by target: ``--mount`` values."""
        return {m.target: m.argument() for m in (site.swarm.mounts if site.swarm else ())}

    # --- site hooks ---

    site_section = "swarm"
