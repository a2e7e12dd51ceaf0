"""What a job runs in: the experiment's ``container:`` key, the site's ``containers:`` section, and their checks.

The experiment says which image the job runs in, which host folders it sees, where it starts and
which variables pass in; the site says which runtimes exist on its nodes, the module each needs,
its GPU flags, default mounts and the host folders a job may mount. :func:`container_problems`
checks one against the other (before anything is written or submitted); :func:`resolve_container`
gives the :class:`ResolvedContainer` the renderer (:mod:`hpcjobs.containers`) turns into shell words.

Every value is checked here for its characters, so a hostile value is refused at its file and line
by the schema: no control character, no whitespace, no shell metacharacter, no leading ``-`` (an
option to the runtime). The renderer still writes every value through the one shell encoder.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from hpcjobs.config.policy import looks_like_secret
from hpcjobs.config.types import EnvName, OneLine, StrictModel

__all__ = ["CONTAINER_RUNTIMES", "PULLED_FILE_SUFFIX", "PULL_TARGET", "ContainerSpec", "Mount", "Raw",
           "ResolvedContainer", "SiteContainers", "SiteRuntime", "Word", "container_problems", "is_registry_image",
           "parse_mount", "path_word", "pulled_image_path", "resolve_container"]

#: Every runtime hpcjobs renders; which of them a job may use is the site's list and its scheduler's.
CONTAINER_RUNTIMES: tuple[str, ...] = ("apptainer", "singularity", "pyxis", "podman", "oci")
RuntimeName = Literal["apptainer", "singularity", "pyxis", "podman", "oci"]

#: An image reference or path: registry names, tags, digests, ``docker://``, ``.sif``/``.sqsh`` paths.
_IMAGE = re.compile(r"[A-Za-z0-9._/:@#+=,~-]+", re.ASCII)
#: One path of a mount: absolute, or ``~/...`` (the job's home directory) for a source.
_PATH_PART = re.compile(r"[A-Za-z0-9._/+@%=~-]+", re.ASCII)
#: A runtime flag a site gives (``--nv``, ``--device``, ``nvidia.com/gpu=all``).
_FLAG = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9._/:=,+-]*", re.ASCII)


@dataclass(frozen=True)
class Raw:
    """A shell text hpcjobs writes itself (``"$PWD"``): built only from constants in hpcjobs' code, never a value."""

    text: str


#: The file a ``pull: submit`` fetch command writes (a fresh folder of the image cache; hpcjobs renames it into place).
PULL_TARGET = Raw('"$hpcjobs_pull_tmp"')

#: One shell word: literal pieces (each written through the shell encoder) and :class:`Raw` expansions, joined.
Word = tuple[str | Raw, ...]


def path_word(path: str) -> Word:
    """A path as a :data:`Word` whose leading ``~`` (``~`` or ``~/...``) is the job's home folder, ``"$HOME"``."""
    return (Raw('"$HOME"'), path[1:]) if path == "~" or path.startswith("~/") else (path,)


def _image(value: str) -> str:
    if not _IMAGE.fullmatch(value):
        raise ValueError(f"{value!r}: an image is a registry reference or a path of letters, digits and "
                         "._/:@#+=,~- (no spaces, quotes, control or shell characters)")
    if value.startswith("-"):
        raise ValueError(f"{value!r}: an image cannot start with '-' (the runtime would read an option)")
    return value


def _abs_path(value: str, *, home: bool) -> str:
    if not _PATH_PART.fullmatch(value) or value.startswith("-"):
        raise ValueError(f"{value!r}: a container path is letters, digits and ._/+@%=~- only (no spaces, "
                         "quotes, commas, colons, control or shell characters)")
    if not (value.startswith("/") or (home and (value == "~" or value.startswith("~/")))):
        raise ValueError(f"{value!r}: give an absolute path" + (" (or ~/...)" if home else ""))
    if ".." in value.split("/"):
        raise ValueError(f"{value!r}: a container path cannot contain '..'")
    return value


@dataclass(frozen=True)
class Mount:
    """A host folder the container sees: ``source`` (absolute or ``~/``), ``target`` inside, read-only or not."""

    source: str
    target: str
    read_only: bool = False


