"""PBS Pro / OpenPBS site discovery: the commands ``site init`` runs and pure parsers of their JSON.

Sources (attribute names from the PBS Professional Reference Guide, "Queue Attributes",
"Server Attributes", "Vnode Attributes"): ``qstat -Q -f -F json`` (queue_type, resources_max.walltime,
.ncpus, .mem, .ngpus, .nodect, resources_default.walltime, route_destinations),
``pbsnodes -a -F json`` (resources_available.ncpus, .mem, .ngpus, queue) and ``qstat -B -f -F json``
(default_queue, max_array_size, max_queued) — the JSON form of what ``qmgr -c "list server"`` prints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hpcjobs.config.discover_model import DiscoveredPartition, DiscoveredSite, Sourced
from hpcjobs.schedulers.slurm.discover import GpuGres, NodeClass, memory_text
from hpcjobs.units import format_walltime_slurm, is_ascii_digits, parse_walltime

QUEUE_ARGV = ["qstat", "-Q", "-f", "-F", "json"]
NODE_ARGV = ["pbsnodes", "-a", "-F", "json"]
SERVER_ARGV = ["qstat", "-B", "-f", "-F", "json"]

_PBS_MEM_RE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)(b|w)?\s*$", re.IGNORECASE)


def pbs_memory(value: Any) -> int | None:
    """Bytes of a PBS size (``24683792kb``, ``16gb``, ``512mb``, ``0``); ``None`` when unset, 0 or unreadable.

    A size without unit is bytes; ``w`` (words) is taken as 8 bytes.
    """
    m = _PBS_MEM_RE.match(str(value)) if value is not None else None
    if not m:
        return None
    factor = 1024 ** "bkmgtp".index(m[2].lower() or "b") * (8 if (m[3] or "").lower() == "w" else 1)
    return int(m[1]) * factor or None


def pbs_walltime(value: Any) -> int | None:
    """Seconds of a PBS wall time (``02:00:00``, ``72:00:00``, ``3600``); ``None`` when unset or unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return int(text) if is_ascii_digits(text) and int(text) > 0 else parse_walltime(text)
    except ValueError:
        return None


def pbs_count(value: Any) -> int | None:
    """A positive whole number, else ``None``."""
    text = str(value).strip() if value is not None else ""
    return int(text) if is_ascii_digits(text) and int(text) > 0 else None


def generic_user_limit(value: Any) -> int | None:
    """N of ``[u:PBS_GENERIC=N]`` (a per-user limit such as ``max_queued``), else ``None``."""
    m = re.search(r"u:PBS_GENERIC=(\d+)", str(value or ""))
    return int(m[1]) if m and int(m[1]) > 0 else None


def node_class_pbs(node: Mapping[str, Any]) -> NodeClass:
    """The class of one ``pbsnodes -a -F json`` node: ``resources_available`` ncpus, mem, ngpus."""
    avail = node.get("resources_available") or {}
    gpus = pbs_count(avail.get("ngpus")) or 0
    gtype = str(avail.get("gpu_type") or "")
    return NodeClass(pbs_count(avail.get("ncpus")), pbs_memory(avail.get("mem")),
                     GpuGres(((gtype, gpus),) if gpus else ()))


def _cap(part: DiscoveredPartition, key: str, node_value: int | None, queue_value: int | None,
         qsrc: str, text: Any) -> None:
    """Set ``key`` to the smaller of the nodes' value and the queue's ``resources_max`` one."""
    values = [v for v in (node_value, queue_value) if v]
    if not values:
        part.notes.append(f"{key}: left out, neither pbsnodes nor {qsrc} gives it")
        return
    value = min(values)
    src = f"qstat -Q -f -F json: {qsrc}" if value == queue_value else "pbsnodes -a -F json: resources_available"
    part.fields[key] = Sourced(text(value), src)


def _queue_entry(qname: str, queue: Mapping[str, Any], nodes: list[NodeClass]) -> DiscoveredPartition:
    part = DiscoveredPartition(qname)
    rmax = queue.get("resources_max") or {}
    rdef = queue.get("resources_default") or {}
    if str(queue.get("queue_type", "")).lower().startswith("route"):
        dest = queue.get("route_destinations", "")
        part.fields["description"] = Sourced(f"route queue to {dest}", "qstat -Q -f -F json: route_destinations")
    for key, raw, src in (("max_walltime", rmax.get("walltime"), "resources_max.walltime"),
                          ("default_walltime", rdef.get("walltime"), "resources_default.walltime")):
        seconds = pbs_walltime(raw)
        if seconds:
            part.fields[key] = Sourced(format_walltime_slurm(seconds), f"qstat -Q -f -F json: {src}={raw}")
        else:
            part.notes.append(f"{key}: left out, {src} is not set")
    nodect = pbs_count(rmax.get("nodect"))
    if nodect or nodes:
        part.fields["max_nodes"] = Sourced(nodect or len(nodes), "qstat -Q -f -F json: resources_max.nodect"
                                           if nodect else "pbsnodes -a -F json: nodes of this queue")
    common = NodeClass(min((c.cpus for c in nodes if c.cpus), default=None),
                       min((c.memory for c in nodes if c.memory), default=None),
                       GpuGres((("", min(c.gpus.total for c in nodes)),)) if nodes else GpuGres(()))
    _cap(part, "cpus_per_node", common.cpus, pbs_count(rmax.get("ncpus")), "resources_max.ncpus", int)
    _cap(part, "memory_per_node", common.memory, pbs_memory(rmax.get("mem")), "resources_max.mem", memory_text)
    gpus: list[int] = [v for v in (common.gpus.total if nodes else None, pbs_count(rmax.get("ngpus")))
                       if v is not None]
    fewest = min(gpus) if gpus else 0
    if fewest:
        part.fields["gpus_per_node"] = Sourced(fewest, "pbsnodes -a -F json: resources_available.ngpus"
                                               if fewest != pbs_count(rmax.get("ngpus"))
                                               else "qstat -Q -f -F json: resources_max.ngpus")
    types = sorted({t for c in nodes for t in c.gpus.types})
    if types and "gpus_per_node" in part.fields:
        part.fields["gpu_types"] = Sourced(types, "pbsnodes -a -F json: resources_available.gpu_type")
    return part


