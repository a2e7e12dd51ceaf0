"""``hpcjobs ls``: every sweep under the root, brought up to date with one scheduler call per scheduler.

Each row is read from the ledger's per-state counts and its last-change time, without a pass over
the points; only the live submissions' job ids are read to poll them.

The live jobs of all listed sweeps (submissions whose points are not finished) are asked of the
scheduler together (one batched status call per scheduler family), and each ledger records what
concerns it. A sweep that was not polled (the ``local`` site, ``poll=False``, or a scheduler that
did not answer) says how old its record is instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs import states, transport
from hpcjobs.errors import HpcJobsError, LedgerError
from hpcjobs.schedulers.base import job_key_of
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.schedulers.status_table import StatusTable
from hpcjobs.sweep.identity import SweepRoot, find_sweep_root, sweep_folders
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.remote import recorded_places
from hpcjobs.transport.login import RemoteLogin

log = logging.getLogger("hpcjobs.sweep")


@dataclass(frozen=True)
class SweepSummary:
    """One line of ``hpcjobs ls``.

    Attributes:
        sweep_id: The sweep.
        folder: Its folder.
        site: Site name.
        scheduler: Scheduler family.
        created_at: When it was planned (Unix time).
        counts: Points per state.
        as_of: When these counts were true: the time of this call's poll, or (not polled) the
            last change the ledger recorded.
        polled: Whether the scheduler was asked in this call.
        poll_error: Why a poll was not possible, if it failed.
    """

    sweep_id: str
    folder: Path
    site: str
    scheduler: str
    created_at: float
    counts: dict[str, int]
    as_of: float = 0.0
    polled: bool = False
    poll_error: str | None = None


@dataclass
class SweepListing:
    """What ``hpcjobs ls`` shows: where it looked and the sweeps found there (oldest first)."""

    root: SweepRoot
    sweeps: list[SweepSummary] = field(default_factory=list)
    scheduler_calls: int = 0


def _live_ids(ledger: Ledger) -> list[str]:
    """Job ids of the accepted submissions that still have unfinished points (no pass over the points)."""
    if not any(state not in states.TERMINAL_STATES for state in ledger.summary()):
        return []
    return [s.job_id for s in ledger.live_submissions(with_unseated=False) if s.job_id]


def _group_key(family: str, login: RemoteLogin | None) -> str:
    """The sweeps polled together: one scheduler family, here or on one login node (``slurm@login``)."""
    return family if login is None else f"{family}@{login.target}"


def list_sweeps(root: str | Path | None = None, *, poll: bool = False,
                client_for: Callable[[str], SchedulerClient] | None = None) -> SweepListing:
    """Every sweep under the sweep root, oldest first; with ``poll``, their live jobs asked of the
    scheduler first, in one batched call per scheduler family.

    Args:
        root: The root (default: found as :func:`hpcjobs.sweep.identity.find_sweep_root` says).
        poll: Ask the scheduler (else the ledgers alone are read).
        client_for: Scheduler family → client (default: :func:`hpcjobs.schedulers.client.client_for`).
    """
    where = find_sweep_root(root)
    listing = SweepListing(where)
    folders = [where.path / name for name in sweep_folders(where.path)]
    live: dict[Path, list[str]] = {}
    schedulers: dict[Path, str] = {}
    logins: dict[Path, RemoteLogin | None] = {}
    if poll:
        for d in folders:
            try:
                with Ledger.open(d, allow_read_only=True) as ledger:
                    places = recorded_places(ledger.meta)  # a sweep on a login node is polled there
                    schedulers[d] = ledger.meta.scheduler
                    logins[d] = places.login if places is not None else None
                    if not capabilities_of(schedulers[d]).runs_here:
                        live[d] = _live_ids(ledger)
            except LedgerError:
                continue
    polled_at: dict[str, float] = {}
    errors: dict[str, str] = {}
    records_by: dict[str, StatusTable] = {}
    clients: dict[str, SchedulerClient] = {}
    groups = {(schedulers[d], logins.get(d)) for d in live if live[d]}
    for family, login in sorted(groups, key=lambda g: (g[0], g[1].target if g[1] else "")):
        key = _group_key(family, login)
        ids = sorted({j for d, js in live.items() if (schedulers[d], logins.get(d)) == (family, login) for j in js})
        if client_for is None:
            from hpcjobs.schedulers.client import client_for as default_client_for

            client_for = default_client_for
        client = clients[key] = client_for(family)
        try:
            with transport.scope():  # one batched call per scheduler and login node
                transport.use(login)
                records_by[key] = client.status_table(ids)
            listing.scheduler_calls += 1
            polled_at[key] = time.time()
        except HpcJobsError as exc:
            errors[key] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("could not ask %s for the sweeps' jobs: %s", key, errors[key])
    for d in folders:
        try:
            with Ledger.open(d, allow_read_only=True) as ledger:
                meta = ledger.meta
                family = _group_key(meta.scheduler, logins.get(d))
                polled = family in polled_at and d in live
                if polled and live[d] and not ledger.read_only:
                    ledger.apply_status(records_by[family], job_key=job_key_of(clients[family].backend))
                last_change = ledger.last_change()
                as_of = polled_at[family] if polled else last_change
                if poll and d in live and not live[d]:
                    polled, as_of = True, time.time()  # nothing live: the ledger is the whole truth
                listing.sweeps.append(SweepSummary(
                    meta.sweep_id, d, meta.site, meta.scheduler, meta.created_at, ledger.summary(), as_of,
                    polled, errors.get(family)))
        except LedgerError:
            continue
    listing.sweeps.sort(key=lambda s: s.created_at)
    return listing


__all__ = ["SweepListing", "SweepSummary", "list_sweeps"]
