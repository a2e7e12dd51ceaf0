"""Discovering a site from the scheduler in front of the user: ``hpcjobs site init`` and detection.

:func:`detect_scheduler` asks Slurm (``scontrol show config``), then PBS
(``qstat -B -f -F json``, PBS's own client), then Torque (``qstat --version`` and ``qstat -B -f`` of
a ``qstat`` on ``PATH`` that is not Slurm's wrapper) whether they answer on this machine;
:func:`discover_site` reads partitions, nodes and limits from the one that did;
:func:`discovered_site_file` keeps the result per cluster under the user's config dir
(``<config>/discovered/<scheduler>-<cluster>.yaml``) and discovers again when it is older
than :data:`CACHE_MAX_AGE_S` or on request.
"""

from __future__ import annotations

import getpass
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hpcjobs import __version__, process
from hpcjobs.config.discover_model import DiscoveredSite, render_site_yaml
from hpcjobs.errors import CommandError, CommandTimeout, HpcJobsError, printable, reading_output_of
from hpcjobs.schedulers.pbs import discover as discover_pbs
from hpcjobs.schedulers.pbs import discover_torque
from hpcjobs.schedulers.slurm import discover as discover_slurm
from hpcjobs.schedulers.slurm import discover_qos as discover_slurm_qos

log = logging.getLogger("hpcjobs.discover")

#: Seconds a discovered site is reused before the scheduler is asked again.
CACHE_MAX_AGE_S = 86400
#: Seconds one discovery command may take.
DISCOVERY_TIMEOUT_S = 60.0
#: Seconds the "does a scheduler answer here" probe may take by default (``$HPCJOBS_SCHEDULER_TIMEOUT_S``).
PROBE_TIMEOUT_S = 10.0


def probe_timeout_s() -> float:
    """How long the probe waits: ``$HPCJOBS_SCHEDULER_TIMEOUT_S``, as every scheduler query of a submission."""
    from hpcjobs.schedulers.limits_cache import query_timeout_s

    return query_timeout_s()
#: Set to ``0`` to never ask a live scheduler during site resolution (the test suite does).
DISCOVER_ENV = "HPCJOBS_DISCOVER"
SCHEDULER_LABELS = {"slurm": "Slurm cluster", "pbspro": "PBS server", "torque": "Torque server"}


@dataclass(frozen=True)
class Probe:
    """A scheduler that answered on this machine: its family and cluster (server) name."""

    scheduler: str
    cluster: str


def _run(argv: Sequence[str], *, timeout: float = DISCOVERY_TIMEOUT_S, check: bool = True,
         env: Mapping[str, str] | None = None, scheduler: str = "pbspro") -> process.CommandResult:
    """Run a discovery command; PBS clients are PBS's own, Torque's the ones on ``PATH`` (never Slurm's wrappers)."""
    if argv[0] in ("qstat", "pbsnodes", "qmgr"):
        if scheduler == "torque":
            argv = [torque_command(argv[0], env), *argv[1:]]
        else:
            from hpcjobs.schedulers.locate import locate_pbs_command

            argv = [locate_pbs_command(argv[0], env).path, *argv[1:]]
    return process.run_command(list(argv), timeout=timeout, check=check)


def torque_command(name: str, env: Mapping[str, str] | None = None) -> str:
    """The first ``name`` on ``PATH`` that is not one of Slurm's PBS wrappers (Torque's clients live on ``PATH``).

    Raises:
        CommandError: There is none, or only Slurm's wrapper (``slurm-wlm-torque``).
    """
    from hpcjobs.schedulers.locate import is_slurm_wrapper

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


def probe_slurm() -> Probe | None:
    """Slurm's ClusterName when ``sbatch`` and ``scontrol`` are here and ``scontrol show config`` answers."""
    if not (shutil.which("scontrol") and shutil.which("sbatch")):
        return None
    try:
        res = _run(discover_slurm.CONFIG_ARGV, timeout=probe_timeout_s())
    except CommandTimeout:
        log.warning("slurmctld did not answer `%s` in %g s", " ".join(discover_slurm.CONFIG_ARGV), probe_timeout_s())
        return None
    except HpcJobsError as exc:
        log.info("Slurm does not answer: %s", exc)
        return None
    from hpcjobs.schedulers.slurm.formats import parse_scontrol_show_config

    return Probe("slurm", parse_scontrol_show_config(res.stdout).get("ClusterName", ""))


def probe_pbs() -> Probe | None:
    """The PBS server name when PBS's own ``qstat -B -f -F json`` answers (Slurm's wrappers do not count)."""
    try:
        res = _run(discover_pbs.SERVER_ARGV, timeout=probe_timeout_s())
        from hpcjobs.schedulers.pbs.formats import parse_qstat_json

        with reading_output_of(res.argv, res.stdout, res.returncode):
            doc = parse_qstat_json(res.stdout)
    except CommandTimeout:
        log.warning("the PBS server did not answer `qstat -B -f -F json` in %g s", probe_timeout_s())
        return None
    except HpcJobsError as exc:
        log.info("PBS does not answer: %s", exc)
        return None
    return Probe("pbspro", str(doc.get("pbs_server") or next(iter(doc.get("Server") or {}), "")))


