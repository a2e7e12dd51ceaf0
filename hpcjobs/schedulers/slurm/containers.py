"""The container runtimes Slurm starts in a job step: Pyxis (``srun --container-image``) and OCI (``--container``).

Pyxis (https://github.com/NVIDIA/pyxis, its README) is a SPANK plugin: ``srun --container-image=IMAGE``
runs the step's tasks in an enroot container of ``[USER@][REGISTRY#]IMAGE[:TAG]`` or a ``.sqsh``
file; ``--container-mounts=SRC:DST[:FLAGS][,...]``, ``--container-workdir=DIR`` and
``--container-env=NAME[,NAME...]`` (names whose value is taken from the host environment over the
image's). The task's environment is srun's, so the job's variables and secrets arrive without
being written into an argv.

Slurm's own OCI support (https://slurm.schedmd.com/containers.html, ``oci.conf``) runs a step in
the OCI bundle ``srun --container=PATH`` names; mounts and the working folder come from the
bundle's ``config.json``, the environment as ``oci.conf`` passes it.
"""

from __future__ import annotations

from hpcjobs.config.container import PULL_TARGET, Raw, ResolvedContainer, Word, path_word

#: The step that runs a command of the batch script (not a launcher's or packed point's step) in the container.
ONE_TASK_STEP: tuple[Word, ...] = (("srun",), ("--nodes=1",), ("--ntasks=1",))
#: The job's submit folder and, in a sweep, its sweep folder (the points' run folders), mounted at the same paths.
_RUN_FOLDERS = ('"$PWD":"$PWD"', '"${HPCJOBS_SWEEP_DIR:+,$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR}"')


def pyxis_image(image: str) -> str:
    """``docker://registry/name:tag`` as enroot names it (``registry#name:tag``); paths and plain names unchanged."""
    if not image.startswith("docker://"):
        return image
    ref = image[len("docker://"):]
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref


def pyxis_options(container: ResolvedContainer) -> tuple[Word, ...]:
    """``srun`` options of a Pyxis step: image, mounts (the run folders included), working folder, env names."""
    mounts: list[str | Raw] = []
    for m in container.mounts:
        mounts += [*path_word(m.source), f":{m.target}" + (":ro" if m.read_only else ""), ","]
    mounts += [Raw(_RUN_FOLDERS[0]), Raw(_RUN_FOLDERS[1])]
    words: list[Word] = [("--container-image=", *path_word(pyxis_image(container.image))),
                         ("--container-mounts=", *mounts)]
    words.append(("--container-workdir=" + container.workdir,) if container.workdir
                 else ("--container-workdir=", Raw('"$PWD"')))
    if container.pass_env:
        words.append(("--container-env=" + ",".join(container.pass_env),))
    return tuple(words)


def oci_options(container: ResolvedContainer) -> tuple[Word, ...]:
    """``srun`` options of a step in an OCI bundle (Slurm's ``--container``, set up by ``oci.conf``)."""
    return (("--container=", *path_word(container.image)),)


def pyxis_import(container: ResolvedContainer) -> tuple[Word, ...]:
    """``enroot import --output FILE docker://REF``: the image of ``pull: submit`` as a squashfs file Pyxis runs.

    enroot's URI is ``docker://[USER@][REGISTRY#]IMAGE[:TAG]`` (its ``import`` command's documentation).
    """
    assert container.pull_from is not None
    return (("enroot",), ("import",), ("--output",), (PULL_TARGET,), ("docker://" + pyxis_image(container.pull_from),))
