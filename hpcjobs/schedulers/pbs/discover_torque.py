"""Torque site discovery: the commands ``site init`` runs and pure parsers of their text output.

Formats, from Torque's own sources (github.com/adaptivecomputing/torque):

- ``qstat -Q -f`` / ``qstat -B -f`` (``src/cmds/qstat.c``, ``display_statque``/``display_statserver``):
  a ``Queue: <name>`` or ``Server: <name>`` line, then one ``    name[.resource] = value`` line per
  attribute (``prt_attr``: four spaces; a value longer than the line is broken after a comma with
  a newline and a TAB, and a single long token mid-token), a blank line after each block.
  ``qmgr -c "list server"`` prints the same attributes under ``Server <name>`` with TABs.
- ``pbsnodes -a``: the node name on a line of its own, then ``     attribute = value`` lines;
  ``status`` is a comma-separated ``key=value`` list (``physmem=131583152kb``, ``ncpus=40``).
- ``qstat --version`` writes ``Version: 6.1.2`` and ``Commit: <hash>`` to stderr (older releases a
  bare ``version: 2.5.12``); OpenPBS's ``qstat --version`` prints ``pbs_version = 23.06.06`` and
  Slurm's ``qstat`` wrapper (slurm-wlm-torque) refuses the option.

Attribute meanings: TORQUE Administrator Guide, "Queue attributes" (``resources_max.walltime``,
``.nodes``, ``.nodect``, ``.mem``, ``.ncpus``, ``resources_default.walltime``,
``resources_default.neednodes``, ``route_destinations``, ``max_user_queuable``), "Server parameters"
(``default_queue``, ``max_job_array_size``, ``max_user_queuable``) and "Mapping a queue to a subset
of resources" (``resources_default.neednodes = <property>`` sends the queue's jobs to nodes with
that property; without it any node serves the queue). Real samples: ``tests/data/torque/discover/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hpcjobs.config.discover_model import DiscoveredPartition, DiscoveredSite, Sourced
from hpcjobs.schedulers.pbs.discover import pbs_count, pbs_memory
from hpcjobs.schedulers.slurm.discover import GpuGres, NodeClass, memory_text
from hpcjobs.units import format_walltime_slurm, is_ascii_digits

QUEUE_ARGV = ["qstat", "-Q", "-f"]
NODE_ARGV = ["pbsnodes", "-a"]
SERVER_ARGV = ["qstat", "-B", "-f"]
VERSION_ARGV = ["qstat", "--version"]

QSRC = "qstat -Q -f"
NSRC = "pbsnodes -a"
SSRC = "qstat -B -f"

_HEADER_RE = re.compile(r"^(Queue|Server):?[ \t]+(\S+)[ \t]*$")
_ATTR_RE = re.compile(r"^[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*) =(?: (.*))?$")
_VERSION_RE = re.compile(r"^[ \t]*version:[ \t]*(\S+)", re.IGNORECASE | re.MULTILINE)
#: Node states whose node takes no job (pbsnodes(8B): a node can be in several, ``down,offline``).
_UNUSABLE_STATES = {"down", "offline", "unknown", "state-unknown"}
#: Values that mean "no limit" in hand-set attributes.
_NO_LIMIT = {"", "0", "unlimited", "infinite", "none"}


def parse_torque_version(text: str) -> str | None:
    """The release in ``qstat --version`` output (``Version: 6.1.2``), ``None`` when it is not Torque's."""
    m = _VERSION_RE.search(text or "")
    return m[1] if m else None


def _append(attrs: dict[str, list[str]], name: str | None, line: str) -> None:
    if name is None:
        return
    attrs[name].append(line[1:] if line.startswith("\t") else line.lstrip())


def parse_status_blocks(text: str) -> dict[str, dict[str, str]]:
    """``qstat -Q -f`` / ``qstat -B -f`` text → ``{queue or server name: {attribute: value}}``.

    ``resources_max.walltime`` keeps its dotted name. A line that is not ``name = value`` continues
    the value before it and is joined with no separator (a leading TAB is dropped), as ``prt_attr``
    wraps after a comma or inside a long token.
    """
    blocks: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    last: str | None = None
    for line in text.splitlines():
        header = _HEADER_RE.match(line)
        if header:
            current, last = blocks.setdefault(header[2], {}), None
            continue
        if current is None or not line.strip():
            continue
        attr = _ATTR_RE.match(line)
        if attr and not (line.startswith("\t") and last is not None and _continues(current[last])):
            last = attr[1]
            current[last] = [(attr[2] or "").rstrip()]
        elif line[:1] in (" ", "\t") and last is not None:
            _append(current, last, line.rstrip("\n"))
    return {name: {k: "".join(v) for k, v in attrs.items()} for name, attrs in blocks.items()}


