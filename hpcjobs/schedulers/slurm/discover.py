"""Slurm site discovery: the commands ``site init`` runs and pure parsers of their output.

Sources (field names as the Slurm man pages spell them): ``scontrol show config``
(ClusterName, MaxArraySize, DefMemPerCPU), ``scontrol show partition -o`` (one partition a line:
MaxTime, DefaultTime, MaxNodes, TotalNodes, State, Default, AllowQos, OverSubscribe, DefMemPerCPU,
MaxMemPerNode), ``scontrol show node -o`` (CPUTot/CPUEfctv, RealMemory, MemSpecLimit, Gres,
Partitions); the user's associations and QOS (``sacctmgr``) are read by
:mod:`hpcjobs.schedulers.slurm.discover_qos`. See https://slurm.schedmd.com/scontrol.html.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcjobs.config.discover_model import DiscoveredPartition, DiscoveredSite, Sourced
from hpcjobs.units import format_walltime_slurm, is_ascii_digits, parse_memory, parse_walltime

CONFIG_ARGV = ["scontrol", "show", "config"]
PARTITION_ARGV = ["scontrol", "show", "partition", "-o"]
NODE_ARGV = ["scontrol", "show", "node", "-o"]

#: Values Slurm prints for "no limit" or "not set".
_NO_LIMIT = {"UNLIMITED", "INFINITE", "NONE", "N/A", "(NULL)", ""}
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_/:.]*=")


def memory_text(nbytes: int) -> str:
    """``nbytes`` in the largest unit that holds it exactly (``8G``, ``24105M``, ``24683792K``), never rounded up."""
    for suffix, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return f"{nbytes}B"


def parse_oneliner(line: str) -> dict[str, str]:
    """One ``scontrol show ... -o`` line → ``{key: value}``.

    A word without ``key=`` belongs to the value before it (``OS=Linux 6.1 #1 SMP``).
    """
    out: dict[str, str] = {}
    last: str | None = None
    for word in line.split():
        if _KEY_RE.match(word):
            key, value = word.split("=", 1)
            out[key] = value
            last = key
        elif last is not None:
            out[last] += " " + word
    return out


def parse_oneliners(text: str) -> list[dict[str, str]]:
    """Every non-blank line of ``scontrol show partition -o`` / ``show node -o`` parsed."""
    return [parse_oneliner(line) for line in text.splitlines() if "=" in line]


def slurm_time(text: str | None) -> int | None:
    """Seconds of a Slurm time limit (``1-00:00:00``, ``01:00:00``, ``30``), ``None`` for no limit.

    Raises:
        ValueError: Not a time Slurm prints.
    """
    t = (text or "").strip()
    if t.upper() in _NO_LIMIT:
        return None
    return parse_walltime(int(t) if is_ascii_digits(t) else t)


def slurm_count(text: str | None) -> int | None:
    """A whole number, ``None`` for ``UNLIMITED``/``NONE``/blank; also ``None`` for ``0`` (Slurm's "not set")."""
    t = (text or "").strip()
    if t.upper() in _NO_LIMIT or not is_ascii_digits(t):
        return None
    return int(t) or None


def slurm_megabytes(text: str | None) -> int | None:
    """Bytes of a Slurm memory field given in megabytes (``8192``, ``8192M``, ``8G``); ``None`` when unset or 0."""
    t = (text or "").strip().upper()
    m = re.fullmatch(r"(\d+)([MGT]?)", t)
    if not m or int(m[1]) == 0:
        return None
    return int(m[1]) * {"": 1024**2, "M": 1024**2, "G": 1024**3, "T": 1024**4}[m[2]]


@dataclass(frozen=True)
class GpuGres:
    """The GPUs of one node's ``Gres``: count per type (``""`` for untyped)."""

    per_type: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        """All GPUs of the node."""
        return sum(n for _t, n in self.per_type)

    @property
    def types(self) -> list[str]:
        """The named GPU types, sorted."""
        return sorted({t for t, _n in self.per_type if t})

    @property
    def usable(self) -> int:
        """GPUs one job can ask for with any one name: the total when untyped or one type, else the fewest of a type."""
        typed = {t: n for t, n in self.per_type if t}
        return min(typed.values()) if len(typed) > 1 else self.total


def parse_gres(text: str | None) -> GpuGres:
    """The GPUs in a Slurm ``Gres`` value: ``gpu:2``, ``gpu:a100:4(S:0-1)``, ``gpu:a100:2,gpu:v100:2,shard:8``.

    Other generic resources (``shard``, ``mps``) and ``(null)`` give no GPUs.
    """
    counts: dict[str, int] = {}
    # commas separate resources, except inside a socket list "(S:0,1)"
    for item in re.split(r",(?![^(]*\))", (text or "").strip()):
        parts = re.sub(r"\(.*\)$", "", item.strip()).split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count_text = parts[-1]
        m = re.fullmatch(r"(\d+)([KMG]?)", count_text)
        if not m:
            continue
        count = int(m[1]) * {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3}[m[2]]
        gtype = parts[1] if len(parts) >= 3 else ""
        counts[gtype] = counts.get(gtype, 0) + count
    return GpuGres(tuple(sorted(counts.items())))


@dataclass(frozen=True)
class NodeClass:
    """Nodes alike for a job: CPUs, memory a job can have, GPUs."""

    cpus: int | None
    memory: int | None
    gpus: GpuGres

    def label(self) -> str:
        """A short name for this class (``a100``, ``c64-m256G``)."""
        if self.gpus.types:
            return "-".join(self.gpus.types)
        mem = memory_text(self.memory) if self.memory else "m?"
        return f"c{self.cpus or '?'}-{mem}" + (f"-g{self.gpus.total}" if self.gpus.total else "")


def node_class(node: Mapping[str, str]) -> NodeClass:
    """The class of one ``scontrol show node -o`` record.

    CPUs are CPUEfctv (CPUTot less specialised cores), else CPUTot; memory is RealMemory minus MemSpecLimit.
    """
    cpus = slurm_count(node.get("CPUEfctv") or node.get("CPUTot"))
    real = slurm_megabytes(node.get("RealMemory"))
    spec = slurm_megabytes(node.get("MemSpecLimit")) or 0
    memory = real - spec if real and real > spec else real
    return NodeClass(cpus, memory, parse_gres(node.get("Gres")))


def _time_field(part: DiscoveredPartition, key: str, raw: str | None, source: str) -> None:
    try:
        seconds = slurm_time(raw)
    except ValueError:
        part.notes.append(f"{key}: left out, {source}={raw!r} is not a time")
        return
    if seconds is None:
        part.notes.append(f"{key}: left out, {source}={raw or 'unset'} (no limit)")
    else:
        part.fields[key] = Sourced(format_walltime_slurm(seconds), f"scontrol show partition -o: {source}={raw}")


def _class_fields(part: DiscoveredPartition, cls: NodeClass, nodes: int) -> None:
    src = "scontrol show node -o"
    if cls.cpus:
        part.fields["cpus_per_node"] = Sourced(cls.cpus, f"{src}: CPUEfctv/CPUTot ({nodes} node(s))")
    else:
        part.notes.append("cpus_per_node: left out, no node reports CPUTot")
    if cls.memory:
        part.fields["memory_per_node"] = Sourced(memory_text(cls.memory),
                                                 f"{src}: RealMemory - MemSpecLimit")
    else:
        part.notes.append("memory_per_node: left out, no node reports RealMemory")
    if cls.gpus.total:
        part.fields["gpus_per_node"] = Sourced(cls.gpus.usable, f"{src}: Gres")
    if cls.gpus.types:
        part.fields["gpu_types"] = Sourced(cls.gpus.types, f"{src}: Gres")


def _common(classes: Sequence[NodeClass]) -> NodeClass:
    """The smallest limits every class meets (a job fitting them runs on any node of the partition)."""
    cpus = [c.cpus for c in classes if c.cpus]
    mems = [c.memory for c in classes if c.memory]
    gpus = min(c.gpus.usable for c in classes)
    shared = set.intersection(*(set(c.gpus.types) for c in classes))
    per_type = tuple((t, gpus) for t in sorted(shared)) if gpus and len(shared) == 1 else (("", gpus),)
    return NodeClass(min(cpus) if len(cpus) == len(classes) else None,
                     min(mems) if len(mems) == len(classes) else None, GpuGres(per_type if gpus else ()))


def build_slurm_site(config_text: str, partition_text: str, node_text: str, *, name: str | None = None,
                     assoc_text: str | None = None, qos_text: str | None = None) -> DiscoveredSite:
    """A site from ``scontrol show config``, ``show partition -o`` and ``show node -o`` output.

    A partition whose nodes differ (CPUs, memory, GPUs) gets one entry with the limits all of them
    meet, plus one entry per node class (``<partition>-<class>``, ``scheduler_name: <partition>``).

    Args:
        config_text: ``scontrol show config`` output.
        partition_text: ``scontrol show partition -o`` output.
        node_text: ``scontrol show node -o`` output.
        name: The site's name (default: ClusterName).
        assoc_text: ``sacctmgr`` output of the user's associations
            (:func:`hpcjobs.schedulers.slurm.discover_qos.assoc_argv`); ``None`` when it could not be read.
        qos_text: ``sacctmgr show qos`` output (:data:`hpcjobs.schedulers.slurm.discover_qos.QOS_ARGV`).
    """
    config = _parse_config(config_text)
    cluster = config.get("ClusterName", "")
    site = DiscoveredSite(name=name or cluster or "slurm", scheduler="slurm", cluster=cluster)
    nodes_by_part: dict[str, list[NodeClass]] = {}
    features: dict[str, set[str]] = {}
    for node in parse_oneliners(node_text):
        for pname in (node.get("Partitions") or "").split(","):
            if pname:
                nodes_by_part.setdefault(pname, []).append(node_class(node))
                features.setdefault(pname, set()).update(
                    f for f in (node.get("AvailableFeatures") or "").split(",") if f and f != "(null)")
    for record in parse_oneliners(partition_text):
        pname = record.get("PartitionName", "")
        if not pname:
            continue
        if record.get("Default") == "YES":
            site.top["default_partition"] = Sourced(pname, "scontrol show partition -o: Default=YES")
        classes = nodes_by_part.get(pname, [])
        distinct = sorted(set(classes), key=lambda c: (c.gpus.total, c.cpus or 0, c.memory or 0))
        main = _partition_limits(pname, record, config)
        if not distinct:
            main.notes.append("node limits: left out, scontrol show node -o lists no node in this partition")
        elif len(distinct) == 1:
            _class_fields(main, distinct[0], len(classes))
        else:
            _class_fields(main, _common(distinct), len(classes))
            main.notes.append(f"{len(distinct)} node classes: the limits above are the smallest common ones")
        if features.get(pname):
            main.notes.append(f"node features {', '.join(sorted(features[pname]))} (scontrol show node -o: "
                              "AvailableFeatures): ask for one with directives: ['--constraint=<feature>']")
        site.partitions.append(main)
        if len(distinct) > 1:
            for cls in distinct:
                entry = _partition_limits(f"{pname}-{cls.label()}", record, config)
                entry.fields = {"scheduler_name": Sourced(pname, "one node class of this partition"),
                                **entry.fields}
                _class_fields(entry, cls, classes.count(cls))
                site.partitions.append(entry)
    size = slurm_count(config.get("MaxArraySize"))
    if size:
        site.limits["max_array_size"] = Sourced(size, f"scontrol show config: MaxArraySize={size}")
    else:
        site.notes.append("limits.max_array_size: left out, scontrol show config has no MaxArraySize")
    _config_notes(site, config)
    _accounting_limits(site, assoc_text, qos_text)
    site.notes.append("accounts, default_account: left out, they differ per user (sacctmgr show associations)")
    cap_memory(site, partition_text)
    return site


def _config_notes(site: DiscoveredSite, config: Mapping[str, str]) -> None:
    """What ``scontrol show config`` says that no site key holds: MaxJobCount, memory not consumable."""
    if slurm_count(config.get("MaxJobCount")):
        site.notes.append(f"MaxJobCount={config['MaxJobCount']} (scontrol show config): jobs of all users together,"
                          " not a per-user limit")
    params = config.get("SelectTypeParameters", "")
    if params and "MEMORY" not in params.upper():
        site.notes.append(f"SelectTypeParameters={params} (scontrol show config): memory is not a consumable "
                          "resource here, so Slurm does not enforce memory requests")


def _accounting_limits(site: DiscoveredSite, assoc_text: str | None, qos_text: str | None) -> None:
    """``limits.max_submitted_jobs`` and ``qos_limits`` from ``sacctmgr``, or notes saying why they are left out."""
    from hpcjobs.schedulers.slurm import discover_qos as qos

    if assoc_text is None or qos_text is None:
        site.notes.append("limits.max_submitted_jobs, qos_limits: left out, sacctmgr could not be read"
                          " (hpcjobs reads the submit limit again at submission)")
        return
    limit, source = qos.parse_submit_limits(assoc_text, qos_text)
    if limit:
        site.limits["max_submitted_jobs"] = Sourced(limit, source)
    else:
        site.notes.append("limits.max_submitted_jobs: left out, no MaxSubmit on the user's associations or"
                          " their default QOS (hpcjobs reads it again at submission)")
    qos.add_qos_limits(site, assoc_text, qos_text)


def _parse_config(text: str) -> dict[str, str]:
    from hpcjobs.schedulers.slurm.formats import parse_scontrol_show_config

    return parse_scontrol_show_config(text)


def _partition_limits(entry: str, rec: Mapping[str, str], config: Mapping[str, str]) -> DiscoveredPartition:
    src = "scontrol show partition -o"
    part = DiscoveredPartition(entry)
    state = rec.get("State", "")
    if state and state != "UP":
        part.fields["description"] = Sourced(f"State={state} at discovery", f"{src}: State")
    _time_field(part, "max_walltime", rec.get("MaxTime"), "MaxTime")
    _time_field(part, "default_walltime", rec.get("DefaultTime"), "DefaultTime")
    if "default_walltime" not in part.fields:
        part.notes[-1] += "; jobs that name none get MaxTime"
    max_nodes = slurm_count(rec.get("MaxNodes"))
    total = slurm_count(rec.get("TotalNodes"))
    if max_nodes is not None:
        part.fields["max_nodes"] = Sourced(max_nodes, f"{src}: MaxNodes")
    elif total is not None:
        part.fields["max_nodes"] = Sourced(total, f"{src}: TotalNodes (MaxNodes={rec.get('MaxNodes')})")
    else:
        part.notes.append("max_nodes: left out, MaxNodes and TotalNodes unreadable")
    max_mem = slurm_megabytes(rec.get("MaxMemPerNode"))
    if max_mem:
        part.notes.append(f"MaxMemPerNode={rec.get('MaxMemPerNode')}: memory_per_node is capped by it")
    defmem, defsrc = rec.get("DefMemPerCPU"), f"{src}: DefMemPerCPU"
    if not slurm_megabytes(defmem):
        defmem, defsrc = config.get("DefMemPerCPU"), "scontrol show config: DefMemPerCPU"
    if slurm_megabytes(defmem):
        part.fields["default_memory_per_cpu"] = Sourced(memory_text(slurm_megabytes(defmem) or 0),
                                                        f"{defsrc}={defmem}")
    qos = rec.get("AllowQos", "ALL")
    if qos and qos != "ALL":
        part.fields["qos"] = Sourced([q for q in qos.split(",") if q], f"{src}: AllowQos")
    if rec.get("OverSubscribe", "").startswith("EXCLUSIVE"):
        part.fields["exclusive"] = Sourced(True, f"{src}: OverSubscribe={rec.get('OverSubscribe')}")
    accounts = rec.get("AllowAccounts", "ALL")
    if accounts and accounts != "ALL":
        part.notes.append(f"AllowAccounts={accounts}")
    weights = rec.get("TRESBillingWeights", "")
    if weights and weights != "(null)":
        part.fields["tres_billing_weights"] = Sourced(weights, f"{src}: TRESBillingWeights")
    return part


def cap_memory(site: DiscoveredSite, partition_text: str) -> None:
    """Lower each partition's ``memory_per_node`` to its ``MaxMemPerNode`` where that is smaller."""
    caps = {r.get("PartitionName", ""): slurm_megabytes(r.get("MaxMemPerNode"))
            for r in parse_oneliners(partition_text)}
    for part in site.partitions:
        pname = part.fields["scheduler_name"].value if "scheduler_name" in part.fields else part.name
        cap, mem = caps.get(pname), part.fields.get("memory_per_node")
        if cap and mem is not None and cap < parse_memory(mem.value):
            part.fields["memory_per_node"] = Sourced(memory_text(cap), "scontrol show partition -o: MaxMemPerNode")
