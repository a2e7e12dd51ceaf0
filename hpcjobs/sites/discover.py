"""Discovering a site from the scheduler in front of the user: ``hpcjobs site init`` and detection.

:func:`detect_scheduler` asks each backend that can read its site (``discoverable``: Slurm's
``scontrol show config``, then PBS's own ``qstat -B -f -F json``, then Torque's ``qstat --version``
and ``qstat -B -f`` of a ``qstat`` on ``PATH`` that is not Slurm's wrapper) whether it answers on this
machine (its ``probe`` hook); :func:`discover_site` reads partitions, nodes and limits from the one
that did (its ``discover_site`` hook, with the commands run by :func:`run_discovery`);
:func:`discovered_site_file` keeps the result per cluster under the user's config dir
(``<config>/discovered/<scheduler>-<cluster>.yaml``) and discovers again when it is older
than :data:`CACHE_MAX_AGE_S` or on request.
"""

from __future__ import annotations

import getpass
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hpcjobs import __version__, process
from hpcjobs.config.discover_model import DISCOVERY_TIMEOUT_S, DiscoveredSite, Probe, render_site_yaml
from hpcjobs.errors import CommandError
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import BACKENDS, get_backend

log = logging.getLogger("hpcjobs.discover")

#: Seconds a discovered site is reused before the scheduler is asked again.
CACHE_MAX_AGE_S = 86400
#: Seconds the "does a scheduler answer here" probe may take by default (``$HPCJOBS_SCHEDULER_TIMEOUT_S``).
PROBE_TIMEOUT_S = 10.0


def probe_timeout_s() -> float:
    """How long the probe waits: ``$HPCJOBS_SCHEDULER_TIMEOUT_S``, as every scheduler query of a submission."""
    from hpcjobs.schedulers.limits_cache import query_timeout_s

    return query_timeout_s()


#: Set to ``0`` to never ask a live scheduler during site resolution (the test suite does).
DISCOVER_ENV = "HPCJOBS_DISCOVER"


def run_discovery(argv: Sequence[str], *, timeout: float = DISCOVERY_TIMEOUT_S,
                  check: bool = True) -> process.CommandResult:
    """Run one discovery command (the ``run`` the backends' discovery hooks are given)."""
    return process.run_command(list(argv), timeout=timeout, check=check)


def discoverable() -> list[BaseBackend]:
    """The backends that can read a site from their live scheduler, in the order detection asks them."""
    return [b for b in BACKENDS.values() if b.capabilities.discoverable]


def _label(scheduler: str) -> str:
    """What a cluster of ``scheduler`` is called (``Slurm cluster``), or the name itself when no backend has it."""
    backend = BACKENDS.get(scheduler)
    return backend.label if backend is not None else scheduler


def _in_words(backends: Sequence[BaseBackend]) -> str:
    """``Slurm, PBS or Torque``."""
    names = [b.short_name for b in backends]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def detect_scheduler(scheduler: str = "auto") -> Probe | None:
    """The scheduler answering here (``auto``: each discoverable one in turn: Slurm, then PBS, then Torque), or
    ``None`` when none does."""
    if scheduler == "auto":
        candidates = discoverable()
    else:
        backend = BACKENDS.get(scheduler)
        candidates = [backend] if backend is not None and backend.capabilities.discoverable else []
    for backend in candidates:
        found = backend.probe(run_discovery, probe_timeout_s())
        if found is not None:
            return found
    return None


def discover_site(scheduler: str = "auto", *, name: str | None = None, user: str | None = None) -> DiscoveredSite:
    """Read partitions, nodes and limits from the live scheduler (over SSH inside a transport scope that names a
    login node: :func:`hpcjobs.transport.discovery.discover_remote_site`).

    Args:
        scheduler: ``auto`` or the name of a discoverable backend (``slurm``, ``pbspro``, ``torque``).
        name: The site's name (default: the cluster's).
        user: Whose associations give the submit limit and QOS limits (default: the current user).

    Raises:
        CommandError: No scheduler answers, or one of its commands failed.
    """
    return _discover(scheduler, name, user or getpass.getuser())


def _discover(scheduler: str, name: str | None, user: str) -> DiscoveredSite:
    probe = detect_scheduler(scheduler)
    if probe is None:
        backend = BACKENDS.get(scheduler)
        wanted = (_in_words(discoverable()) if scheduler == "auto" else
                  backend.display_name if backend is not None else scheduler.capitalize())
        hints = " / ".join(b.probe_hint for b in discoverable())
        where = "on the login node" if process.routed() else "on this machine"
        raise CommandError(("site", "init"), None, "", f"no {wanted} scheduler answers {where} ({hints})",
                           reason="no scheduler found")
    return get_backend(probe.scheduler).discover_site(run_discovery, name, user)