def parse_mount(value: str) -> Mount:
    """``SRC[:DST[:ro|rw]]`` (``$HOME/`` or ``~/`` at the start of SRC is the job's home) as a :class:`Mount`.

    Raises:
        ValueError: Not that form, or a path with characters a container path cannot hold.
    """
    if not isinstance(value, str):
        raise ValueError(f"{value!r}: a mount is a string SRC[:DST[:ro|rw]]")
    text = "~" + value[len("$HOME"):] if value == "$HOME" or value.startswith("$HOME/") else value
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"{value!r}: a mount is SRC[:DST[:ro|rw]]")
    mode = parts[2] if len(parts) == 3 else "rw"
    if mode not in ("ro", "rw"):
        raise ValueError(f"{value!r}: a mount's options are ro or rw, not {mode!r}")
    source = _abs_path(parts[0], home=True)
    target = _abs_path(parts[1], home=False) if len(parts) > 1 else (source if source.startswith("/") else "")
    if not target:
        raise ValueError(f"{value!r}: a mount of a home folder names where the container sees it (SRC:DST)")
    return Mount(source, target, mode == "ro")


def _mount_text(value: object) -> object:
    if isinstance(value, str):
        parse_mount(value)
    return value


def _flag(value: str) -> str:
    if not _FLAG.fullmatch(value):
        raise ValueError(f"{value!r}: a runtime flag is one word of letters, digits and ._/:=,+- only")
    return value


ImageRef = Annotated[str, AfterValidator(_image)]
MountText = Annotated[str, BeforeValidator(_mount_text)]
ContainerPath = Annotated[str, AfterValidator(lambda v: _abs_path(v, home=False))]
RootPath = Annotated[str, AfterValidator(lambda v: _abs_path(v, home=True))]
RuntimeFlag = Annotated[str, AfterValidator(_flag)]


class ContainerSpec(StrictModel):
    """The experiment's ``container:``: the image its body (or each launcher) runs in."""

    image: ImageRef = Field(description="docker://registry/name:tag, a .sif or .sqsh file, or an OCI bundle folder.")
    mounts: list[MountText] = Field(
        default_factory=list, description="Host folders the container sees: /scratch, ~/data:/data:ro, "
        "$HOME/data:/data:ro (SRC[:DST[:ro|rw]]), beside the site's default mounts.")
    workdir: ContainerPath | None = Field(None, description="Where the program starts inside the container.")
    env: Literal["inherit"] | list[EnvName] = Field(
        "inherit", description="inherit: the job's whole environment passes in; or a list of the names that "
        "pass in (the job's own variables, HPCJOBS_* and its secrets always do).")
    runtime: Literal["auto", "apptainer", "singularity", "pyxis", "podman", "oci"] = Field(
        "auto", description="auto: the site's default; else one of the site's runtimes.")

    @model_validator(mode="after")
    def _env_names(self) -> ContainerSpec:
        if isinstance(self.env, list):
            secret = [n for n in self.env if looks_like_secret(n)]
            if secret:
                raise ValueError(f"env {', '.join(secret)}: looks like a credential; give it as a `secrets:` "
                                 "entry (read at run time; it reaches the container without being written)")
        return self


class SiteRuntime(StrictModel):
    """One container runtime a site's nodes have."""

    module: OneLine | None = Field(None, description="Module loaded before the runtime is used.")
    gpu_flags: list[RuntimeFlag] | None = Field(
        None, description="Words that give a GPU job its GPUs (default: apptainer/singularity --nv, podman "
        "--device nvidia.com/gpu=all, pyxis and oci none: the node's container hooks do it).")


