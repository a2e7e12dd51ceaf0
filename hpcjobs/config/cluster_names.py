"""The scheduler cluster this machine belongs to, read from local files: no scheduler call.

A login node whose controller is down (a ``slurmctld`` restart, an outage) answers ``scontrol`` only
after its timeout, often ten seconds or more. Site detection must not wait on that: what it needs is
on disk already, where the scheduler's own clients read it.

- Slurm: ``$SLURM_CLUSTER_NAME`` (set inside jobs), else ``ClusterName`` in ``slurm.conf`` at
  ``$SLURM_CONF`` or ``/etc/slurm/slurm.conf`` (the path ``scontrol`` itself reads; keys are
  case-insensitive, see slurm.conf(5)).
- PBS Pro / OpenPBS: ``$PBS_SERVER``, else ``PBS_SERVER`` in ``$PBS_CONF_FILE`` or ``/etc/pbs.conf``
  (pbs.conf(8)); the short name, as job ids carry it.
- Torque: ``$PBS_DEFAULT``, else the first name in ``server_name`` under Torque's home
  (``/var/spool/torque`` by default), which its clients read; kept as written there (a discovered
  Torque site is named after what ``qstat -B -f`` prints after ``Server:``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
DEFAULT_PBS_CONF = "/etc/pbs.conf"
DEFAULT_TORQUE_SERVER_NAME = "/var/spool/torque/server_name"

#: Most bytes read of a configuration file (a slurm.conf with thousands of node lines stays far below).
_MAX_CONF_BYTES = 4 * 1024 * 1024


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(_MAX_CONF_BYTES)
    except OSError:
        return None


def slurm_cluster_name(env: Mapping[str, str] | None = None) -> str | None:
    """Slurm's ClusterName from the environment or ``slurm.conf``, or ``None``."""
    env = os.environ if env is None else env
    if env.get("SLURM_CLUSTER_NAME"):
        return env["SLURM_CLUSTER_NAME"]
    text = _read(env.get("SLURM_CONF") or DEFAULT_SLURM_CONF)
    if text is None:
        return None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "clustername" and value.strip():
            return value.strip().split()[0].lower()  # slurmctld lower-cases ClusterName
    return None


def pbs_server_name(env: Mapping[str, str] | None = None) -> str | None:
    """The PBS server's short name from ``$PBS_SERVER`` or ``pbs.conf``, or ``None``."""
    env = os.environ if env is None else env
    value = env.get("PBS_SERVER")
    if not value:
        text = _read(env.get("PBS_CONF_FILE") or DEFAULT_PBS_CONF)
        if text is None:
            return None
        for line in text.splitlines():
            key, sep, val = line.strip().partition("=")
            if sep and key.strip() == "PBS_SERVER" and val.strip():
                value = val.strip()
                break
    if not value:
        return None
    return value.split(":", 1)[0].split(".", 1)[0] or None


def torque_server_name(env: Mapping[str, str] | None = None, path: str = DEFAULT_TORQUE_SERVER_NAME) -> str | None:
    """Torque's server from ``$PBS_DEFAULT`` or its ``server_name`` file, or ``None``.

    The file holds ``host``, ``host:port`` or a comma-separated list (the first is taken).
    """
    env = os.environ if env is None else env
    text = env.get("PBS_DEFAULT") or _read(path) or ""
    first = text.strip().split(",", 1)[0].split()
    if not first:
        return None
    return first[0].split(":", 1)[0] or None


def local_cluster_names(env: Mapping[str, str] | None = None) -> list[str]:
    """Every cluster name this machine's scheduler configuration gives (Slurm first), without duplicates."""
    names = [n for n in (slurm_cluster_name(env), pbs_server_name(env), torque_server_name(env)) if n]
    return list(dict.fromkeys(names))