def site_yaml(site: DiscoveredSite, now: datetime | None = None) -> str:
    """The commented site file ``site init`` writes."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    label = _label(site.scheduler)
    header = [f"Discovered from {label} {site.cluster} by hpcjobs {__version__} site init at {stamp}.",
              "Each value says which command and field it came from; review, then `hpcjobs site validate`.",
              "Add what no scheduler reports: modules, environment, accounts, gpu_request, documentation."]
    return render_site_yaml(site, header)


def write_site_file(site: DiscoveredSite, path: str | Path, *, what: str = "--output") -> Path:
    """Write the site's YAML to ``path`` atomically (folders created: :func:`hpcjobs.output.write_user_file`).

    ``what``: where the path was named, for the messages.

    Raises:
        ConfigError: ``path`` is a FIFO, a device or a folder, or goes through something that is not a folder.
        FileSystemError: The file system refused the write (no space, permission).
    """
    from hpcjobs.output import write_user_file

    return write_user_file(path, site_yaml(site), what=what)


@dataclass(frozen=True)
class DiscoveredFile:
    """A discovered site file for this machine and why it was chosen (for the one-line notice)."""

    path: Path
    name: str
    reason: str


def discovery_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``$HPCJOBS_DISCOVER`` is ``0`` (no live scheduler is asked during site resolution)."""
    return (os.environ if env is None else env).get(DISCOVER_ENV, "1") not in ("0", "no", "false")


def cache_dir() -> Path:
    """Where discovered sites are kept: ``<user config dir>/discovered``."""
    from hpcjobs.config.sites import user_config_dir

    return user_config_dir() / "discovered"


def discovered_site_file(probe: Probe, *, refresh: bool = False, clock: float | None = None) -> DiscoveredFile:
    """The cached discovered site of ``probe``'s cluster, discovered again when stale or on ``refresh``.

    Raises:
        CommandError: Discovery was needed and a scheduler command failed.
    """
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in probe.cluster) or "default"
    path = cache_dir() / f"{probe.scheduler}-{safe}.yaml"
    now = time.time() if clock is None else clock
    label = _label(probe.scheduler)
    try:
        age = now - path.stat().st_mtime
    except OSError:
        age = None
    if refresh or age is None or age > CACHE_MAX_AGE_S or age < 0:
        site = discover_site(probe.scheduler)
        write_site_file(site, path, what="the discovered-site cache")
        name = site.name
    else:
        from hpcjobs.config.sites import load_site_file

        name = load_site_file(path).name
    return DiscoveredFile(path, name, f"discovered from {label} {probe.cluster}")


def _fresh_cached(now: float) -> Path | None:
    """A cached discovered site of a cluster named in this machine's local files, younger than a day."""
    try:
        from hpcjobs.config.cluster_names import local_cluster_names
    except ImportError:
        return None
    for cluster in local_cluster_names():
        for path in sorted(cache_dir().glob(f"*-{cluster}.yaml")):
            try:
                if 0 <= now - path.stat().st_mtime <= CACHE_MAX_AGE_S:
                    return path
            except OSError:
                continue
    return None


def discovered_site_for_this_machine(*, refresh: bool = False, ask: bool = True) -> DiscoveredFile | None:
    """The discovered site of the scheduler answering here (cached a day), or ``None`` when none answers.

    A fresh cached file of a cluster named in local configuration files is used without asking
    the scheduler; otherwise Slurm, then PBS, then Torque is asked. Says which site was chosen and why at
    warning level (shown without ``-v``): ``site hpctest (discovered from Slurm cluster hpctest)``.
    Returns ``None`` at once when ``$HPCJOBS_DISCOVER`` is ``0``. With ``ask=False`` (commands that
    do not submit: ``render``, ``sweep --dry-run``) no scheduler is asked: only a fresh cached file
    is used.

    Raises:
        CommandError: A scheduler answered but one of its discovery commands failed.
    """
    if not discovery_enabled():
        return None
    now = time.time()
    cached = None if refresh else _fresh_cached(now)
    if cached is not None:
        from hpcjobs.config.sites import load_site_file

        site = load_site_file(cached)
        scheduler, cluster = cached.stem.split("-", 1)
        found = DiscoveredFile(cached, site.name,
                               f"discovered from {_label(scheduler)} {cluster}")
    elif not ask:
        return None
    else:
        probe = detect_scheduler()
        if probe is None:
            log.warning("site local (no %s scheduler answers on this machine)", _in_words(discoverable()))
            return None
        found = discovered_site_file(probe, refresh=refresh, clock=now)
    log.warning("site %s (%s)", found.name, found.reason)
    return found