class SiteContainers(StrictModel):
    """The site's ``containers:``: which runtimes exist, their modules and GPU flags, and what a job may mount."""

    runtimes: dict[RuntimeName, SiteRuntime] = Field(description="The runtimes this site's nodes have.")
    default: RuntimeName | None = Field(None, description="The runtime of `runtime: auto` (default: the first).")
    mounts: list[MountText] = Field(default_factory=list, description="Mounts every container job gets.")
    allowed_roots: list[RootPath] = Field(
        default_factory=list, description="Host folders a job's own mounts must lie under (empty: any).")
    pull: Literal["job", "submit"] = Field(
        "job", description="job: each job's runtime fetches a registry image when it starts; submit: hpcjobs "
        "fetches it once, on the submitting machine, into image_cache before the first job is submitted "
        "(apptainer pull to a .sif, enroot import to a .sqsh, podman pull + save to an OCI archive), and the "
        "jobs run that file without reaching a registry. Image files and bundles are never fetched.")
    image_cache: RootPath = Field(
        "~/.cache/hpcjobs/images", description="Where `pull: submit` keeps the fetched images (one file per "
        "image and runtime, reused by later submissions): a folder the compute nodes see at the same path.")

    @model_validator(mode="after")
    def _default_listed(self) -> SiteContainers:
        if not self.runtimes:
            raise ValueError("containers.runtimes lists no runtime")
        if self.default is not None and self.default not in self.runtimes:
            raise ValueError(f"containers.default {self.default!r} is not in containers.runtimes "
                             f"({', '.join(self.runtimes)})")
        return self


_DEFAULT_GPU_FLAGS: dict[str, tuple[str, ...]] = {
    "apptainer": ("--nv",), "singularity": ("--nv",), "podman": ("--device", "nvidia.com/gpu=all"),
}


@dataclass(frozen=True)
class ResolvedContainer:
    """A job's container, every default applied: what the runtime argv builders read.

    ``pass_env`` is ``None`` for ``env: inherit``, else the names that pass in besides the job's own;
    ``job_env`` the job's own variables (its environment, params and secrets), which always pass.
    """

    runtime: str
    image: str
    mounts: tuple[Mount, ...]
    workdir: str | None
    pass_env: tuple[str, ...] | None
    job_env: tuple[str, ...]
    gpu_flags: tuple[str, ...]
    module: str | None
    #: ``pull: submit``: the registry reference hpcjobs fetches at submission into ``image`` (a file of
    #: the image cache); ``None``: the runtime runs ``image`` as given.
    pull_from: str | None = None


def _chosen_runtime(spec: ContainerSpec, site: SiteContainers) -> str:
    if spec.runtime != "auto":
        return spec.runtime
    return site.default or next(iter(site.runtimes))


