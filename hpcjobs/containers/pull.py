"""``pull: submit``: fetch a job's registry image once, on the submitting machine, before any job is queued.

A site whose nodes should not each reach a registry (a thousand array tasks pulling the same 10 GB
image, compute nodes without internet access, registry rate limits) says ``containers.pull: submit``.
hpcjobs then fetches the image into the site's ``image_cache`` before it submits the first job, and
every job runs that file (:func:`~hpcjobs.config.container.resolve_container` points the job at it):

* Apptainer/Singularity: ``apptainer pull FILE.sif REF``
  (https://apptainer.org/docs/user/main/cli/apptainer_pull.html), the job runs ``apptainer exec FILE.sif``;
* Pyxis: ``enroot import --output FILE.sqsh docker://[REGISTRY#]IMAGE`` (enroot's ``import`` command,
  https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md), the job runs ``--container-image=FILE.sqsh``;
  the scheduler backend writes it (Pyxis is Slurm's);
* Podman: ``podman pull REF`` unless the image is in the submitter's storage already, then
  ``podman save --format oci-archive --output FILE.tar REF``; the job runs ``podman run oci-archive:FILE.tar``
  (the ``oci-archive:`` transport of ``podman run``'s image argument).

The script runs through the process seam (:func:`hpcjobs.process.run_command`), so over SSH it runs on
the login node. It writes into a fresh temporary folder inside the cache and renames the finished
file into place, so a crash or a concurrent submission never leaves a half-written image under the
final name; an existing file is reused (delete it, or pin a digest, to fetch again). A cache folder or
image file that is a symbolic link is refused. Every value is one word of the shell encoder; the
runtime's output is kept for the error message and otherwise dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hpcjobs.config.container import PULL_TARGET, Raw, ResolvedContainer, Word, path_word
from hpcjobs.errors import CommandError, ContainerPullError
from hpcjobs.process import run_command
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.schedulers.registry import capabilities_of, get_backend

__all__ = ["PULL_TIMEOUT_S", "PulledImage", "pull_argv", "pull_command", "pull_images", "pull_script"]

#: Seconds one image may take to fetch and convert (an NGC PyTorch image is about 10 GB).
PULL_TIMEOUT_S = 3600.0
#: What the script prints last: reused or fetched, then the file's path on the submitting machine.
_DONE = "hpcjobs-pull:"


@dataclass(frozen=True)
class PulledImage:
    """One image ``pull: submit`` made ready: where from, which file, and whether it was fetched now."""

    reference: str
    runtime: str
    path: str
    fetched: bool


def _encode(words: Iterable[Word]) -> str:
    return " ".join("".join(p.text if isinstance(p, Raw) else shell_word(p) for p in w if p != "") for w in words)


def pull_command(container: ResolvedContainer, scheduler: str) -> list[str]:
    """The shell lines that fetch ``container.pull_from`` into the file
    :data:`~hpcjobs.config.container.PULL_TARGET` names, for its runtime.

    Raises:
        ValueError: The container is not pulled at submission.
    """
    ref = container.pull_from
    if ref is None:
        raise ValueError("this container's image is not pulled at submission")
    if container.runtime in capabilities_of(scheduler).step_container_runtimes:
        return [_encode(get_backend(scheduler).container_pull_command(container))]
    if container.runtime == "podman":
        name = ref.removeprefix("docker://")
        return [f"podman image exists {shell_word(name)} || podman pull --quiet {shell_word(name)} >&2",
                _encode([("podman",), ("save",), ("--quiet",), ("--format",), ("oci-archive",),
                         ("--output",), (PULL_TARGET,), (name,)])]
    return [_encode([(container.runtime,), ("pull",), (PULL_TARGET,), (ref,)]) + " >&2"]


def pull_script(container: ResolvedContainer, scheduler: str) -> str:
    """The bash script that makes ``container.image`` (a file of the cache) from ``container.pull_from``.

    It prints ``hpcjobs-pull: reused|fetched PATH`` last; it exits 3 when the cache folder or the
    image file is a symbolic link, and with the runtime's status when the fetch fails.
    """
    target = _encode([path_word(container.image)])
    module = [f"module load {shell_word(container.module)}"] if container.module else []
    return "\n".join([
        "set -euo pipefail",
        f"hpcjobs_pull_target={target}",
        'hpcjobs_pull_dir=${hpcjobs_pull_target%/*}',
        'mkdir -p -- "$hpcjobs_pull_dir"',
        'if [ -L "$hpcjobs_pull_dir" ] || [ -L "$hpcjobs_pull_target" ]; then',
        '    echo "hpcjobs: the image cache $hpcjobs_pull_dir or its file is a symbolic link;'
        ' not writing through it" >&2',
        "    exit 3",
        "fi",
        'if [ -f "$hpcjobs_pull_target" ]; then',
        f'    echo "{_DONE} reused $hpcjobs_pull_target"',
        "    exit 0",
        "fi",
        *module,
        'hpcjobs_pull_folder=$(mktemp -d "$hpcjobs_pull_dir/.pulling.XXXXXXXX")',
        "trap 'rm -rf -- \"$hpcjobs_pull_folder\"' EXIT",
        'hpcjobs_pull_tmp=$hpcjobs_pull_folder/image',
        *pull_command(container, scheduler),
        'mv -f -T -- "$hpcjobs_pull_tmp" "$hpcjobs_pull_target"',
        f'echo "{_DONE} fetched $hpcjobs_pull_target"',
    ]) + "\n"


def pull_argv(container: ResolvedContainer, scheduler: str) -> list[str]:
    """``bash [--login] -c SCRIPT``: a login shell when the runtime needs a module (``module`` is defined there)."""
    login = ["--login"] if container.module else []
    return ["bash", *login, "-c", pull_script(container, scheduler), "hpcjobs-pull"]


def pull_images(containers: Sequence[ResolvedContainer], scheduler: str, *,
                timeout: float = PULL_TIMEOUT_S) -> list[PulledImage]:
    """Fetch every distinct image of ``containers`` pulled at submission (the others are skipped).

    Raises:
        ContainerPullError: A fetch failed or timed out (the command, its exit status and stderr);
            nothing was submitted.
    """
    done: list[PulledImage] = []
    seen: set[tuple[str, str]] = set()
    for container in containers:
        if container.pull_from is None or (container.runtime, container.image) in seen:
            continue
        seen.add((container.runtime, container.image))
        try:
            result = run_command(pull_argv(container, scheduler), timeout=timeout)
        except CommandError as exc:
            raise ContainerPullError(container.pull_from, container.runtime, container.image, exc) from exc
        last = [line for line in result.stdout.splitlines() if line.startswith(_DONE)]
        words = last[-1].split(" ", 2) if last else []
        if len(words) != 3:
            raise ContainerPullError(container.pull_from, container.runtime, container.image,
                                     CommandError(["bash", "-c", "<pull script>"], result.returncode,
                                                  result.stdout, result.stderr,
                                                  reason="the script ended without saying where the image is"))
        done.append(PulledImage(container.pull_from, container.runtime, words[2], words[1] == "fetched"))
    return done
