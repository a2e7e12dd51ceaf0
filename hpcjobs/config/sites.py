"""Finding site configs: the search path, listing, loading by name, and detecting the current site.

The search path, first match wins:

1. each directory in ``$HPCJOBS_SITE_PATH`` (``:``-separated);
2. the user's config dir, ``$XDG_CONFIG_HOME/hpcjobs/sites`` (default ``~/.config/hpcjobs/sites``);
3. ``/etc/hpcjobs/sites`` (what the cluster's admins install);
4. the site configs shipped with hpcjobs.
"""

from __future__ import annotations

import fnmatch
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.config import scheduler_names
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import did_you_mean, validate_document
from hpcjobs.config.yamlio import read_yaml
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.resources import shipped_dir

SYSTEM_SITE_DIR = Path("/etc/hpcjobs/sites")
DEFAULT_SITE = "local"


def user_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/hpcjobs`` (default ``~/.config/hpcjobs``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hpcjobs"


def user_cache_dir() -> Path:
    """``$HPCJOBS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hpcjobs``, else ``~/.cache/hpcjobs``."""
    explicit = os.environ.get("HPCJOBS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hpcjobs"


def site_search_path() -> list[Path]:
    """Directories searched for ``<name>.yaml`` site configs, first match wins."""
    dirs = [Path(p) for p in os.environ.get("HPCJOBS_SITE_PATH", "").split(os.pathsep) if p]
    dirs += [user_config_dir() / "sites", SYSTEM_SITE_DIR, shipped_dir("site-configs")]
    return dirs


@dataclass(frozen=True)
class SiteEntry:
    """A site config file found on the search path."""

    name: str
    path: Path
    shadowed: tuple[Path, ...] = ()


def list_sites() -> list[SiteEntry]:
    """Every site on the search path (the first file of each name wins; later ones are listed as shadowed)."""
    found: dict[str, list[Path]] = {}
    for d in site_search_path():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
            found.setdefault(f.stem, []).append(f)
    return [SiteEntry(n, ps[0], tuple(ps[1:])) for n, ps in sorted(found.items())]


def load_site_file(path: str | Path) -> SiteConfig:
    """Load and validate one site config file.

    Raises:
        ConfigError: Unreadable file, bad YAML, or schema violations (all of them, located).
    """
    doc = read_yaml(path)
    return validate_document(SiteConfig, doc)


def find_site(name: str) -> Path:
    """The file of the site called ``name`` on the search path.

    Raises:
        ConfigError: No such site (with the known names and a suggestion).
    """
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        return Path(name)
    entries = {e.name: e.path for e in list_sites()}
    if name in entries:
        return entries[name]
    hint = did_you_mean(name, list(entries))
    msg = f"unknown site {name!r}" + (f"; did you mean {hint!r}?" if hint else "")
    searched = ", ".join(str(d) for d in site_search_path())
    raise ConfigError(ConfigProblem(f"{msg} (searched {searched})", key="site", choices=tuple(entries)))


def load_site(name: str) -> SiteConfig:
    """Load the site called ``name`` (or a path to a site file)."""
    return load_site_file(find_site(name))


def _matches(site: SiteConfig, hostname: str, env: Mapping[str, str]) -> bool:
    det = site.detect
    if det.environment and all(env.get(k) == v for k, v in det.environment.items()):
        return True
    cluster = env.get("SLURM_CLUSTER_NAME")
    if cluster and cluster in det.cluster_names:
        return True
    return any(fnmatch.fnmatch(hostname, pat) for pat in det.hostname_patterns)


def detect_site(
    hostname: str | None = None,
    env: Mapping[str, str] | None = None,
    cluster_name: str | None = None,
) -> str:
    """Name of the site this machine belongs to, or ``local`` when none matches.

    Args:
        hostname: Host name to match (default: this machine's fully qualified name).
        env: Environment to match (default: ``os.environ``); ``HPCJOBS_SITE`` wins outright.
        cluster_name: Scheduler cluster name, when the caller already asked the scheduler.
    """
    env = os.environ if env is None else env
    if env.get("HPCJOBS_SITE"):
        return env["HPCJOBS_SITE"]
    hostname = hostname or socket.getfqdn()
    for entry in list_sites():
        try:
            site = load_site_file(entry.path)
        except ConfigError:
            continue  # a broken site file must not stop detection; `site validate` reports it
        if cluster_name and cluster_name in site.detect.cluster_names:
            return site.name
        facts = scheduler_names.facts_of(site.scheduler)
        if facts is not None and not facts.runs_here and _matches(site, hostname, env):
            return site.name
    return DEFAULT_SITE
