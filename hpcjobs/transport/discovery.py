"""``hpcjobs site init --remote``: a site file read from a login node's scheduler over SSH."""

from __future__ import annotations

import os
from dataclasses import replace

from hpcjobs import transport
from hpcjobs.config.discover_model import DiscoveredSite, Sourced
from hpcjobs.sites.discover import discover_site
from hpcjobs.transport.login import parse_remote_option


def discover_remote_site(remote: str, *, scheduler: str = "auto", name: str | None = None,
                         ssh_config: str | None = None) -> DiscoveredSite:
    """What :func:`~hpcjobs.sites.discover.discover_site` finds on login node ``remote`` (``[USER@]HOST[:PORT]``),
    as its login user there, with a ``remote:`` block naming it (and ``ssh_config``, an ssh_config file used
    instead of ``~/.ssh/config``).

    Raises:
        ConfigError: ``remote`` is not ``[USER@]HOST[:PORT]``.
        RemoteConnectionError: ssh could not log in.
        CommandError: No scheduler answers there, or one of its commands failed.
    """
    login = parse_remote_option(remote)
    if ssh_config is not None:
        login = replace(login, ssh_config=os.path.abspath(ssh_config))
    with transport.scope():
        ssh = transport.use(login)
        found = discover_site(scheduler, name=name, user=ssh.user())
    given = {"host": login.host, "user": login.user, "port": login.port, "ssh_config": login.ssh_config}
    return replace(found, remote={k: Sourced(v, "--remote") for k, v in given.items() if v is not None})


__all__ = ["discover_remote_site"]