def _class_key(cls: NodeClass) -> tuple[int, int, tuple[str, ...]]:
    return (cls.cpus or 0, cls.gpus.total, tuple(cls.gpus.types))


def _class_label(cls: NodeClass) -> str:
    if cls.gpus.types:
        return "-".join(cls.gpus.types)
    return f"c{cls.cpus or '?'}" + (f"-g{cls.gpus.total}" if cls.gpus.total else "")


def _queue_entries(qname: str, queue: Mapping[str, Any], nodes: list[NodeClass]) -> list[DiscoveredPartition]:
    """The queue's entry with the limits all its nodes meet, plus one entry per node class when they differ.

    Nodes are alike when their ncpus, ngpus and gpu_type are; a class's memory is its smallest
    (``resources_available.mem`` differs by a few kB between identical nodes).
    """
    main = _queue_entry(qname, queue, nodes)
    groups: dict[tuple[int, int, tuple[str, ...]], list[NodeClass]] = {}
    for cls in nodes:
        groups.setdefault(_class_key(cls), []).append(cls)
    if len(groups) < 2:
        return [main]
    main.notes.append(f"{len(groups)} node classes (ncpus, ngpus, gpu_type): the limits above are the smallest"
                      " common ones")
    entries = [main]
    for key in sorted(groups, key=lambda k: (k[1], k[0], k[2])):
        members = groups[key]
        entry = _queue_entry(qname, queue, members)
        entry.name = f"{qname}-{_class_label(members[0])}"
        entry.fields = {"scheduler_name": Sourced(qname, "one node class of this queue"), **entry.fields}
        entry.notes = [n for n in entry.notes if "left out" in n]
        entries.append(entry)
    return entries


def build_pbs_site(queue_json: Mapping[str, Any], node_json: Mapping[str, Any], server_json: Mapping[str, Any],
                   *, name: str | None = None) -> DiscoveredSite:
    """A site from parsed ``qstat -Q -f -F json``, ``pbsnodes -a -F json`` and ``qstat -B -f -F json``.

    A node whose ``queue`` attribute is set belongs to that queue only; the others serve every
    execution queue (PBS's own rule for vnodes without a queue).
    """
    servers: Mapping[str, Mapping[str, Any]] = server_json.get("Server") or {}
    server_name, server = next(iter(servers.items()), (str(queue_json.get("pbs_server", "")), {}))
    cluster = str(queue_json.get("pbs_server") or server_name or "")
    site = DiscoveredSite(name=name or cluster or "pbs", scheduler="pbspro", cluster=cluster)
    nodes = (node_json.get("nodes") or {}).values()
    queues = queue_json.get("Queue") or {}
    default_queue = server.get("default_queue")
    if default_queue in queues:
        site.top["default_partition"] = Sourced(default_queue, "qstat -B -f -F json: default_queue")
    for qname, queue in queues.items():
        is_route = str(queue.get("queue_type", "")).lower().startswith("route")
        if str(queue.get("enabled", "True")) != "True":
            site.notes.append(f"queue {qname}: left out, enabled=False")
            continue
        members = [] if is_route else [node_class_pbs(n) for n in nodes if n.get("queue") in (None, qname)]
        site.partitions.extend(_queue_entries(qname, queue, members))
    size = pbs_count(server.get("max_array_size"))
    if size:
        site.limits["max_array_size"] = Sourced(size, f"qstat -B -f -F json: max_array_size={size}")
    else:
        site.notes.append("limits.max_array_size: left out, the server sets no max_array_size")
    queued = generic_user_limit(server.get("max_queued"))
    if queued:
        site.limits["max_submitted_jobs"] = Sourced(queued, "qstat -B -f -F json: max_queued [u:PBS_GENERIC]")
    else:
        site.notes.append("limits.max_submitted_jobs: left out, the server sets no max_queued per user")
    return site
