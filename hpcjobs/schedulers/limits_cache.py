"""What a scheduler said about its limits, kept for a while so that a slow controller is asked once.

``MaxArraySize``, ``max_array_size`` and a user's submit limit change rarely; on a login node whose
controller answers slowly, asking them before every ``sweep``, ``resubmit`` or function sweep costs
seconds each time. The answer is cached per user, scheduler family, cluster (from
:mod:`hpcjobs.config.cluster_names`) and client executable, for ``$HPCJOBS_LIMITS_TTL_S`` seconds
(default 3600; ``0`` turns the cache off), in ``$HPCJOBS_CACHE_DIR`` (else
``$XDG_CACHE_HOME/hpcjobs``, else ``~/.cache/hpcjobs``), written atomically. A machine whose cluster
cannot be named from its configuration files is not cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path

from hpcjobs.errors import ConfigError, ConfigProblem, UnsafePathError
from hpcjobs.safe_files import read_regular
from hpcjobs.schedulers.base import ClusterLimits

log = logging.getLogger("hpcjobs.schedulers")

DEFAULT_TTL_S = 3600.0
#: Most bytes of a cached limits file read (one holds a few numbers; a larger one is asked again).
_MAX_BYTES = 64 * 1024
#: Seconds a limits query may take before the site file's limits are used instead.
DEFAULT_QUERY_TIMEOUT_S = 10.0


#: The longest wait a ``*_S`` setting may ask for (a day).
MAX_SECONDS = 86400.0


def _env_seconds(name: str, default: float, maximum: float = MAX_SECONDS) -> float:
    """``$name`` as seconds (``default`` when unset or empty).

    Raises:
        ConfigError: It is set to anything but a number from 0 to ``maximum`` (``inf``,
            ``nan``, ``-1``, text), which would otherwise wait forever or not at all.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= maximum:  # also false for NaN
        raise ConfigError(ConfigProblem(f"{raw!r} is not a number of seconds", key=name,
                                        expected=f"a number from 0 to {maximum:g}"))
    return value


def ttl_s() -> float:
    """``$HPCJOBS_LIMITS_TTL_S`` or the default."""
    return _env_seconds("HPCJOBS_LIMITS_TTL_S", DEFAULT_TTL_S, maximum=30 * MAX_SECONDS)


def query_timeout_s() -> float:
    """``$HPCJOBS_SCHEDULER_TIMEOUT_S``: how long a limits query may take (default 10 s)."""
    return _env_seconds("HPCJOBS_SCHEDULER_TIMEOUT_S", DEFAULT_QUERY_TIMEOUT_S) or DEFAULT_QUERY_TIMEOUT_S


def cache_dir() -> Path:
    """The user's cache folder (:func:`hpcjobs.config.sites.user_cache_dir`), then ``limits/``."""
    from hpcjobs.config.sites import user_cache_dir

    return user_cache_dir() / "limits"


def cache_key(family: str, cluster: str | None, executable: str, user: str) -> str | None:
    """The file name for one user's limits on one cluster, or ``None`` when the cluster is unknown."""
    if not cluster:
        return None
    digest = hashlib.sha256("\0".join((family, cluster, executable, user)).encode()).hexdigest()[:24]
    return f"{family}-{digest}.json"


def load(key: str) -> ClusterLimits | None:
    """The cached limits under ``key`` when younger than the TTL, else ``None``."""
    ttl = ttl_s()
    if ttl <= 0:
        return None
    path = cache_dir() / key
    try:
        data = json.loads(read_regular(path, _MAX_BYTES))
        if not 0 <= time.time() - float(data["fetched_at"]) < ttl:
            return None
        fields = {f.name for f in dataclasses.fields(ClusterLimits)}
        values = {k: v for k, v in data["limits"].items() if k in fields and (v is None or isinstance(v, int))}
        return ClusterLimits(**values)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, UnsafePathError):
        return None  # missing, old, a FIFO or a link, bad or too deep: asked again


def store(key: str, limits: ClusterLimits) -> None:
    """Keep ``limits`` under ``key`` (atomically; a cache that cannot be written is skipped)."""
    if ttl_s() <= 0:
        return
    from hpcjobs.output import atomic_write_text

    text = json.dumps({"fetched_at": time.time(), "limits": dataclasses.asdict(limits)})
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_text(folder / key, text, mode=0o600, below=folder)
    except (OSError, UnsafePathError) as exc:
        log.debug("limits cache not written: %s", exc)
