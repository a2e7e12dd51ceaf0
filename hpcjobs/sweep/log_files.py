"""Which log files ``hpcjobs logs`` shows: a sweep's points (all, one, or those in some states) or a single job's.

:func:`sweep_logs` finds the sweep (:func:`hpcjobs.sweep.find.find_sweep`), brings its states up to
date when the selection depends on them (one status poll), and names each selected point's files
(:class:`hpcjobs.sweep.logs.PointLogs`); a single job of ``hpcjobs submit`` has the files its
directives name, of the attempt its job id names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcjobs import states, transport
from hpcjobs.config.results import read_results_spec
from hpcjobs.errors import ConfigError, ConfigProblem, HpcJobsError
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.logs import (
    LOG_ERR,
    LOG_OUT,
    POINTS_DIR,
    PointLogs,
    log_command,
    scheduler_log_stem,
    single_job_log_paths,
)
from hpcjobs.sweep.remote import fetch_outputs, use_recorded
from hpcjobs.sweep.singles_read import job_ids_match, settle_exit_code


def _single_logs(folder: Path, meta: Any, record: Any, attempts: Sequence[dict[str, Any]],
                 asked: str) -> PointLogs:
    """The log files of a single job: of the attempt whose job id is ``asked``, else of the last one."""
    extra = meta.extra
    job_id, state, exit_code = record.job_id, record.state, record.exit_code
    for old in attempts:  # ``logs 1234`` after a resubmit: the files of job 1234, not of its successor
        if old.get("job_id") and job_ids_match(str(old["job_id"]), asked) and not (
                job_id and job_ids_match(job_id, asked)):
            job_id, state, exit_code = str(old["job_id"]), str(old["state"]), old.get("exit_code")
    if not job_id:
        raise ConfigError(ConfigProblem(f"job {meta.sweep_id} has no job id ({state}): it was never submitted, "
                                        "so it has no output", key="job"))
    if not extra.get("default_logs", True) and capabilities_of(meta.scheduler).logs_command:
        command = log_command(meta.scheduler, job_id)
        raise ConfigError(ConfigProblem(f"job {job_id}: the site does not mount the submit directory into the job, "
                                        f"so its output is only in the scheduler's log: {command}", key="job"))
    if not extra.get("default_logs", True):
        raise ConfigError(ConfigProblem(f"job {job_id}: the experiment's own directives (--output/-o) choose its "
                                        "output files; look there", key="job"))
    out, err = single_job_log_paths(meta.scheduler, str(extra.get("name") or ""), str(extra.get("output_dir")),
                                    job_id, str(extra.get("submit_dir")))
    return PointLogs(record.point_id, record.index, state, exit_code, job_id, {}, out, err, None, None, True)


def sweep_logs(sweep: str | Path, *, root: str | Path | None = None, point: str | None = None,
               index: int | None = None, only_states: Sequence[str] = (), failed: bool = False,
               poll: bool = True) -> list[PointLogs]:
    """The log files of a sweep's points, all of them or a selection.

    Args:
        sweep: Sweep id, unique prefix, or folder.
        root: Folder of sweep folders.
        point: A point id (or a unique prefix of one).
        index: A point's index.
        only_states: Points in these states.
        failed: Points in any failure state.
        poll: Ask the scheduler once for the current states first (for ``failed``/``only_states``).

    Raises:
        ConfigError: No such sweep or point.
    """
    folder = find_sweep(sweep, root)
    if point is not None:
        from hpcjobs.ids import check_id_argument

        check_id_argument(point, what="point", key="point")
    wanted = {s.upper() for s in only_states} | (set(states.FAILURE_STATES) if failed else set())
    with transport.scope():  # a sweep on a login node: one SSH connection for its files and its state
        with Ledger.open(folder, allow_read_only=True) as ledger:
            use_recorded(ledger.meta)
            # its new run folders and its own logs (by job number) come here first
            fetch_outputs(folder, ledger.meta, [s.job_id for s in ledger.submissions(with_points=False) if s.job_id])
            single = ledger.meta.extra.get("kind") == "job"
        if poll and wanted:
            sweep_status(folder)
        elif poll and single:  # the header shows the job's current state: one call while it is live
            try:
                sweep_status(folder)
                settle_exit_code(folder)
            except HpcJobsError as exc:  # the files are worth showing all the same
                logging.getLogger("hpcjobs.sweep").warning("could not ask the scheduler for the job's state: %s",
                                                           exc)
    with Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        records = ledger.points()
        if single and records:  # a single job of `hpcjobs submit`
            one = _single_logs(folder, meta, records[0], ledger.attempts(records[0].point_id), str(sweep))
            return [one] if not wanted or one.state in wanted else []
    output_dir = read_results_spec(folder)[1]
    if point is not None:
        from hpcjobs.ids import match_prefix

        exact = [r for r in records if r.point_id == point]
        prefixed = exact[0].point_id if len(exact) == 1 else match_prefix(
            point, [r.point_id for r in records], what="point", key="point", where=f" in sweep {meta.sweep_id}")
        records = [r for r in records if r.point_id == prefixed]
        if len(records) != 1:
            raise ConfigError(ConfigProblem(f"no point {point!r} in sweep {meta.sweep_id}", key="point"))
    if index is not None:
        records = [r for r in records if r.index == index]
        if not records:
            raise ConfigError(ConfigProblem(f"sweep {meta.sweep_id} has no point with index {index}", key="index"))
    if wanted:
        records = [r for r in records if r.state in wanted]
    name = str(meta.extra.get("name") or meta.sweep_id.rsplit("-", 1)[0])
    out = []
    for r in records:
        stem = scheduler_log_stem(meta.scheduler, submit_dir=meta.extra.get("submit_dir"), output_dir=output_dir,
                                  name=name, sweep_id=meta.sweep_id, chunk=r.chunk, array_job_id=r.array_job_id,
                                  array_index=r.array_index)
        run_dir = folder / POINTS_DIR / r.point_id
        out.append(PointLogs(r.point_id, r.index, r.state, r.exit_code, r.job_id, r.params, run_dir / LOG_OUT,
                             run_dir / LOG_ERR, stem and stem.with_name(stem.name + ".out"),
                             stem and stem.with_name(stem.name + ".err"), folder=folder))
    return out


__all__ = ["sweep_logs"]
