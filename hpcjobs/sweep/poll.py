"""One status poll of a sweep: a batched call for its live jobs, applied to its ledger.

:func:`poll_status` is what ``hpcjobs status`` (and every command that brings a sweep up to date)
runs: the scheduler is asked once about the accepted submissions that still have unfinished points,
only the points whose record changed are written, a packed sweep's points are corrected from their
exit files (:func:`hpcjobs.sweep.pack.refine_packed`), and ids the scheduler keeps not knowing are
settled (:func:`hpcjobs.sweep.lookup.settle_unseen`).
"""

from __future__ import annotations

import hashlib
import logging

from hpcjobs.errors import HpcJobsError
from hpcjobs.schedulers.base import job_key_of, same_job_of
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.status_table import StatusTable
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import settle_unseen
from hpcjobs.sweep.pack import packed_tokens, refine_packed
from hpcjobs.sweep.remote import recorded_places, remote_exit_reader

log = logging.getLogger("hpcjobs.sweep")


def poll_status(ledger: Ledger, client: SchedulerClient, *, active_only: bool = True) -> int:
    """One batched status call for the sweep's jobs, applied to the ledger.

    Only the accepted submissions that still have unfinished points are asked about (``active_only``),
    the answer is read by column (:meth:`hpcjobs.schedulers.client.SchedulerClient.status_table`) and
    only the points whose record changed are written (:meth:`hpcjobs.sweep.ledger.store.Ledger.apply_status`);
    an answer identical to the last one applied, to the same ids of an unchanged ledger, is recognised
    by its SHA-256 and not read again (:meth:`hpcjobs.sweep.ledger.store.Ledger.poll_memo`).
    Job ids the scheduler keeps not knowing are given a grace period, then looked up by tag and,
    when no job carries their token, marked lost so that their points can go again
    (:func:`hpcjobs.sweep.lookup.settle_unseen`).

    Returns:
        How many points changed.
    """
    if active_only:
        subs = ledger.live_submissions()
    else:
        subs = [s for s in ledger.submissions(with_points=False) if s.job_id and s.state == "submitted"]
    ids = [s.job_id for s in subs if s.job_id]
    if not ids:
        _retire(ledger, client)
        return 0
    key, same = job_key_of(client.backend), same_job_of(client.backend)
    asked = hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()

    def reuse(answer: str) -> StatusTable | None:  # the answer applied last, to this same ledger: nothing to read
        return StatusTable.recognised(answer, ids) if ledger.poll_memo(answer, asked) else None

    table = client.status_table(ids, reuse=reuse)
    complete = all(table.covers(j, same) for j in ids)
    changed = ledger.apply_status(table, job_key=key, asked_sha256=asked if complete else None)
    tokens = packed_tokens(ledger, subs)
    places = recorded_places(ledger.meta) if tokens else None
    changed += refine_packed(ledger, ledger.path.parent, tokens,
                             remote_exit_reader(places) if places is not None else None)
    lost = settle_unseen(ledger, client, subs, table)
    if changed:
        _retire(ledger, client)
    return changed + sum(len(ledger.submission(t).point_ids) for t in lost)


def _retire(ledger: Ledger, client: SchedulerClient) -> None:
    """Remove jobs the scheduler keeps after they finished (Swarm), once the ledger recorded their points."""
    if not client.backend.capabilities.retire:
        return
    from hpcjobs.sweep.retire import retire_finished

    try:
        retire_finished(ledger, client)
    except HpcJobsError as exc:  # the poll itself succeeded: a later one tries again
        log.warning("could not remove finished jobs: %s", exc)


__all__ = ["poll_status"]