def _under(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def container_problems(spec: ContainerSpec, site: SiteContainers | None, *, site_name: str, scheduler: str,
                       hosted: frozenset[str], launcher: str | None) -> list[tuple[str, str]]:
    """What stops ``spec`` from running on this site: ``(key under container., message)`` pairs.

    Args:
        spec: The experiment's ``container:``.
        site: The site's ``containers:`` (``None``: the site declares no runtime).
        site_name: For the messages.
        scheduler: The site's scheduler (for the messages only).
        hosted: The runtimes the site's scheduler can host (its backend's ``container_runtimes``).
        launcher: The job's launcher, if any.
    """
    offered = [r for r in (site.runtimes if site else ()) if r in hosted]
    if not offered:
        why = ("its scheduler runs no container runtime inside a job (where jobs are containers already, "
               "the site's image is the job's: set it in the site's scheduler section)" if not hosted
               else "its site file has no `containers:` section listing them")
        return [("runtime", f"site {site_name!r} ({scheduler}) offers no container runtime: {why}; "
                 f"runtimes this scheduler can host: {', '.join(sorted(hosted)) or 'none'}")]
    assert site is not None
    runtime = _chosen_runtime(spec, site)
    problems: list[tuple[str, str]] = []
    if runtime not in offered:
        problems.append(("runtime", f"runtime {runtime!r} is not available on site {site_name!r} ({scheduler}); "
                         f"choices: {', '.join(offered)}"))
    for i, text in enumerate(spec.mounts):
        mount = parse_mount(text)
        if site.allowed_roots and not any(_under(mount.source, root) for root in site.allowed_roots):
            problems.append((f"mounts.{i}", f"mount source {mount.source!r} is outside the folders site "
                             f"{site_name!r} lets a job mount; allowed roots: {', '.join(site.allowed_roots)}"))
    is_path = spec.image.startswith(("/", "~/"))
    if runtime == "oci" and (not is_path or spec.image.endswith((".sif", ".sqsh"))):
        problems.append(("image", f"runtime 'oci' (Slurm's --container) runs an OCI bundle folder; give its "
                         f"absolute path, not {spec.image!r}"))
    if runtime == "pyxis" and is_path and not spec.image.endswith(".sqsh"):
        problems.append(("image", f"runtime 'pyxis' runs registry images (docker://...) or enroot .sqsh files, "
                         f"not {spec.image!r}; choose apptainer or singularity for a .sif"))
    if runtime == "podman" and (is_path or spec.image.endswith((".sif", ".sqsh"))):
        problems.append(("image", f"runtime 'podman' runs registry images (docker://... or name:tag), not "
                         f"{spec.image!r}; choose apptainer or singularity (.sif, folders), pyxis (.sqsh) or oci "
                         "(bundle folders)"))
    if runtime == "oci" and (spec.mounts or spec.workdir):
        problems.append(("mounts" if spec.mounts else "workdir",
                         "runtime 'oci' (Slurm's --container) takes mounts and the working folder from the "
                         "bundle's config.json, not from hpcjobs; remove them or choose another runtime"))
    if launcher == "deepspeed":
        problems.append(("image", "launcher 'deepspeed' starts the other nodes itself (pdsh/ssh), which cannot "
                         "reach into the container; use torchrun, tf or mpi with a container"))
    return problems


#: The runtimes ``pull: submit`` fetches an image for, and the suffix of the file each makes.
PULLED_FILE_SUFFIX: dict[str, str] = {"apptainer": ".sif", "singularity": ".sif", "pyxis": ".sqsh", "podman": ".tar"}
#: Registry references a runtime fetches (``docker://``, ``oras://``, ...), as opposed to a file or a folder.
_FETCHED_SCHEMES = ("docker://", "oras://", "library://", "shub://")


def is_registry_image(image: str) -> bool:
    """Whether ``image`` names a registry image (fetched) rather than a file or folder (run as it is)."""
    if image.startswith(_FETCHED_SCHEMES):
        return True
    return not image.startswith(("/", "~/")) and "://" not in image and not image.endswith((".sif", ".sqsh"))


def pulled_image_path(image: str, runtime: str, cache: str) -> str:
    """The image cache's file for ``image`` fetched by ``runtime``: a readable name and a digest of both.

    The name keeps the reference's letters (``nvcr.io-nvidia-pytorch-24.05-py3``), like Nextflow's
    ``singularity.cacheDir``; the digest keeps two references that read the same apart.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", image.split("://", 1)[-1]).strip("-._")[:80] or "image"
    digest = hashlib.sha256(f"{runtime}\0{image}".encode()).hexdigest()[:12]
    return posixpath.join(cache.rstrip("/") or "/", f"{readable}-{digest}{PULLED_FILE_SUFFIX[runtime]}")


def resolve_container(spec: ContainerSpec, site: SiteContainers, *, job_env: tuple[str, ...],
                      gpus: bool) -> ResolvedContainer:
    """The :class:`ResolvedContainer` of ``spec`` on ``site`` (checked first by :func:`container_problems`)."""
    runtime = _chosen_runtime(spec, site)
    settings = site.runtimes[runtime]  # type: ignore[index]
    flags = settings.gpu_flags if settings.gpu_flags is not None else _DEFAULT_GPU_FLAGS.get(runtime, ())
    mounts = tuple(dict.fromkeys(parse_mount(m) for m in [*site.mounts, *spec.mounts]))
    image, pull_from = spec.image, None
    if site.pull == "submit" and runtime in PULLED_FILE_SUFFIX and is_registry_image(spec.image):
        image, pull_from = pulled_image_path(spec.image, runtime, site.image_cache), spec.image
    return ResolvedContainer(
        runtime=runtime, image=image, mounts=mounts, workdir=spec.workdir,
        pass_env=None if spec.env == "inherit" else tuple(spec.env), job_env=job_env,
        gpu_flags=tuple(flags) if gpus else (), module=settings.module, pull_from=pull_from)
