"""The argv of each container runtime, as pure functions of a :class:`~hpcjobs.config.container.ResolvedContainer`.

A builder returns :data:`~hpcjobs.config.container.Word` tuples (literal values and hpcjobs' own
``Raw`` expansions); :func:`encode_word` writes each literal through
:func:`hpcjobs.render.shellvalue.shell_word`, so a value is always one bash word. No builder writes a
variable's value into an argv: the job's variables and secrets reach the container through the
runtime's environment.

* Apptainer/Singularity, ``apptainer exec`` (https://apptainer.org/docs/user/main/cli/apptainer_exec.html):
  ``--bind SRC:DST[:ro]``, ``--pwd DIR``, ``--nv``; the host environment passes in unless
  ``--cleanenv``, after which only ``APPTAINERENV_NAME`` (``SINGULARITYENV_NAME``) variables set in the
  runtime's environment do, as ``NAME`` (https://apptainer.org/docs/user/main/environment_and_metadata.html).
* Podman, ``podman run --rm`` (https://docs.podman.io/en/latest/markdown/podman-run.1.html):
  ``--init`` (an init process as the container's PID 1 that forwards signals: conmon detaches the
  container from the job, so without it ``scancel``/``qdel`` stop only the ``podman run`` client and
  the container keeps running), ``--name`` (derived from the job id, array index, point and rank, so
  concurrent tasks never clash and a leftover container can be found and removed),
  ``--userns=keep-id`` (the job's user inside; only when the job's uid is not 0, decided at run time:
  rootful Podman refuses it, "keep-id is only supported in rootless mode"), ``--network=host`` (the
  node's interfaces, for a rendezvous), ``--volume``, ``--workdir``, ``--device nvidia.com/gpu=all``
  (CDI); ``--env NAME`` without a value takes the value from Podman's own environment, and
  ``--env 'PREFIX*'`` every variable of that prefix.
* Pyxis and Slurm's OCI ``--container`` are options of an ``srun`` step: the backend renders them
  (:meth:`~hpcjobs.schedulers.base.BaseBackend.container_step_options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcjobs.config.container import Raw, ResolvedContainer, Word, path_word
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.schedulers.registry import capabilities_of, get_backend, job_env_of

if TYPE_CHECKING:
    from hpcjobs.resolve import ResolvedJob

#: The job's submit folder, and in a sweep its sweep folder (the points' run folders): mounted at their own paths.
_PWD = Raw('"$PWD"')
_SWEEP_BIND = '${HPCJOBS_SWEEP_DIR:+"%s$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"}'
#: Variables every container gets besides the job's own: hpcjobs' run-time variables and the GPUs of a packed point.
_ALWAYS_PREFIXES = ("HPCJOBS_",)
_ALWAYS_NAMES = ("CUDA_VISIBLE_DEVICES",)
#: The variable the setup lines set to ``keep-id`` when the job's uid is not 0 (empty for root), and its use.
_PODMAN_USERNS_VAR = "HPCJOBS_PODMAN_USERNS"
_PODMAN_USERNS = Raw(f'${{{_PODMAN_USERNS_VAR}:+"--userns=${_PODMAN_USERNS_VAR}"}}')
#: The container's name, computed where it starts (a launcher's task, a packed point): the job id (``%s``:
#: the scheduler's variable, else the shell's pid), array index, point and rank, every other character as ``_``.
_PODMAN_NAME = (
    "\"$(printf 'hpcjobs-%%s-%%s-%%s-%%s' \"${%s:-$$}\" \"${%s:-0}\" \"${HPCJOBS_POINT_ID:-0}\" "
    "\"${HPCJOBS_TASK_RANK:-0}\" | tr -c 'a-zA-Z0-9_.-' _)\""
)


@dataclass(frozen=True)
class ContainerLines:
    """What a template writes for a job's container (every word already encoded).

    Attributes:
        runtime: The runtime's name (for the comment line).
        setup: Shell lines run before the program, in the shell that starts the runtime (module load,
            the environment an Apptainer ``--cleanenv`` passes).
        prefix: The words that run a command in the container where nothing else starts a step.
        step_options: Options of an ``srun`` step hpcjobs writes (launchers, packed points) that puts the
            step in the container: the scheduler's own runtimes; empty for the others.
        in_step: The words before the command inside such a step: ``prefix`` for an exec runtime, empty
            when the step is the container already.
        program: ``in_step`` as a program, for a launcher that execs it or passes it to ``srun``/``mpiexec``
            (no shell function: Podman's ``podman run`` rather than ``hpcjobs_podman_run``).
    """

    runtime: str
    setup: str
    prefix: str
    step_options: str
    in_step: str
    program: str


def encode_word(word: Word) -> str:
    """One bash word: each literal piece through :func:`~hpcjobs.render.shellvalue.shell_word`, ``Raw`` as written."""
    return "".join(p.text if isinstance(p, Raw) else shell_word(p) for p in word if p != "")


def _words(words: list[Word] | tuple[Word, ...]) -> str:
    return " ".join(encode_word(w) for w in words)


def _mount_word(source: str, target: str, read_only: bool) -> Word:
    return (*path_word(source), ":" + target + (":ro" if read_only else ""))


def _passed_names(container: ResolvedContainer) -> list[str]:
    names = [*container.job_env, *(container.pass_env or ()), *_ALWAYS_NAMES]
    return list(dict.fromkeys(names))


def apptainer_argv(container: ResolvedContainer) -> list[Word]:
    """``apptainer exec`` (or ``singularity exec``) with GPU flags, binds, working folder, image."""
    words: list[Word] = [(container.runtime,), ("exec",)]
    if container.pass_env is not None:
        words.append(("--cleanenv",))
    words += [(f,) for f in container.gpu_flags]
    for m in container.mounts:
        words += [("--bind",), _mount_word(m.source, m.target, m.read_only)]
    words.append((Raw(_SWEEP_BIND % "--bind="),))
    if container.workdir:
        words += [("--pwd",), (container.workdir,)]
    words.append(path_word(container.image))
    return words


def apptainer_env_lines(container: ResolvedContainer) -> list[str]:
    """With ``--cleanenv``: export ``APPTAINERENV_NAME`` for each passed name that is set.

    The values stay in the environment (the loop copies ``${!name}``); none is written into the script or an argv.
    """
    if container.pass_env is None:
        return []
    prefix = "APPTAINERENV_" if container.runtime == "apptainer" else "SINGULARITYENV_"
    names = " ".join(shell_word(n) for n in _passed_names(container))
    return [
        f"for hpcjobs_name in {names} $(compgen -e -X '!HPCJOBS_*'); do",
        f'    if [ -n "${{!hpcjobs_name+set}}" ]; then export "{prefix}$hpcjobs_name=${{!hpcjobs_name}}"; fi',
        "done",
    ]


def podman_setup_lines(stop_seconds: int = 10) -> list[str]:
    """The user namespace (:data:`_PODMAN_USERNS_VAR`: ``keep-id`` unless the job runs as root) and
    ``hpcjobs_podman_run``, which removes the container when the job is signalled (exported: tasks and
    points see both).

    The container is not a child of the job (conmon detaches it), and a ``podman run`` client that is
    still starting the container does not pass a signal on: measured, a cancel in the first seconds left
    the container running, its client reparented to PID 1, after the job had ended CANCELLED. So the client
    runs in the background of the shell that started it, and a TERM, INT or HUP of that shell removes
    the container itself (``podman rm -f``: TERM, then KILL after ``stop_seconds``) until the client has ended.
    A preemptible job whose signal is TERM gets its signal lead time there, to write its checkpoint.
    """
    return [
        "# keep-id maps the job's user into the container; rootful Podman refuses it",
        f"if [[ $(id -u) -ne 0 ]]; then {_PODMAN_USERNS_VAR}=keep-id; else {_PODMAN_USERNS_VAR}=; fi",
        f"export {_PODMAN_USERNS_VAR}",
        "# The container is not this job's child (conmon detaches it) and a `podman run` still starting passes no",
        "# signal on: a TERM, INT or HUP of this shell removes the container (TERM, KILL after "
        f"{stop_seconds} s).",
        "hpcjobs_podman_run() {  # hpcjobs_podman_run NAME ARGS...: podman run --name NAME ARGS...",
        "    local hpcjobs_ctr=$1 hpcjobs_ctr_pid='' hpcjobs_ctr_before=$! hpcjobs_ctr_rc=0 hpcjobs_ctr_traps",
        "    shift",
        "    hpcjobs_ctr_traps=$(trap -p TERM INT HUP)",
        "    # set before the client starts: a signal at any moment finds them",
        "    trap 'hpcjobs_podman_signalled 143' TERM",
        "    trap 'hpcjobs_podman_signalled 130' INT",
        "    trap 'hpcjobs_podman_signalled 129' HUP",
        '    podman run --name "$hpcjobs_ctr" "$@" &',
        "    hpcjobs_ctr_pid=$!",
        '    wait "$hpcjobs_ctr_pid" || hpcjobs_ctr_rc=$?',
        "    trap - TERM INT HUP",
        '    eval "$hpcjobs_ctr_traps"',
        '    return "$hpcjobs_ctr_rc"',
        "}",
        "# shellcheck disable=SC2317  # called by the traps above, with hpcjobs_podman_run's variables",
        "hpcjobs_podman_signalled() {  # hpcjobs_podman_signalled STATUS: remove the container, exit STATUS",
        "    local pid=$hpcjobs_ctr_pid",
        "    # between `podman run &` and the assignment, $! is the client already",
        '    if [ -z "$pid" ] && [ "$!" != "$hpcjobs_ctr_before" ]; then pid=$!; fi',
        '    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do',
        f'        podman rm -f -t {stop_seconds} "$hpcjobs_ctr" >/dev/null 2>&1 || sleep 1',
        "    done",
        '    podman rm -f -t 0 "$hpcjobs_ctr" >/dev/null 2>&1 || true',
        '    exit "$1"',
        "}",
        "export -f hpcjobs_podman_run hpcjobs_podman_signalled",
    ]


def podman_argv(container: ResolvedContainer, job_id_var: str, array_index_var: str, *,
                program: bool = False) -> list[Word]:
    """``podman run --rm --init`` named after the task, as the job's user, host network, GPUs, mounts, env names, image.

    The words call ``hpcjobs_podman_run`` (:func:`podman_setup_lines`), or with ``program`` the
    ``podman`` program itself, for a launcher that execs it (a shell function cannot be).

    Args:
        container: The job's container.
        job_id_var: The scheduler's variable of the job id (``SLURM_JOB_ID``).
        array_index_var: The scheduler's variable of the array index (``SLURM_ARRAY_TASK_ID``).
        program: Start with ``podman run --name NAME`` rather than ``hpcjobs_podman_run NAME``.
    """
    name = Raw(_PODMAN_NAME % (job_id_var, array_index_var))
    start: list[Word] = [("podman",), ("run",), ("--name",), (name,)] if program else [("hpcjobs_podman_run",), (name,)]
    words: list[Word] = [*start, ("--rm",), ("--init",), (_PODMAN_USERNS,), ("--network=host",)]
    words += [(f,) for f in container.gpu_flags]
    for m in container.mounts:
        words += [("--volume",), _mount_word(m.source, m.target, m.read_only)]
    words += [("--volume",), (_PWD, ":", _PWD), (Raw(_SWEEP_BIND % "--volume="),)]
    words += [("--workdir",), (container.workdir,) if container.workdir else (_PWD,)]
    for env_name in _passed_names(container):
        words += [("--env",), (env_name,)]
    for prefix in _ALWAYS_PREFIXES:
        words += [("--env",), (prefix + "*",)]
    if container.pull_from is not None:  # the OCI archive hpcjobs saved at submission
        words += [("--quiet",), ("oci-archive:", *path_word(container.image))]
    else:
        words.append(path_word(container.image.removeprefix("docker://")))
    return words


def pulled_image_check(container: ResolvedContainer) -> list[str]:
    """With ``pull: submit``: stop with a clear message when the fetched image file is not on this node."""
    if container.pull_from is None:
        return []
    image = encode_word(path_word(container.image))
    return [
        f"# The image was fetched at submission from {shell_word(container.pull_from)} (containers.pull: submit).",
        f"if [ ! -f {image} ]; then",
        f"    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the "
        f"nodes see)\\n' {image} \"$(hostname)\" >&2",
        "    exit 1",
        "fi",
    ]


def render_container(job: ResolvedJob) -> ContainerLines | None:
    """The encoded container lines of ``job``, or ``None`` when it runs in no container.

    Raises:
        UnencodableValueError: A value no bash word can hold (refused earlier by the schema).
    """
    container = job.container
    if container is None:
        return None
    setup = [f"module load {shell_word(container.module)}"] if container.module else []
    setup += pulled_image_check(container)
    if container.runtime in capabilities_of(job.scheduler).step_container_runtimes:
        backend = get_backend(job.scheduler)
        options = _words(backend.container_step_options(container))
        prefix = _words(backend.container_step_options(container, standalone=True))
        return ContainerLines(container.runtime, "\n".join(setup), prefix, options, "", "")
    if container.runtime == "podman":
        job_env = job_env_of(job.scheduler)
        launch = job.launch
        grace = launch.signal_seconds if launch is not None and launch.preemptible and launch.signal == "TERM" else 10
        setup += podman_setup_lines(grace)
        prefix = _words(podman_argv(container, job_env.job_id_var, job_env.array_index_var))
        program = _words(podman_argv(container, job_env.job_id_var, job_env.array_index_var, program=True))
        return ContainerLines(container.runtime, "\n".join(setup), prefix, "", prefix, program)
    setup += apptainer_env_lines(container)
    prefix = _words(apptainer_argv(container))
    return ContainerLines(container.runtime, "\n".join(setup), prefix, "", prefix, prefix)
