"""Site settings of the container schedulers: Docker Swarm (``swarm:``) and Kubernetes (``kubernetes:``).

A Swarm site runs every job as a ``replicated-job`` service (``docker service create --mode
replicated-job``): one service per sweep chunk, one task per point. What a job needs from the
cluster besides the script (the image, the mounts, where it may run, how GPUs are asked for) lives
here; the limits of the machines live in the site's ``partitions`` as for Slurm and PBS.

Every value here ends up as one argument of ``docker service create`` (never through a shell), and
mounts are written in the comma-separated ``--mount`` syntax, so paths may not contain a comma or a
quote (docker's CSV reader would split or unquote them).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PositiveInt, model_validator

from hpcjobs.config.mounts import mount_path
from hpcjobs.config.types import StrictModel

#: An image reference as docker parses it: ``[registry[:port]/]path[:tag][@digest]``, no spaces.
_IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
#: A Swarm placement constraint: ``node.labels.gpu==true``, ``node.role!=manager``, ``engine.labels.x==y``.
_CONSTRAINT_RE = re.compile(r"\s*(node|engine)\.[A-Za-z0-9_.-]+\s*(==|!=)\s*[^\s=!][^\x00-\x1f]*")
#: A generic resource kind (dockerd ``node-generic-resources``: ``NVIDIA-GPU=UUID1``).
_KIND_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_NETWORK_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _image(value: str) -> str:
    if not _IMAGE_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an image reference (e.g. 'registry.example.org/team/train:1.4')")
    return value


def _constraint(value: str) -> str:
    if not _CONSTRAINT_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a placement constraint (e.g. 'node.labels.gpu==true', "
                         "'node.role!=manager'; see `docker service create --constraint`)")
    return value.strip()


def _kind(value: str) -> str:
    if not _KIND_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a generic resource kind (e.g. 'NVIDIA-GPU')")
    return value


def _network(value: str) -> str:
    if not _NETWORK_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a network name")
    return value


ImageRef = Annotated[str, AfterValidator(_image)]
Constraint = Annotated[str, AfterValidator(_constraint)]
ResourceKind = Annotated[str, AfterValidator(_kind)]
NetworkName = Annotated[str, AfterValidator(_network)]
MountPath = Annotated[str, AfterValidator(mount_path)]


class ContainerMount(StrictModel):
    """A host folder (or a named volume) the job's container sees."""

    source: str = Field(description="Host path (type bind) or volume name (type volume).")
    target: MountPath = Field(description="Where the container sees it.")
    type: Literal["bind", "volume"] = "bind"
    readonly: bool = False

    @model_validator(mode="after")
    def _source(self) -> ContainerMount:
        if self.type == "bind":
            mount_path(self.source)
        elif not _NETWORK_RE.fullmatch(self.source):
            raise ValueError(f"{self.source!r} is not a volume name")
        return self

    def argument(self) -> str:
        """The ``--mount`` value: ``type=bind,source=/data,target=/data,readonly``."""
        text = f"type={self.type},source={self.source},target={self.target}"
        return text + (",readonly" if self.readonly else "")


