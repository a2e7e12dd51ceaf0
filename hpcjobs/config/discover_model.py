"""A site discovered from a live scheduler: every value with the command and field it came from.

The scheduler-specific parsers (:mod:`hpcjobs.schedulers.slurm.discover`,
:mod:`hpcjobs.schedulers.pbs.discover`) build a :class:`DiscoveredSite`; this module turns it into
the plain document the site schema validates and into commented YAML for ``hpcjobs site init``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hpcjobs.process import CommandResult

#: Seconds one discovery command may take.
DISCOVERY_TIMEOUT_S = 60.0

#: Words YAML 1.1 reads as booleans or null: partition names spelled so are quoted.
_YAML_SPECIAL = {"y", "n", "yes", "no", "true", "false", "on", "off", "null", "~"}
_BARE_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Probe:
    """A scheduler that answered on this machine: its family and cluster (server) name."""

    scheduler: str
    cluster: str


class DiscoveryRun(Protocol):
    """How a backend's discovery hooks run a command (:mod:`hpcjobs.sites.discover` hands them one).

    ``argv[0]`` is the executable the backend chose (PBS's own ``qstat``, not Slurm's wrapper);
    ``check``: a non-zero exit raises :class:`~hpcjobs.errors.CommandError`.
    """

    def __call__(self, argv: Sequence[str], *, timeout: float = DISCOVERY_TIMEOUT_S,
                 check: bool = True) -> CommandResult: ...


@dataclass(frozen=True)
class Sourced:
    """A value for the site file and where it came from (``"scontrol show partition -o: MaxTime"``)."""

    value: Any
    source: str


@dataclass
class DiscoveredPartition:
    """One partition (or queue, or node class of one) as the scheduler reports it.

    Attributes:
        name: The entry's key in the site file.
        fields: Site-schema keys of :class:`~hpcjobs.config.site.Partition` with their values.
        notes: Why a field was left out ("MaxNodes=UNLIMITED and TotalNodes unreadable").
    """

    name: str
    fields: dict[str, Sourced] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class DiscoveredSite:
    """Everything ``site init`` learnt from the scheduler.

    Attributes:
        name: The site's name (the cluster's, unless the user chose one).
        scheduler: ``slurm``, ``pbspro`` or ``torque``.
        cluster: The cluster or server name the scheduler reports.
        top: Top-level site keys (``default_partition``) with their values.
        limits: ``limits:`` keys with their values.
        partitions: The partitions, in the scheduler's order.
        qos: ``qos_limits`` entries: QOS name → site-schema keys of
            :class:`~hpcjobs.config.site.QosLimits` with their values (Slurm).
        notes: Values left out on purpose, with the reason.
        remote: ``remote:`` keys with their values, when the scheduler was read over SSH (``--remote``).
    """

    name: str
    scheduler: str
    cluster: str
    top: dict[str, Sourced] = field(default_factory=dict)
    limits: dict[str, Sourced] = field(default_factory=dict)
    partitions: list[DiscoveredPartition] = field(default_factory=list)
    qos: dict[str, dict[str, Sourced]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    remote: dict[str, Sourced] = field(default_factory=dict)

    def partition(self, name: str) -> DiscoveredPartition | None:
        """The partition entry called ``name``, if any."""
        return next((p for p in self.partitions if p.name == name), None)

    def document(self) -> dict[str, Any]:
        """The site as the plain mapping the site schema validates (no sources)."""
        doc: dict[str, Any] = {"name": self.name, "scheduler": self.scheduler,
                               "detect": {"cluster_names": [self.cluster]} if self.cluster else {}}
        doc.update({k: v.value for k, v in self.top.items()})
        if self.limits:
            doc["limits"] = {k: v.value for k, v in self.limits.items()}
        doc["partitions"] = {p.name: {k: v.value for k, v in p.fields.items()} for p in self.partitions}
        if self.qos:
            doc["qos_limits"] = {q: {k: v.value for k, v in f.items()} for q, f in self.qos.items()}
        if self.remote:
            doc["remote"] = {k: v.value for k, v in self.remote.items()}
        return doc


def yaml_scalar(value: Any) -> str:
    """``value`` as a YAML flow scalar or flow list (strings always double-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_scalar(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def yaml_key(key: str) -> str:
    """``key`` bare when YAML reads it back as the same string, else double-quoted."""
    if _BARE_KEY_RE.fullmatch(key) and key.lower() not in _YAML_SPECIAL:
        return key
    return json.dumps(key, ensure_ascii=False)


def _comment(text: str) -> str:
    return " ".join(text.split())  # one line: a newline in scheduler output must not end the comment


def _entry(indent: str, key: str, item: Sourced) -> str:
    return f"{indent}{yaml_key(key)}: {yaml_scalar(item.value)}  # {_comment(item.source)}"


def render_site_yaml(site: DiscoveredSite, header: list[str]) -> str:
    """The site as commented YAML: each value followed by the command and field it came from.

    Args:
        site: What discovery found.
        header: Comment lines for the top of the file (without ``#``).
    """
    lines = [f"# {_comment(h)}" for h in header]
    lines += [f"name: {yaml_scalar(site.name)}", f"scheduler: {yaml_scalar(site.scheduler)}"]
    if site.cluster:
        lines += ["detect:", f"  cluster_names: [{yaml_scalar(site.cluster)}]"]
    if site.remote:
        lines.append("remote:")
        lines += [_entry("  ", k, v) for k, v in site.remote.items()]
    lines += [_entry("", k, v) for k, v in site.top.items()]
    lines += [f"# {_comment(n)}" for n in site.notes]
    if site.limits:
        lines.append("limits:")
        lines += [_entry("  ", k, v) for k, v in site.limits.items()]
    lines.append("partitions:" + ("" if site.partitions else " {}"))
    for part in site.partitions:
        lines.append(f"  {yaml_key(part.name)}:" + ("" if part.fields else " {}"))
        lines += [_entry("    ", k, v) for k, v in part.fields.items()]
        lines += [f"    # {_comment(n)}" for n in part.notes]
    if site.qos:
        lines.append("qos_limits:")
        for qname, fields in site.qos.items():
            lines.append(f"  {yaml_key(qname)}:")
            lines += [_entry("    ", k, v) for k, v in fields.items()]
    return "\n".join(lines) + "\n"