def _continues(pieces: list[str]) -> bool:
    """Whether a value printed so far ends in a comma (so a TAB line after it is its continuation)."""
    return bool(pieces) and pieces[-1].endswith(",")


def parse_pbsnodes(text: str) -> dict[str, dict[str, str]]:
    """``pbsnodes -a`` text → ``{node: {attribute: value}}`` (``status`` kept as text, see :func:`parse_node_status`).

    A line at column 0 names a node; indented ``name = value`` lines are its attributes; any other
    indented line continues the value before it.
    """
    nodes: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    last: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0] not in (" ", "\t"):
            current, last = nodes.setdefault(line.strip(), {}), None
            continue
        if current is None:
            continue
        attr = _ATTR_RE.match(line)
        if attr:
            last = attr[1]
            current[last] = [(attr[2] or "").strip()]
        else:
            _append(current, last, line.rstrip())
    return {name: {k: "".join(v) for k, v in attrs.items()} for name, attrs in nodes.items()}


def parse_node_status(value: str | None) -> dict[str, str]:
    """A node's ``status`` (``opsys=linux,uname=Linux n1 ... x86_64,physmem=1025836kb,...``) → dict.

    A comma-separated piece without ``=`` belongs to the value before it.
    """
    out: dict[str, str] = {}
    last: str | None = None
    for piece in (value or "").split(","):
        key, sep, val = piece.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            last = key.strip()
            out[last] = val.strip()
        elif last is not None:
            out[last] += "," + piece
    return out


def torque_walltime(value: Any) -> int | None:
    """Seconds of a Torque time (``72:00:00``, ``1:00:00:00`` = a day, ``3600``), ``None`` when unset or unreadable.

    Torque reads ``[[[DD:]HH:]MM:]SS`` (an optional ``.fraction`` of a second is dropped); a bare
    number is seconds. ``0`` and ``UNLIMITED`` mean no limit.
    """
    text = str(value).strip() if value is not None else ""
    if text.lower() in _NO_LIMIT:
        return None
    parts = text.split(":")
    if len(parts) > 4:
        return None
    parts[-1] = parts[-1].split(".", 1)[0]
    if not all(is_ascii_digits(p) for p in parts):
        return None
    seconds = 0
    for part, factor in zip(reversed(parts), (1, 60, 3600, 86400), strict=False):
        seconds += int(part) * factor
    return seconds or None


def torque_node_count(value: Any) -> int | None:
    """The node count of a Torque node spec (``4``, ``4:ppn=8``, ``2:gpus=1+1``), ``None`` when it names no count."""
    text = str(value or "").strip()
    total = 0
    for chunk in text.split("+"):
        head = chunk.split(":", 1)[0].strip()
        if not is_ascii_digits(head):
            return None
        total += int(head)
    return total or None


def needed_properties(spec: str | None) -> list[str]:
    """Node properties a node spec asks for (``gpuQ``, ``1:ppn=4:gpu`` → ``gpu``); counts and ``key=value`` skipped."""
    props: list[str] = []
    for chunk in (spec or "").split("+"):
        for token in chunk.split(":"):
            token = token.strip()
            if token and not is_ascii_digits(token) and "=" not in token and token not in props:
                props.append(token)
    return props


def node_unusable(node: Mapping[str, str]) -> bool:
    """Whether a node's ``state`` says it takes no job now (``down``, ``offline``, ``state-unknown``)."""
    return bool({s.strip() for s in node.get("state", "").split(",")} & _UNUSABLE_STATES)


def node_class_torque(node: Mapping[str, str]) -> NodeClass:
    """The class of one ``pbsnodes -a`` node: ``np`` (job slots), ``status`` physmem, ``gpus``."""
    gpus = pbs_count(node.get("gpus")) or 0
    memory = pbs_memory(parse_node_status(node.get("status")).get("physmem"))
    return NodeClass(pbs_count(node.get("np")), memory, GpuGres((("", gpus),) if gpus else ()))


def _label(cls: NodeClass) -> str:
    return f"c{cls.cpus or '?'}" + (f"-g{cls.gpus.total}" if cls.gpus.total else "")