def probe_torque() -> Probe | None:
    """The Torque server name when Torque's ``qstat`` (``--version``: ``Version: 6.1.2``) answers ``qstat -B -f``.

    OpenPBS's ``qstat --version`` prints ``pbs_version = ...`` and Slurm's wrapper refuses the option;
    neither is taken for Torque.
    """
    try:
        version = _run(discover_torque.VERSION_ARGV, timeout=probe_timeout_s(), check=False, scheduler="torque")
        release = discover_torque.parse_torque_version(version.stderr + "\n" + version.stdout)
        if release is None:
            log.info("no Torque here: `qstat --version` printed %r", printable((version.stdout + version.stderr)[:200]))
            return None
        res = _run(discover_torque.SERVER_ARGV, timeout=probe_timeout_s(), scheduler="torque")
    except CommandTimeout:
        log.warning("the Torque server did not answer `qstat -B -f` in %g s", probe_timeout_s())
        return None
    except HpcJobsError as exc:
        log.info("Torque does not answer: %s", exc)
        return None
    return Probe("torque", next(iter(discover_torque.parse_status_blocks(res.stdout)), ""))


def detect_scheduler(scheduler: str = "auto") -> Probe | None:
    """The scheduler answering here (``auto``: Slurm, then PBS, then Torque), or ``None`` when none does."""
    probes = {"slurm": probe_slurm, "pbspro": probe_pbs, "torque": probe_torque}
    for name in (probes if scheduler == "auto" else (scheduler,)):
        found = probes[name]() if name in probes else None
        if found is not None:
            return found
    return None


def _slurm_accounting(user: str) -> tuple[str | None, str | None]:
    """The user's associations and the QOS table (``sacctmgr``); ``(None, None)``, logged once, when unreadable."""
    texts: list[str] = []
    for argv in (discover_slurm_qos.assoc_argv(user), discover_slurm_qos.QOS_ARGV):
        try:
            res = _run(argv, check=False)
        except HpcJobsError as exc:
            log.warning("could not read MaxSubmitJobs and the QOS limits: %s", exc)
            return None, None
        if res.returncode != 0:
            log.warning("could not read MaxSubmitJobs and the QOS limits: %s exited %s: %s", " ".join(argv),
                        res.returncode, printable(res.stderr.strip())[:500])
            return None, None
        texts.append(res.stdout)
    return texts[0], texts[1]


def discover_site(scheduler: str = "auto", *, name: str | None = None, user: str | None = None) -> DiscoveredSite:
    """Read partitions, nodes and limits from the live scheduler.

    Args:
        scheduler: ``auto``, ``slurm``, ``pbspro`` or ``torque``.
        name: The site's name (default: the cluster's).
        user: Whose associations give the submit limit and QOS limits (default: the current user).

    Raises:
        CommandError: No scheduler answers, or one of its commands failed.
    """
    probe = detect_scheduler(scheduler)
    if probe is None:
        wanted = {"auto": "Slurm, PBS or Torque", "pbspro": "PBS Pro/OpenPBS"}.get(scheduler, scheduler.capitalize())
        raise CommandError(("site", "init"), None, "", f"no {wanted} scheduler answers on this machine "
                           "(scontrol show config / PBS's qstat -B / Torque's qstat --version)",
                           reason="no scheduler found")
    if probe.scheduler == "slurm":
        texts = [_run(argv).stdout for argv in (discover_slurm.CONFIG_ARGV, discover_slurm.PARTITION_ARGV,
                                                 discover_slurm.NODE_ARGV)]
        assoc, qos = _slurm_accounting(user or getpass.getuser())
        return discover_slurm.build_slurm_site(*texts, name=name, assoc_text=assoc, qos_text=qos)
    if probe.scheduler == "torque":
        texts = [_run(argv, scheduler="torque").stdout for argv in (
            discover_torque.QUEUE_ARGV, discover_torque.NODE_ARGV, discover_torque.SERVER_ARGV)]
        return discover_torque.build_torque_site(*texts, name=name)
    from hpcjobs.schedulers.pbs.formats import parse_qstat_json

    docs = []
    for argv in (discover_pbs.QUEUE_ARGV, discover_pbs.NODE_ARGV, discover_pbs.SERVER_ARGV):
        res = _run(argv)
        with reading_output_of(res.argv, res.stdout, res.returncode):
            docs.append(parse_qstat_json(res.stdout))
    return discover_pbs.build_pbs_site(*docs, name=name)


def site_yaml(site: DiscoveredSite, now: datetime | None = None) -> str:
    """The commented site file ``site init`` writes."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    label = SCHEDULER_LABELS.get(site.scheduler, site.scheduler)
    header = [f"Discovered from {label} {site.cluster} by hpcjobs {__version__} site init at {stamp}.",
              "Each value says which command and field it came from; review, then `hpcjobs site validate`.",
              "Add what no scheduler reports: modules, environment, accounts, gpu_request, documentation."]
    return render_site_yaml(site, header)


def write_site_file(site: DiscoveredSite, path: str | Path) -> Path:
    """Write the site's YAML to ``path`` atomically (folders created)."""
    from hpcjobs.output import atomic_write_text

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(target, site_yaml(site))


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
    label = SCHEDULER_LABELS.get(probe.scheduler, probe.scheduler)
    try:
        age = now - path.stat().st_mtime
    except OSError:
        age = None
    if refresh or age is None or age > CACHE_MAX_AGE_S or age < 0:
        site = discover_site(probe.scheduler)
        write_site_file(site, path)
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
                               f"discovered from {SCHEDULER_LABELS.get(scheduler, scheduler)} {cluster}")
    elif not ask:
        return None
    else:
        probe = detect_scheduler()
        if probe is None:
            log.warning("site local (no Slurm, PBS or Torque scheduler answers on this machine)")
            return None
        found = discovered_site_file(probe, refresh=refresh, clock=now)
    log.warning("site %s (%s)", found.name, found.reason)
    return found
