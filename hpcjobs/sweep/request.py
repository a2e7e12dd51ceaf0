"""A sweep request resolved once, for ``hpcjobs sweep`` and ``hpcjobs sweep --dry-run`` alike.

:func:`resolve_sweep_request` is everything a sweep decides before it writes or submits anything:
the site (``--site``, the file's ``site:``, else detected, discovery included: the dry run asks the
scheduler as the submission does, so it shows the site the submission uses), the sweep's identity
(refused the same way when the name is taken by other content), the scheduler client, and the
upstreams (``after:``, ``--after`` and those the ledger recorded) resolved against their ledgers
with one status poll each. A missing or failed upstream is refused here, for both. The scheduler's
limits are asked by the submitter, whose dry run asks them as its submission does
(:meth:`hpcjobs.sweep.submitter.SweepSubmitter.submit`). What is left to the caller is the
difference: the submission writes the ledger and submits; the dry run prints the commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpcjobs import transport
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig, SiteRemote
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.base import JobDependency
from hpcjobs.schedulers.client import SchedulerClient, client_for
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.sweep.identity import settle_identity
from hpcjobs.sweep.ledger.schema import PLANNED
from hpcjobs.sweep.ledger.store import LEDGER_FILE, Ledger, UpstreamRecord
from hpcjobs.sweep.pipeline import UpstreamSpec, parse_after_option, settle_upstreams
from hpcjobs.sweep.prepare import PreparedSweep, prepare_sweep
from hpcjobs.transport.login import RemoteLogin, parse_remote_option

#: What a submission waits for (the dependencies) and what its ledger keeps of it (the records).
Upstreams = tuple[tuple[JobDependency, ...], list[UpstreamRecord]]


@dataclass(frozen=True)
class SweepRequest:
    """What ``hpcjobs sweep`` was asked, before anything is resolved.

    Attributes:
        path: The experiment file.
        site: ``--site`` (name or file); ``None``: the file's ``site:``, else detected.
        overrides: ``--set KEY=VALUE`` overrides.
        sweep_args: Hydra-style sweep arguments.
        root: Folder of sweep folders.
        refresh_site: Discover this machine's cluster again instead of the cached site.
        after: ``--after`` upstreams as given (``REF``, ``ok:REF``, ``any:REF``, ``done:REF``).
        new: Start another sweep even if one of this name or content exists.
        force: Continue the newest sweep of this name although its content changed.
        remote: ``--remote [USER@]HOST[:PORT]``: reach the site's scheduler through this login node over SSH
            (instead of, or over, the site's ``remote:``).
    """

    path: str | Path
    site: str | None = None
    overrides: Sequence[str] = ()
    sweep_args: Sequence[str] = ()
    root: str | Path | None = None
    refresh_site: bool = False
    after: Sequence[str] = ()
    new: bool = False
    force: bool = False
    remote: str | None = None


@dataclass(frozen=True)
class ResolvedSweep:
    """A sweep request resolved: what the submission does and the dry run shows.

    Attributes:
        prepared: The sweep (site, job, points, id and folder).
        client: The scheduler client; ``None`` on a site whose points run here.
        cli_after: The ``--after`` upstreams, parsed.
        upstreams: The upstreams of a sweep that has no ledger yet, resolved; ``None`` when it has one
            (they are resolved with its ledger: :meth:`upstreams_with`).
    """

    prepared: PreparedSweep
    client: SchedulerClient | None
    cli_after: tuple[UpstreamSpec, ...] = ()
    upstreams: Upstreams | None = field(default=None)

    @property
    def runs_here(self) -> bool:
        """The site's points run as processes of this machine (the local runner)."""
        return capabilities_of(self.prepared.site.scheduler).runs_here

    def upstreams_with(self, ledger: Ledger) -> Upstreams:
        """The upstreams of a sweep whose ledger exists: resolved (with those it recorded) while points wait.

        A sweep with no point left to submit waits for nothing more: nothing is resolved.

        Raises:
            ConfigError: As :func:`hpcjobs.sweep.pipeline.settle_upstreams`.
        """
        if self.upstreams is not None:
            return self.upstreams
        if not ledger.summary().get(PLANNED):
            return (), []
        return _settle(self.prepared, ledger.upstreams(), self.client, self.cli_after)


def _settle(prepared: PreparedSweep, recorded: Sequence[UpstreamRecord], client: SchedulerClient | None,
            cli_after: Sequence[UpstreamSpec]) -> Upstreams:
    return settle_upstreams(prepared.experiment, prepared.experiment_path, prepared.site.scheduler,
                            prepared.folder.parent, recorded, client, cli_after, prepared.site.name)


def resolve_sweep_request(request: SweepRequest, client: SchedulerClient | None = None) -> ResolvedSweep:
    """Resolve a sweep request as both its submission and its dry run see it; nothing is written or submitted.

    The site is chosen as a submission chooses it (a live scheduler may be asked: site discovery,
    cached a day) and loaded with every ``site validate`` check; the sweep's id is settled against
    the sweeps already there; a new sweep's upstreams are resolved (one status poll each, through
    ``client``), so a missing, unknown or failed upstream is refused before anything is written.

    Args:
        request: What was asked.
        client: The scheduler client (default: the site's scheduler's; tests hand in a faked one).

    Raises:
        ConfigError: Bad input, an unusable site, a name in use by other content, or an upstream refused.
        CommandError: Site discovery asked a scheduler that answered and then failed.
    """
    cli_after = tuple(parse_after_option(a) for a in request.after)
    prepared = prepare_sweep(request.path, site=request.site, overrides=request.overrides,
                             sweep_args=request.sweep_args, root=request.root, ask_scheduler=True,
                             refresh_site=request.refresh_site)
    prepared = settle_identity(prepared, overrides=request.overrides, sweep_args=request.sweep_args,
                               new=request.new, force=request.force)
    runs_here = capabilities_of(prepared.site.scheduler).runs_here
    prepared = over_login_node(prepared, request.remote)
    c = None if runs_here else (client or client_for(prepared.site.scheduler))
    upstreams = None
    if not (prepared.folder / LEDGER_FILE).is_file():  # a new sweep: a missing upstream stops it unwritten
        upstreams = _settle(prepared, (), c, cli_after)
    return ResolvedSweep(prepared, c, cli_after, upstreams)


def over_login_node(prepared: PreparedSweep, remote_option: str | None = None) -> PreparedSweep:
    """``prepared`` with its places on the login node its site names (``remote:``), this scope's commands sent there.

    ``remote_option`` (``--remote [USER@]HOST[:PORT]``) names the login node instead; the site's ``remote:``
    settings other than those still apply. Called inside a :func:`hpcjobs.transport.scope`; without either,
    ``prepared`` is returned as it is.

    Raises:
        ConfigError: The site's scheduler is not reached through a login node (its jobs are services of a
            cluster API, or processes of this machine), or a secret would come from this machine's environment.
        RemoteConnectionError: ssh could not log in.
    """
    login = login_node_of(prepared.site, prepared.experiment, str(prepared.experiment_path),
                          prepared.experiment_text, remote_option)
    if login is None:
        return prepared
    from hpcjobs.sweep.remote import check_code_sync

    check_code_sync(prepared.site, prepared.submit_dir)
    return replace(prepared, remote=transport.places_for(login, prepared.sweep_id, prepared.folder))


def login_node_of(site: SiteConfig, experiment: Experiment, experiment_file: str, experiment_text: str | None,
                  remote_option: str | None = None) -> RemoteLogin | None:
    """The login node a submission to ``site`` goes through (``--remote``, else the site's ``remote:``), or ``None``.

    Raises:
        ConfigError: As :func:`over_login_node` (nothing is connected to).
    """
    login = site_login(site, remote_option)
    if login is None:
        return None
    from_env = sorted(name for name, secret in experiment.secrets.items() if secret.env is not None)
    if from_env:
        raise ConfigError(ConfigProblem(
            f"secrets {', '.join(from_env)} are taken from the submitter's environment (`env:`), and over SSH the "
            f"submitter is the login node's shell, not this machine: put each value in a file on the login node "
            f"(chmod 600) and name it with `file:` (read by the job when it starts; never sent by hpcjobs)",
            file=experiment_file, line=_line_of(experiment_text or "", "secrets:"),
            key="secrets", expected="secrets: {NAME: {file: ~/.NAME}} on a site with remote:"))
    return login


def site_login(site: SiteConfig, remote_option: str | None = None) -> RemoteLogin | None:
    """The login node of ``site`` (``--remote``, else its ``remote:``) for any command, or ``None``: this machine.

    Raises:
        ConfigError: ``--remote`` is not ``[USER@]HOST[:PORT]``, or the site's scheduler is not reached through a
            login node (its jobs are services of a cluster API, or processes of this machine).
    """
    remote = site.remote
    if remote_option:
        given = parse_remote_option(remote_option)
        base = remote.model_dump() if remote is not None else {}
        remote = SiteRemote.model_validate({**base, "host": given.host,
                                            **({"user": given.user} if given.user else {}),
                                            **({"port": given.port} if given.port else {})})
    if remote is None:
        return None
    caps = capabilities_of(site.scheduler)
    if caps.services or caps.runs_here:
        raise ConfigError(f"site {site.name!r}: `remote:` is for schedulers submitted to from a login node; "
                          f"{site.scheduler} is reached through its own client's context instead")
    return RemoteLogin(host=remote.host, user=remote.user, port=remote.port, workdir=remote.workdir,
                       ssh_config=remote.ssh_config, options=tuple(remote.options), ssh=remote.ssh)


def _line_of(text: str, start: str) -> int | None:
    """The 1-based number of the first line of ``text`` that starts with ``start`` (a top-level key)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(start):
            return number
    return None


__all__ = ["ResolvedSweep", "SweepRequest", "Upstreams", "login_node_of", "over_login_node", "resolve_sweep_request",
           "site_login"]
