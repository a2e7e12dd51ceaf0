"""The library calls behind ``hpcjobs sweep | status | cancel | resubmit | ls``.

Each opens the sweep's ledger, makes its scheduler calls through the backend's client (one batched
status call per poll), and returns plain data; the CLI only prints it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcjobs import states, transport
from hpcjobs.errors import ConfigError, ConfigProblem, LedgerError
from hpcjobs.schedulers.client import SchedulerClient, client_for
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.identity import ledger_digest
from hpcjobs.sweep.ledger.store import LEDGER_FILE, Ledger, PointRecord
from hpcjobs.sweep.listing import SweepListing, SweepSummary, list_sweeps
from hpcjobs.sweep.poll import poll_status
from hpcjobs.sweep.prepare import PreparedSweep, prepare_sweep
from hpcjobs.sweep.remote import use_recorded
from hpcjobs.sweep.submitter import (
    SubmitReport,
    SweepSubmitter,
    open_ledger,
    pull_sweep_images,
    submitted_job_ids,
)
from hpcjobs.units import format_walltime_slurm

log = logging.getLogger("hpcjobs.sweep")

Progress = Callable[[int, int], None]


def run_sweep(
    path: str | Path,
    *,
    site: str | None = None,
    overrides: Sequence[str] = (),
    sweep_args: Sequence[str] = (),
    root: str | Path | None = None,
    throttle: int | None = None,
    dry_run: bool = False,
    force: bool = False,
    new: bool = False,
    detach: bool = False,
    workers: int | None = None,
    progress: Progress | None = None,
    client: SchedulerClient | None = None,
    refresh_site: bool = False,
    after: Sequence[str] = (),
    remote: str | None = None,
) -> tuple[PreparedSweep, SubmitReport]:
    """Plan (or resume) a sweep and submit its pending points; on the ``local`` site, run them.

    Running the same command again continues the same sweep: points already submitted are
    never submitted twice, points never submitted are. A sweep of the same name with other content
    is not continued silently (:func:`hpcjobs.sweep.identity.settle_identity`): ``new`` starts another
    sweep, ``force`` continues the newest one of that name with the new content.

    Raises:
        ConfigError: Bad input, or the name is in use by a sweep with other content (nothing is
            written or submitted).
        LedgerError: Another process is submitting the sweep, or the experiment changed (use ``force``).
        SubmitError: The scheduler refused a chunk (what was submitted stays recorded).

    ``after`` holds ``--after`` upstreams (``REF`` or ``ok:``/``any:``/``done:REF``); with the experiment's
    ``after:`` and those its ledger recorded, every chunk waits for them (:mod:`hpcjobs.sweep.pipeline`).

    ``remote`` (``[USER@]HOST[:PORT]``) submits through that login node over SSH, as a site's ``remote:``
    does (:mod:`hpcjobs.transport`): the ledger stays here, the jobs' files go there.
    """
    with transport.scope():  # a site's login node (`remote:`): one SSH connection for the whole call
        return _run_sweep(path, site=site, overrides=overrides, sweep_args=sweep_args, root=root, throttle=throttle,
                          dry_run=dry_run, force=force, new=new, detach=detach, workers=workers, progress=progress,
                          client=client, refresh_site=refresh_site, after=after, remote=remote)


def _run_sweep(path: str | Path, *, site: str | None, overrides: Sequence[str], sweep_args: Sequence[str],
               root: str | Path | None, throttle: int | None, dry_run: bool, force: bool, new: bool, detach: bool,
               workers: int | None, progress: Progress | None, client: SchedulerClient | None, refresh_site: bool,
               after: Sequence[str], remote: str | None) -> tuple[PreparedSweep, SubmitReport]:
    from hpcjobs.sweep.request import SweepRequest, resolve_sweep_request

    resolved = resolve_sweep_request(SweepRequest(path, site, overrides, sweep_args, root, refresh_site, after, new,
                                                  force, remote), client)
    prepared, c = resolved.prepared, resolved.client
    if dry_run:  # what the submission below would do, resolved by the same call; nothing written or submitted
        if resolved.upstreams is None:
            with Ledger.open(prepared.folder, allow_read_only=True) as existing:
                deps, _records = resolved.upstreams_with(existing)
        else:
            deps, _records = resolved.upstreams
        if resolved.runs_here:
            return prepared, _local_dry_run(prepared)
        assert c is not None
        sub = SweepSubmitter(prepared, _DryLedger(prepared), c, throttle=throttle, after=deps)  # type: ignore[arg-type]
        return prepared, sub.submit(dry_run=True)
    how = {"overrides": list(overrides), "sweep_args": list(sweep_args), "site_arg": site,
           "submit_dir": str(prepared.submit_dir), "throttle": throttle,
           **({"remote": prepared.remote.as_dict()} if prepared.remote is not None else {})}
    # a new sweep whose image cannot be fetched (containers.pull: submit) leaves nothing behind
    images = None if resolved.runs_here or (prepared.folder / LEDGER_FILE).exists() else pull_sweep_images(prepared)
    with open_ledger(prepared, force=force, how=how) as ledger:
        deps, records = resolved.upstreams_with(ledger)
        ledger.record_upstreams(records)
        from hpcjobs.config.results import result_sources, write_results_spec

        write_results_spec(prepared.folder, result_sources(prepared.experiment.results),
                           output_dir=prepared.job.output_dir)
        from hpcjobs.sweep.tracking import write_tracking_spec

        write_tracking_spec(prepared.folder, prepared.experiment.tracking, prepared.experiment.name)
        if resolved.runs_here:
            if detach:
                return prepared, _detach_local(prepared, workers)
            from hpcjobs.sweep.local import run_local

            return prepared, run_local(prepared, ledger, workers=workers, progress=progress)
        assert c is not None
        submitter = SweepSubmitter(prepared, ledger, c, throttle=throttle, progress=progress, after=deps,
                                   images=images)
        return prepared, submitter.submit()


def _upstream_args(prepared: PreparedSweep) -> tuple[Any, Path, str, Path]:
    """What :func:`hpcjobs.sweep.pipeline.settle_upstreams` needs of a sweep: experiment, file, scheduler, root."""
    return prepared.experiment, prepared.experiment_path, prepared.site.scheduler, prepared.folder.parent


def _local_dry_run(prepared: PreparedSweep) -> SubmitReport:
    """What a local run would execute: the array script, once per point with HPCJOBS_ARRAY_INDEX set.

    A sweep with no points (a ``filter`` or ``exclude`` that drops them all, an empty W&B ``q_uniform``
    range) runs nothing: no command and no script, as a real run submits nothing.
    """
    from hpcjobs.render.script import render_job
    from hpcjobs.sweep.prepare import array_job_for_chunk

    report = SubmitReport(prepared.sweep_id, len(prepared.points))
    if not len(prepared.points):
        return report
    script = prepared.folder / "scripts" / "0.<token>.sh"
    report.dry_run_commands = [["env", f"HPCJOBS_ARRAY_INDEX={i}", "bash", str(script)]
                               for i in range(len(prepared.points))]
    report.dry_run_script = render_job(array_job_for_chunk(prepared, 0, len(prepared.points), None),
                                       template=prepared.experiment.template).text
    return report


class _DryLedger:
    """Just enough of a ledger for a dry run: every point pending, nothing recorded."""

    def __init__(self, prepared: PreparedSweep) -> None:
        self._points = prepared.points

    def lock(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def pending_points(self) -> list[Any]:
        return list(self._points)

    def pending_ids(self) -> list[str]:
        rows = getattr(self._points, "ledger_rows", None)
        return [r[1] for r in rows()] if rows is not None else [p.point_id for p in self._points]

    def submissions(self, state: Any = None, *, with_points: bool = True) -> list[Any]:
        return []

    def max_chunk(self) -> int | None:
        return None


def _detach_local(prepared: PreparedSweep, workers: int | None) -> SubmitReport:
    """Start the local runner in its own session and return at once."""
    log = prepared.folder / "local-runner.log"
    prepared.folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "hpcjobs", "sweep-run-local", str(prepared.folder)]
    if workers:
        argv += ["--workers", str(workers)]
    from hpcjobs.process import start_process
    from hpcjobs.safe_files import open_own_file

    # appended to, never through a link; its own session: it outlives this command and the terminal
    with os.fdopen(open_own_file(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:
        proc = start_process(argv, stdout=out.fileno(), stderr=out.fileno(), cwd=prepared.submit_dir,
                             new_session=True)
    report = SubmitReport(prepared.sweep_id, len(prepared.points))
    report.job_ids.append(f"local runner pid {proc.pid}")
    return report


# ----------------------------------------------------------------------------- finding sweeps


def prepared_from_ledger(folder: Path, *, extra_overrides: Sequence[str] = (), force: bool = False) -> PreparedSweep:
    """Prepare a sweep again from what its ledger recorded (file, overrides, site), keeping its id."""
    with transport.scope():
        return _prepared_from_ledger(folder, extra_overrides, force)


def _prepared_from_ledger(folder: Path, extra_overrides: Sequence[str], force: bool) -> PreparedSweep:
    with Ledger.open(folder) as ledger:
        meta = ledger.meta
    how = meta.extra
    prepared = prepare_sweep(meta.experiment_path, site=how.get("site_arg"),
                             overrides=[*how.get("overrides", []), *extra_overrides],
                             sweep_args=how.get("sweep_args", []), root=folder.parent,
                             submit_dir=how.get("submit_dir"), ask_scheduler=True)
    prepared = dataclasses.replace(prepared, sweep_id=meta.sweep_id, folder=folder)
    places = use_recorded(meta)
    if places is not None:  # where its jobs already read their files
        prepared = dataclasses.replace(prepared, remote=places)
    else:
        from hpcjobs.sweep.request import over_login_node

        prepared = over_login_node(prepared)
    planned = prepared  # the change check compares the experiment as planned, before this retry's overrides
    if extra_overrides:
        from hpcjobs.config.loading import load_experiment

        planned = dataclasses.replace(prepared, experiment=load_experiment(meta.experiment_path,
                                                                           how.get("overrides", []))[0])
    if ledger_digest(planned) != meta.experiment_sha256 and not force:
        raise LedgerError(f"{meta.experiment_path} changed since sweep {meta.sweep_id} was planned; "
                          "use --force to go on with the new text")
    return prepared


# ----------------------------------------------------------------------------- status


#: Points a status reads by default (``SweepStatus.points``): a page, not a million records.
POINTS_PAGE = 1000


@dataclass(frozen=True)
class SweepStatus:
    """A sweep's state after one status poll.

    Attributes:
        sweep_id: The sweep.
        folder: Its folder.
        site: Site name.
        scheduler: Scheduler family.
        counts: Points per state (from the ledger's counts, not a pass over the points).
        points: The records of one page of points, in index order (``points_offset`` on; all of them
            when the status was asked with ``points_limit=None``).
        changed: How many points the poll changed.
        read_only: The ledger could not be written: this poll's result was shown, not recorded.
        points_offset: Index (in the listing order) of the page's first point.
        upstream_cancelled: Jobs this poll cancelled because an upstream failed (Slurm's
            ``DependencyNeverSatisfied``; :func:`hpcjobs.sweep.pipeline.cancel_blocked`).
        upstreams: What the sweep waits for, as its ledger records it (``after:``, ``--after``).
    """

    sweep_id: str
    folder: Path
    site: str
    scheduler: str
    counts: dict[str, int]
    points: list[PointRecord]
    changed: int
    read_only: bool = False
    points_offset: int = 0
    upstream_cancelled: tuple[str, ...] = ()
    upstreams: tuple[Any, ...] = ()

    @property
    def total(self) -> int:
        """Points in the sweep (removed ones excluded)."""
        return sum(n for s, n in self.counts.items() if s != "REMOVED")

    @property
    def finished(self) -> int:
        """Points in a terminal state."""
        return sum(n for s, n in self.counts.items() if s in states.TERMINAL_STATES)

    @property
    def done(self) -> bool:
        """Every point is finished."""
        return self.finished == self.total

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "sweep_id": self.sweep_id, "folder": str(self.folder), "site": self.site, "scheduler": self.scheduler,
            "total": self.total, "finished": self.finished, "counts": self.counts,
            "points": [{"point_id": p.point_id, "index": p.index, "params": p.params, "state": p.state,
                        "state_raw": p.state_raw, "exit_code": p.exit_code, "job_id": p.job_id,
                        "array_job_id": p.array_job_id, "array_index": p.array_index, "attempt": p.attempt}
                       for p in self.points],
            "points_offset": self.points_offset,
            "read_only": self.read_only,
            "upstream_cancelled": list(self.upstream_cancelled),
            "upstreams": [{"ref": u.ref, "when": u.condition, "sweep_id": u.sweep_id, "job_ids": list(u.job_ids),
                           "cancelled": list(u.cancelled)} for u in self.upstreams],
        }


def sweep_status(name: str | Path, *, root: str | Path | None = None, poll: bool = True,
                 client: SchedulerClient | None = None, points_offset: int = 0,
                 points_limit: int | None = POINTS_PAGE, points_state: str | Sequence[str] | None = None,
                 ) -> SweepStatus:
    """Poll the scheduler once for the sweep's live jobs (one batched call) and read the ledger.

    Args:
        name: Sweep id, name, unique prefix or folder.
        root: Folder of sweep folders.
        poll: Ask the scheduler (else the ledger alone is read).
        client: The scheduler client (default: the sweep's scheduler's).
        points_offset: First point of the page of records read (index order).
        points_limit: Records read at most (``0``: none; ``None``: every point).
        points_state: Only points in this state (or these states) in the page.
    """
    folder = find_sweep(name, root)
    with transport.scope(), Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        if poll:
            use_recorded(meta)
        changed = 0
        if ledger.read_only:
            import logging

            logging.getLogger("hpcjobs.sweep").warning(
                "the ledger %s is read-only for you: showing the scheduler's answer without recording it", ledger.path)
        cancelled: list[str] = []
        if poll and not capabilities_of(meta.scheduler).runs_here:
            from hpcjobs.sweep.pipeline import cancel_blocked

            c = client or client_for(meta.scheduler)
            changed = poll_status(ledger, c)
            cancelled = cancel_blocked(ledger, c)  # a job whose upstream failed would wait for ever
        elif poll and not ledger.read_only:
            from hpcjobs.sweep.local import settle_if_idle

            changed = settle_if_idle(ledger)  # a dead local runner's points: from their exit files
        page = [] if points_limit == 0 else ledger.points(points_state, offset=points_offset, limit=points_limit)
        return SweepStatus(meta.sweep_id, folder, meta.site, meta.scheduler, ledger.summary(), page, changed,
                           ledger.read_only, points_offset, tuple(cancelled), tuple(ledger.upstreams()))


def cancel_sweep(name: str | Path, *, root: str | Path | None = None,
                 client: SchedulerClient | None = None) -> list[str]:
    """Cancel the sweep's queued and running jobs (one call) and its never-submitted points.

    Returns:
        The job ids cancelled.
    """
    folder = find_sweep(name, root)
    with transport.scope(), Ledger.open(folder) as ledger:
        meta = ledger.meta
        use_recorded(meta)
        c = None
        runs_here = capabilities_of(meta.scheduler).runs_here
        recorded = [s.job_id for s in ledger.live_submissions(with_unseated=False) if s.job_id]
        if recorded and not runs_here:  # the recorded ids are checked before anything changes
            c = client or client_for(meta.scheduler)
            c.backend.check_job_ids(recorded)
        ledger.cancel_pending()
        ids = [s.job_id for s in ledger.live_submissions(with_unseated=False) if s.job_id]
        if runs_here:
            return _cancel_local(ledger)
        if ids:
            c = c or client or client_for(meta.scheduler)
            c.cancel(ids)
            poll_status(ledger, c)
        return ids


def _cancel_local(ledger: Ledger) -> list[str]:
    """Cancel a local sweep: only the process groups hpcjobs started and recorded (pid and start time)."""
    from hpcjobs.sweep.local import cancel_local

    return cancel_local(ledger)


def resubmit_sweep(
    name: str | Path,
    *,
    which: Sequence[str] = tuple(sorted(states.FAILURE_STATES)),
    overrides: Sequence[str] = (),
    scale_walltime: float | None = None,
    root: str | Path | None = None,
    throttle: int | None = None,
    force: bool = False,
    client: SchedulerClient | None = None,
) -> tuple[PreparedSweep, SubmitReport, int]:
    """Resubmit finished points in the given states, optionally with changed resources.

    Args:
        which: States whose points go again (default: every failure state).
        overrides: ``--set`` overrides for the new attempt (e.g. ``resources.memory=32G``).
        scale_walltime: Multiply the wall time (e.g. 2 for points that timed out).

    Returns:
        The re-prepared sweep, the submission report, and how many points were reset.
    """
    with transport.scope():  # over SSH: one connection for the re-preparation and the submission
        return _resubmit(find_sweep(name, root), which, overrides, scale_walltime, throttle, force, client)


def _resubmit(folder: Path, which: Sequence[str], overrides: Sequence[str], scale_walltime: float | None,
              throttle: int | None, force: bool, client: SchedulerClient | None,
              ) -> tuple[PreparedSweep, SubmitReport, int]:
    extra = list(overrides)
    if scale_walltime:
        base = prepared_from_ledger(folder, extra_overrides=extra, force=force)
        if base.job.walltime is None:
            raise ConfigError(ConfigProblem("the job has no wall time to scale; use --set resources.walltime=...",
                                            key="resources.walltime"))
        extra.append(f"resources.walltime={format_walltime_slurm(int(base.job.walltime * scale_walltime))}")
    prepared = prepared_from_ledger(folder, extra_overrides=extra, force=force)
    runs_here = capabilities_of(prepared.site.scheduler).runs_here
    with Ledger.open(folder) as ledger:
        c = client or (None if runs_here else client_for(prepared.site.scheduler))
        if c is not None:
            poll_status(ledger, c)
        chosen = ledger.points(list(which))
        if c is not None:  # finished in the ledger, and not queued again by the scheduler (a requeue)
            from hpcjobs.sweep.lookup import still_queued

            queued = still_queued(c, chosen)
            if queued:
                log.warning("%d point(s) are queued again by the scheduler (requeued), not resubmitted: %s",
                            len(queued), ", ".join(f"{p} (job {j})" for p, j in list(queued.items())[:10]))
            chosen = [p for p in chosen if p.point_id not in queued]
        reset = ledger.reset_for_resubmit([p.point_id for p in chosen])
        if runs_here:
            from hpcjobs.sweep.local import run_local

            return prepared, run_local(prepared, ledger), reset
        assert c is not None
        from hpcjobs.sweep.pipeline import settle_upstreams

        deps, records = (settle_upstreams(*_upstream_args(prepared), ledger.upstreams(), c, (), prepared.site.name)
                          if reset else ((), []))
        ledger.record_upstreams(records)
        return prepared, SweepSubmitter(prepared, ledger, c, throttle=throttle, after=deps).submit(), reset


__all__ = ["SweepListing", "SweepStatus", "SweepSummary", "cancel_sweep", "find_sweep", "list_sweeps",
           "prepared_from_ledger", "resubmit_sweep", "run_sweep", "submitted_job_ids", "sweep_status"]