def _members(qname: str, queue: Mapping[str, str], nodes: Mapping[str, Mapping[str, str]],
             part: DiscoveredPartition) -> list[str]:
    """The nodes that run ``qname``'s jobs: those with every ``resources_default.neednodes`` property, else all."""
    spec = queue.get("resources_default.neednodes")
    wanted = [p for p in needed_properties(spec) if p not in nodes]
    named = [p for p in needed_properties(spec) if p in nodes]
    if not wanted and not named:
        return list(nodes)
    found = [n for n, attrs in nodes.items()
             if (not named or n in named)
             and set(wanted) <= {p.strip() for p in attrs.get("properties", "").split(",")}]
    part.notes.append(f"nodes: those with {QSRC}: resources_default.neednodes={spec} ({len(found)} found)")
    return found


def _walltime_fields(part: DiscoveredPartition, queue: Mapping[str, str]) -> None:
    seconds: dict[str, int | None] = {}
    for key, attr in (("max_walltime", "resources_max.walltime"), ("default_walltime", "resources_default.walltime")):
        raw = queue.get(attr)
        seconds[key] = torque_walltime(raw)
        if seconds[key]:
            part.fields[key] = Sourced(format_walltime_slurm(seconds[key] or 0), f"{QSRC}: {attr}={raw}")
        elif raw is None:
            part.notes.append(f"{key}: left out, {attr} is not set")
        else:
            part.notes.append(f"{key}: left out, {attr}={raw!r} is no limit Torque reads")
    low, high = seconds["default_walltime"], seconds["max_walltime"]
    if low and high and low > high:
        del part.fields["default_walltime"]
        part.notes.append("default_walltime: left out, resources_default.walltime is above resources_max.walltime")


def _node_fields(part: DiscoveredPartition, cls: NodeClass, count: int, queue: Mapping[str, str]) -> None:
    """cpus/memory/GPUs per node of one node class, capped by the queue's ``resources_max``."""
    cap_nodes = torque_node_count(queue.get("resources_max.nodes")) or pbs_count(queue.get("resources_max.nodect"))
    if cap_nodes:
        src = "resources_max.nodes" if torque_node_count(queue.get("resources_max.nodes")) else "resources_max.nodect"
        part.fields["max_nodes"] = Sourced(min(cap_nodes, count) if count else cap_nodes,
                                           f"{QSRC}: {src}" + (f" ({count} node(s) here)" if count < cap_nodes else ""))
    elif count:
        part.fields["max_nodes"] = Sourced(count, f"{NSRC}: nodes of this queue")
    if cls.cpus:
        part.fields["cpus_per_node"] = Sourced(cls.cpus, f"{NSRC}: np ({count} node(s))")
    else:
        part.notes.append("cpus_per_node: left out, not every node reports np")
    cap_mem = pbs_memory(queue.get("resources_max.mem"))
    mems = [m for m in (cls.memory, cap_mem) if m]
    if mems:
        src = f"{QSRC}: resources_max.mem" if min(mems) == cap_mem else f"{NSRC}: status physmem"
        part.fields["memory_per_node"] = Sourced(memory_text(min(mems)), src)
    else:
        part.notes.append("memory_per_node: left out, not every node reports physmem (status) and "
                          "resources_max.mem is not set")
    if cls.gpus.total:
        part.fields["gpus_per_node"] = Sourced(cls.gpus.total, f"{NSRC}: gpus")
    if queue.get("resources_max.ncpus"):
        part.notes.append(f"resources_max.ncpus={queue['resources_max.ncpus']} (a cap on -l ncpus requests)")


def _classes(names: Sequence[str], nodes: Mapping[str, Mapping[str, str]]) -> dict[tuple[int, int], list[NodeClass]]:
    """Nodes grouped by (np, gpus): jobs ask for ``nodes=N:ppn=P:gpus=G``, memory is the class's smallest."""
    groups: dict[tuple[int, int], list[NodeClass]] = {}
    for name in names:
        cls = node_class_torque(nodes[name])
        groups.setdefault((cls.cpus or 0, cls.gpus.total), []).append(cls)
    return groups


def _merged(classes: Sequence[NodeClass]) -> NodeClass:
    """The smallest CPUs, memory and GPUs of ``classes``: what a job can count on on any of them."""
    cpus = [c.cpus for c in classes if c.cpus]
    mems = [c.memory for c in classes if c.memory]
    gpus = min(c.gpus.total for c in classes) if classes else 0
    return NodeClass(min(cpus) if len(cpus) == len(classes) else None,
                     min(mems) if len(mems) == len(classes) else None, GpuGres((("", gpus),) if gpus else ()))