class SwarmSettings(StrictModel):
    """How jobs run on a Docker Swarm: the ``docker service create`` options every job gets."""

    image: ImageRef = Field(description="The image every job runs in (the script is run with its /bin/bash).")
    resolve_image: bool = Field(
        True, description="Let the manager pin the image's digest from its registry at submission "
        "(false: --no-resolve-image, for images that exist only on the nodes).",
    )
    networks: list[NetworkName] = Field(default_factory=list, description="Networks the tasks join (--network).")
    constraints: list[Constraint] = Field(
        default_factory=list, description="Placement constraints of every job (--constraint), e.g. "
        "'node.labels.pool==batch'.",
    )
    gpu_resource: ResourceKind = Field(
        "NVIDIA-GPU", description="The generic resource GPUs are asked for as (--generic-resource KIND=N); the "
        "nodes advertise it with dockerd's node-generic-resources.",
    )
    mounts: list[ContainerMount] = Field(
        default_factory=list, description="Host folders or volumes every job sees (software, data).",
    )
    mount_run_folders: bool = Field(
        True, description="Bind-mount the submit directory and the sweep folder at the same paths, so the "
        "job starts where it was submitted and writes its point folders as on Slurm.",
    )
    run_as: Literal["submitter", "image"] = Field(
        "submitter", description="Run the job as the submitting user's uid:gid (files it writes are theirs), "
        "or as the image's user.",
    )
    max_parallel: PositiveInt | None = Field(
        None, description="At most this many tasks of one job run at once (--max-concurrent), whatever "
        "the sweep asks.",
    )
    init: bool = Field(True, description="Run an init process in each task (--init) so signals reach the script.")
    limit_resources: bool = Field(
        True, description="Limit each task to the CPUs and memory it asked for (--limit-cpu/--limit-memory) "
        "besides reserving them.",
    )


#: A Kubernetes name (DNS-1123 label): namespaces, priority classes, service accounts.
_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: A label key (``[prefix/]name``) or value as Kubernetes accepts them.
_LABEL_KEY_RE = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _dns_label(value: str) -> str:
    if not _DNS_LABEL_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes name (lower-case letters, digits and '-', at most 63)")
    return value


def _label_key(value: str) -> str:
    if not _LABEL_KEY_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes label key (e.g. 'nvidia.com/gpu.product')")
    return value


def _label_value(value: str) -> str:
    if not _LABEL_VALUE_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes label value")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]


class Toleration(StrictModel):
    """A pod toleration (``spec.tolerations``), e.g. of the taint on GPU nodes."""

    key: LabelKey | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class PodVolume(StrictModel):
    """A folder every job's pod sees: a node's folder (``hostPath``) or a claim (``persistentVolumeClaim``)."""

    host_path: MountPath | None = Field(None, description="A folder of the node (hostPath).")
    claim: DnsLabel | None = Field(None, description="A PersistentVolumeClaim of the namespace.")
    target: MountPath = Field(description="Where the container sees it.")
    readonly: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> PodVolume:
        if (self.host_path is None) == (self.claim is None):
            raise ValueError("a volume has exactly one of host_path and claim")
        return self


class KubernetesSettings(StrictModel):
    """How jobs run on a Kubernetes cluster: the ``batch/v1`` Job every chunk becomes."""

    namespace: DnsLabel = Field("default", description="The namespace of the Jobs.")
    image: ImageRef = Field(description="The image every job runs in (the script is run with its /bin/bash).")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Node labels every job's pods require (spec.nodeSelector).")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints the pods tolerate.")
    gpu_resource: LabelKey = Field(
        "nvidia.com/gpu", description="The extended resource GPUs are asked for as (requests and limits).")
    priority_class: DnsLabel | None = Field(None, description="spec.priorityClassName of the pods.")
    service_account: DnsLabel | None = Field(None, description="spec.serviceAccountName of the pods.")
    volumes: list[PodVolume] = Field(default_factory=list, description="Folders every job sees (software, data).")
    mount_run_folders: bool = Field(
        True, description="Mount the submit directory and the sweep folder at the same paths (hostPath: the "
        "nodes must see them, e.g. on a shared filesystem), so the job starts where it was submitted.",
    )
    run_as: Literal["submitter", "image"] = Field(
        "submitter", description="Run the pods as the submitting user's uid:gid (securityContext), or as the "
        "image's user.",
    )
    max_parallel: PositiveInt | None = Field(
        None, description="At most this many pods of one chunk run at once, whatever the sweep asks.")
    indexed_jobs: bool | None = Field(
        None, description="One Indexed Job per chunk (completionMode: Indexed with backoffLimitPerIndex, "
        "Kubernetes 1.29 and later) or, when false, one Job per point, labelled with its index, all created in "
        "one call. Unset: chosen at submission from the server's version (kubectl version -o json), one Job "
        "per point when the server does not answer.",
    )
