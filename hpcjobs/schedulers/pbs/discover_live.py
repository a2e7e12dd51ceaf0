"""Asking a live PBS Pro/OpenPBS or Torque server for its site: whether it answers here, then its queues,
nodes and limits.

PBS's clients are PBS's own (:func:`hpcjobs.schedulers.locate.locate_pbs_command`), Torque's the ones
on ``PATH`` that are not Slurm's wrappers (:func:`torque_command`). The commands run through the
``run`` that :mod:`hpcjobs.sites.discover` hands in; what they print is read by the pure parsers of
:mod:`.discover` and :mod:`.discover_torque`.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence

from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun
from hpcjobs.errors import CommandError, CommandTimeout, HpcJobsError, printable, reading_output_of
from hpcjobs.schedulers.locate import is_slurm_wrapper, locate_pbs_command
from hpcjobs.schedulers.pbs import discover as discover_pbs
from hpcjobs.schedulers.pbs import discover_torque
from hpcjobs.schedulers.pbs.formats import parse_qstat_json

log = logging.getLogger("hpcjobs.discover")


def pbs_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with PBS's own client in front (never Slurm's wrapper of the same name)."""
    return [locate_pbs_command(argv[0]).path, *argv[1:]]


def torque_command(name: str, env: Mapping[str, str] | None = None) -> str:
    """The first ``name`` on ``PATH`` that is not one of Slurm's PBS wrappers (Torque's clients live on ``PATH``).

    Raises:
        CommandError: There is none, or only Slurm's wrapper (``slurm-wlm-torque``).
    """
    env = os.environ if env is None else env
    wrappers: list[str] = []
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        found = shutil.which(name, path=folder or ".")
        if found is None:
            continue
        if not is_slurm_wrapper(found):
            return found
        wrappers.append(found)
    detail = (f"{name} on PATH is Slurm's PBS wrapper ({', '.join(wrappers)}, from slurm-wlm-torque), not Torque"
              if wrappers else f"no {name} on PATH")
    raise CommandError((name,), None, "", detail, reason="could not be started")


def torque_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with Torque's client from ``PATH`` in front (:func:`torque_command`)."""
    return [torque_command(argv[0]), *argv[1:]]


def probe_pbs(run: DiscoveryRun, timeout: float) -> str | None:
    """The PBS server name when PBS's own ``qstat -B -f -F json`` answers (Slurm's wrappers do not count)."""
    try:
        res = run(pbs_argv(discover_pbs.SERVER_ARGV), timeout=timeout)
        with reading_output_of(res.argv, res.stdout, res.returncode):
            doc = parse_qstat_json(res.stdout)
    except CommandTimeout:
        log.warning("the PBS server did not answer `qstat -B -f -F json` in %g s", timeout)
        return None
    except HpcJobsError as exc:
        log.info("PBS does not answer: %s", exc)
        return None
    return str(doc.get("pbs_server") or next(iter(doc.get("Server") or {}), ""))


def probe_torque(run: DiscoveryRun, timeout: float) -> str | None:
    """The Torque server name when Torque's ``qstat`` (``--version``: ``Version: 6.1.2``) answers ``qstat -B -f``.

    OpenPBS's ``qstat --version`` prints ``pbs_version = ...`` and Slurm's wrapper refuses the option;
    neither is taken for Torque.
    """
    try:
        version = run(torque_argv(discover_torque.VERSION_ARGV), timeout=timeout, check=False)
        release = discover_torque.parse_torque_version(version.stderr + "\n" + version.stdout)
        if release is None:
            log.info("no Torque here: `qstat --version` printed %r", printable((version.stdout + version.stderr)[:200]))
            return None
        res = run(torque_argv(discover_torque.SERVER_ARGV), timeout=timeout)
    except CommandTimeout:
        log.warning("the Torque server did not answer `qstat -B -f` in %g s", timeout)
        return None
    except HpcJobsError as exc:
        log.info("Torque does not answer: %s", exc)
        return None
    return next(iter(discover_torque.parse_status_blocks(res.stdout)), "")


def discover_pbs_site(run: DiscoveryRun, *, name: str | None) -> DiscoveredSite:
    """Queues, nodes and limits from ``qstat -Q``, ``pbsnodes -a`` and ``qstat -B`` (JSON).

    Raises:
        CommandError: One of the commands failed.
    """
    docs = []
    for argv in (discover_pbs.QUEUE_ARGV, discover_pbs.NODE_ARGV, discover_pbs.SERVER_ARGV):
        res = run(pbs_argv(argv))
        with reading_output_of(res.argv, res.stdout, res.returncode):
            docs.append(parse_qstat_json(res.stdout))
    return discover_pbs.build_pbs_site(*docs, name=name)


def discover_torque_site(run: DiscoveryRun, *, name: str | None) -> DiscoveredSite:
    """Queues, nodes and limits from Torque's ``qstat -Q -f``, ``pbsnodes -a`` and ``qstat -B -f``.

    Raises:
        CommandError: One of the commands failed.
    """
    texts = [run(torque_argv(argv)).stdout for argv in (
        discover_torque.QUEUE_ARGV, discover_torque.NODE_ARGV, discover_torque.SERVER_ARGV)]
    return discover_torque.build_torque_site(*texts, name=name)