def _queue_entries(qname: str, queue: Mapping[str, str], nodes: Mapping[str, Mapping[str, str]]
                   ) -> list[DiscoveredPartition]:
    part = DiscoveredPartition(qname)
    if str(queue.get("queue_type", "")).lower().startswith("r"):
        part.fields["description"] = Sourced(f"route queue to {queue.get('route_destinations', '?')}",
                                             f"{QSRC}: route_destinations")
        _walltime_fields(part, queue)
        return [part]
    if queue.get("started", "True").lower() not in ("true", "1", "t", "y"):
        part.fields["description"] = Sourced("started=False at discovery: jobs queue but do not start",
                                             f"{QSRC}: started")
    _walltime_fields(part, queue)
    members = _members(qname, queue, nodes, part)
    usable = [n for n in members if not node_unusable(nodes[n])]
    if usable and len(usable) < len(members):
        part.notes.append(f"left out of the limits, down or offline at discovery: "
                          f"{', '.join(n for n in members if n not in usable)}")
        members = usable
    if not members:
        part.notes.append(f"node limits: left out, {NSRC} lists no node for this queue")
        return [part]
    groups = _classes(members, nodes)
    _node_fields(part, _merged([c for g in groups.values() for c in g]), len(members), queue)
    if queue.get("max_user_queuable"):
        part.notes.append(f"max_user_queuable={queue['max_user_queuable']} ({QSRC}: jobs one user may queue here)")
    if len(groups) == 1:
        return [part]
    part.notes.append(f"{len(groups)} node classes (np, gpus): the limits above are the smallest common ones")
    entries = [part]
    for key in sorted(groups, key=lambda k: (k[1], k[0])):
        cls = _merged(groups[key])
        entry = DiscoveredPartition(f"{qname}-{_label(cls)}")
        entry.fields["scheduler_name"] = Sourced(qname, "one node class of this queue")
        entry.fields.update({k: v for k, v in part.fields.items() if k in ("max_walltime", "default_walltime")})
        _node_fields(entry, cls, len(groups[key]), queue)
        entries.append(entry)
    return entries


def build_torque_site(queue_text: str, node_text: str, server_text: str, *, name: str | None = None) -> DiscoveredSite:
    """A site from ``qstat -Q -f``, ``pbsnodes -a`` and ``qstat -B -f`` (or ``qmgr -c "list server"``) text.

    A queue whose nodes differ in cores or GPUs gets one entry with the limits all of them meet,
    plus one entry per node class (``<queue>-c<np>[-g<gpus>]``, ``scheduler_name: <queue>``).
    Disabled queues are left out; nodes down or offline are left out of the limits when others remain.
    """
    servers = parse_status_blocks(server_text)
    cluster, server = next(iter(servers.items()), ("", {}))
    site = DiscoveredSite(name=name or cluster or "torque", scheduler="torque", cluster=cluster)
    queues = parse_status_blocks(queue_text)
    nodes = parse_pbsnodes(node_text)
    default_queue = server.get("default_queue")
    for qname, queue in queues.items():
        if queue.get("enabled", "True").lower() not in ("true", "1", "t", "y"):
            site.notes.append(f"queue {qname}: left out, enabled={queue.get('enabled')}")
            continue
        site.partitions.extend(_queue_entries(qname, queue, nodes))
    if default_queue and site.partition(default_queue):
        site.top["default_partition"] = Sourced(default_queue, f"{SSRC}: default_queue")
    for key, attr, what in (("max_array_size", "max_job_array_size", "the server sets no max_job_array_size"),
                            ("max_submitted_jobs", "max_user_queuable", "the server sets no max_user_queuable")):
        value = pbs_count(server.get(attr))
        if value:
            site.limits[key] = Sourced(value, f"{SSRC}: {attr}={value}")
        else:
            site.notes.append(f"limits.{key}: left out, {what}")
    gpu_names = sorted({m for n in nodes.values()
                        for m in re.findall(r"gpu_product_name=([^;,]+)", n.get("gpu_status", ""))})
    if gpu_names:
        site.notes.append(f"gpu_types: left out; {NSRC} gpu_status names {', '.join(gpu_names)}, but a Torque job "
                          "picks a GPU model only through a node property (nodes=1:ppn=1:gpus=1:<property>)")
    return site
