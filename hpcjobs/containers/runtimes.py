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
  ``--userns=keep-id`` (the job's user inside), ``--volume``, ``--workdir``, ``--device nvidia.com/gpu=all``
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
from hpcjobs.schedulers.registry import capabilities_of, get_backend

if TYPE_CHECKING:
    from hpcjobs.resolve import ResolvedJob

#: The job's submit folder, and in a sweep its sweep folder (the points' run folders): mounted at their own paths.
_PWD = Raw('"$PWD"')
_SWEEP_BIND = '${HPCJOBS_SWEEP_DIR:+"%s$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"}'
#: Variables every container gets besides the job's own: hpcjobs' run-time variables and the GPUs of a packed point.
_ALWAYS_PREFIXES = ("HPCJOBS_",)
_ALWAYS_NAMES = ("CUDA_VISIBLE_DEVICES",)


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
    """

    runtime: str
    setup: str
    prefix: str
    step_options: str
    in_step: str


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


def podman_argv(container: ResolvedContainer) -> list[Word]:
    """``podman run --rm`` as the job's user, host network (the rendezvous), GPUs, mounts, env names, image."""
    words: list[Word] = [("podman",), ("run",), ("--rm",), ("--userns=keep-id",), ("--network=host",)]
    words += [(f,) for f in container.gpu_flags]
    for m in container.mounts:
        words += [("--volume",), _mount_word(m.source, m.target, m.read_only)]
    words += [("--volume",), (_PWD, ":", _PWD), (Raw(_SWEEP_BIND % "--volume="),)]
    words += [("--workdir",), (container.workdir,) if container.workdir else (_PWD,)]
    for name in _passed_names(container):
        words += [("--env",), (name,)]
    for prefix in _ALWAYS_PREFIXES:
        words += [("--env",), (prefix + "*",)]
    image = container.image.removeprefix("docker://")
    words.append(path_word(image))
    return words


def render_container(job: ResolvedJob) -> ContainerLines | None:
    """The encoded container lines of ``job``, or ``None`` when it runs in no container.

    Raises:
        UnencodableValueError: A value no bash word can hold (refused earlier by the schema).
    """
    container = job.container
    if container is None:
        return None
    setup = [f"module load {shell_word(container.module)}"] if container.module else []
    if container.runtime in capabilities_of(job.scheduler).step_container_runtimes:
        backend = get_backend(job.scheduler)
        options = _words(backend.container_step_options(container))
        prefix = _words(backend.container_step_options(container, standalone=True))
        return ContainerLines(container.runtime, "\n".join(setup), prefix, options, "")
    if container.runtime == "podman":
        prefix = _words(podman_argv(container))
    else:
        setup += apptainer_env_lines(container)
        prefix = _words(apptainer_argv(container))
    return ContainerLines(container.runtime, "\n".join(setup), prefix, "", prefix)
