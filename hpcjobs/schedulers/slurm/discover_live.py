"""Asking a live Slurm for its site: whether it answers here, then its partitions, nodes and limits.

The commands run through the ``run`` that :mod:`hpcjobs.sites.discover` hands in; what they print is
read by the pure parsers of :mod:`.discover` and :mod:`.discover_qos`.
"""

from __future__ import annotations

import logging
import shutil

from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun
from hpcjobs.errors import CommandTimeout, HpcJobsError, printable
from hpcjobs.schedulers.slurm import discover, discover_qos
from hpcjobs.schedulers.slurm.formats import parse_scontrol_show_config

log = logging.getLogger("hpcjobs.discover")


def probe_cluster(run: DiscoveryRun, timeout: float) -> str | None:
    """Slurm's ClusterName when ``sbatch`` and ``scontrol`` are here and ``scontrol show config`` answers."""
    if not (shutil.which("scontrol") and shutil.which("sbatch")):
        return None
    try:
        res = run(discover.CONFIG_ARGV, timeout=timeout)
    except CommandTimeout:
        log.warning("slurmctld did not answer `%s` in %g s", " ".join(discover.CONFIG_ARGV), timeout)
        return None
    except HpcJobsError as exc:
        log.info("Slurm does not answer: %s", exc)
        return None
    return parse_scontrol_show_config(res.stdout).get("ClusterName", "")


def accounting_texts(run: DiscoveryRun, user: str) -> tuple[str | None, str | None]:
    """The user's associations and the QOS table (``sacctmgr``); ``(None, None)``, logged once, when unreadable."""
    texts: list[str] = []
    for argv in (discover_qos.assoc_argv(user), discover_qos.QOS_ARGV):
        try:
            res = run(argv, check=False)
        except HpcJobsError as exc:
            log.warning("could not read MaxSubmitJobs and the QOS limits: %s", exc)
            return None, None
        if res.returncode != 0:
            log.warning("could not read MaxSubmitJobs and the QOS limits: %s exited %s: %s", " ".join(argv),
                        res.returncode, printable(res.stderr.strip())[:500])
            return None, None
        texts.append(res.stdout)
    return texts[0], texts[1]


def discover_site(run: DiscoveryRun, *, name: str | None, user: str) -> DiscoveredSite:
    """Partitions, nodes and limits from ``scontrol show config/partition/node`` and ``sacctmgr``.

    Raises:
        CommandError: One of the ``scontrol`` commands failed.
    """
    texts = [run(argv).stdout for argv in (discover.CONFIG_ARGV, discover.PARTITION_ARGV, discover.NODE_ARGV)]
    assoc, qos = accounting_texts(run, user)
    return discover.build_slurm_site(*texts, name=name, assoc_text=assoc, qos_text=qos)
