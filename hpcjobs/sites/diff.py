"""``hpcjobs site diff``: a site file against the live cluster, one line per difference.

Only what the file states is checked: a limit the file leaves out is the admins' choice, and
values no scheduler reports (modules, environment, accounts) are never compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hpcjobs.config.discover_model import DiscoveredSite
from hpcjobs.config.site import Partition, SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.units import format_memory_human, format_walltime_slurm

#: Partition fields compared, with how each is shown.
_FIELDS: dict[str, Callable[[Any], str]] = {
    "max_walltime": format_walltime_slurm,
    "default_walltime": format_walltime_slurm,
    "max_nodes": str,
    "cpus_per_node": str,
    "memory_per_node": format_memory_human,
    "default_memory_per_cpu": format_memory_human,
    "gpus_per_node": str,
    "gpu_types": lambda v: ", ".join(v) or "none",
    "qos": lambda v: ", ".join(v) or "any",
    "exclusive": lambda v: "yes" if v else "no",
}


def _shown(key: str, value: Any) -> str:
    return "none" if value is None else _FIELDS[key](value)


def _partition_lines(label: str, mine: Partition, live: Partition, live_fields: set[str]) -> list[str]:
    lines = []
    for key in _FIELDS:
        ours, theirs = getattr(mine, key), getattr(live, key)
        if key not in mine.model_fields_set:
            continue  # the file does not state it
        if ours == theirs or (key in ("gpu_types", "qos") and sorted(ours) == sorted(theirs)):
            continue
        if key not in live_fields and theirs is None:
            where = "not set on the cluster"
        else:
            where = f"{_shown(key, theirs)} on the cluster"
        lines.append(f"{label}: {key} {_shown(key, ours)} in the file, {where}")
    return lines


#: ``qos_limits`` fields compared, with how each is shown.
_QOS_FIELDS: dict[str, Callable[[Any], str]] = {
    "max_walltime": format_walltime_slurm,
    "max_submitted_jobs": str,
    "max_cpus_per_job": str,
    "max_gpus_per_job": str,
}


def _qos_lines(site: SiteConfig, cluster: SiteConfig) -> list[str]:
    """``qos_limits`` the file states that the cluster's QOS do not have (and limited QOS the file lacks)."""
    lines: list[str] = []
    for name, mine in site.qos_limits.items():
        theirs = cluster.qos_limits.get(name)
        for key, shown in _QOS_FIELDS.items():
            ours = getattr(mine, key)
            live = getattr(theirs, key) if theirs is not None else None
            if key in mine.model_fields_set and ours != live:
                where = f"{shown(live)} on the cluster" if live is not None else "not set on the cluster"
                lines.append(f"qos {name}: {key} {shown(ours) if ours is not None else 'none'} in the file, {where}")
    for name in cluster.qos_limits:
        if name not in site.qos_limits and site.qos_limits:
            lines.append(f"qos {name}: limited on the cluster, not in the file's qos_limits")
    return lines


def diff_site_file(path: str, *, scheduler: str = "auto") -> list[str]:
    """``site diff``: the site file (or site name) ``path`` against the live cluster.

    Raises:
        ConfigError: The site file is invalid.
        CommandError: No scheduler answers, or one of its commands failed.
    """
    from hpcjobs.config.sites import find_site, load_site_file
    from hpcjobs.schedulers.registry import capabilities_of
    from hpcjobs.sites.discover import discover_site

    site = load_site_file(find_site(path))
    wanted = site.scheduler if scheduler == "auto" and capabilities_of(site.scheduler).discoverable else scheduler
    return diff_site(site, discover_site(wanted, name=site.name))


def diff_site(site: SiteConfig, live: DiscoveredSite) -> list[str]:
    """What ``site`` states that the cluster does not, one line per difference (empty: they agree).

    File entries are matched to the cluster's by key, then by ``scheduler_name``.
    """
    from hpcjobs.config.yamlio import parse_yaml
    from hpcjobs.sites.discover import site_yaml

    cluster = validate_document(SiteConfig, parse_yaml(site_yaml(live), file=f"<discovered from {live.cluster}>"))
    lines: list[str] = []
    if site.scheduler != cluster.scheduler:
        return [f"scheduler: {site.scheduler} in the file, {cluster.scheduler} on the cluster"]
    if site.default_partition and site.default_partition != cluster.default_partition:
        theirs = site.partitions[site.default_partition].scheduler_name or site.default_partition
        if theirs != cluster.default_partition:
            lines.append(f"default_partition: {site.default_partition} in the file, "
                         f"{cluster.default_partition or 'none'} on the cluster")
    for key in ("max_array_size", "max_submitted_jobs"):
        ours, theirs = getattr(site.limits, key), getattr(cluster.limits, key)
        if ours is not None and ours != theirs:
            lines.append(f"limits: {key} {ours} in the file, {theirs if theirs is not None else 'none'} on the cluster")
    for name, part in site.partitions.items():
        live_name = name if name in cluster.partitions else part.scheduler_name
        if live_name not in cluster.partitions:
            lines.append(f"partition {name}: in the file, not on the cluster")
            continue
        entry = live.partition(live_name)
        fields = set(entry.fields) if entry else set()
        lines += _partition_lines(f"partition {name}", part, cluster.partitions[live_name], fields)
    lines += _qos_lines(site, cluster)
    known = set(site.partitions) | {p.scheduler_name for p in site.partitions.values() if p.scheduler_name}
    for name, part in cluster.partitions.items():
        if name not in known and (part.scheduler_name or name) not in known:
            lines.append(f"partition {name}: on the cluster, not in the file")
    return lines
