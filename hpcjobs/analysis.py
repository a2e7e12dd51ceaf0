"""The notebook entry point: a sweep's parameters joined with what happened to its jobs.

>>> import hpcjobs
>>> df = hpcjobs.load_sweep("train-resnet-1a2b3c4d")      # doctest: +SKIP
>>> df.groupby(["lr", "state"], observed=True).size().unstack(fill_value=0)  # doctest: +SKIP

Imports pandas (``hpcjobs`` itself stays light: this module loads on first use).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from hpcjobs.accounting.reports.sweeps import sweep_frame
from hpcjobs.accounting.schema import empty_frame
from hpcjobs.sweep.api import find_sweep
from hpcjobs.sweep.ledger import Ledger


def sweep_points_frame(ledger: Ledger) -> pd.DataFrame:
    """One row per point of the ledger: ids, parameters (dict), submission and the ledger's last state."""
    meta = ledger.meta
    rows = [{
        "point_id": p.point_id, "index": p.index, "params": p.params, "job_id": p.job_id,
        "array_job_id": p.array_job_id, "array_index": p.array_index, "chunk": p.chunk,
        "sweep_id": meta.sweep_id, "ledger_state": p.state, "attempt": p.attempt, "ledger_exit_code": p.exit_code,
    } for p in ledger.points()]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    for col in ("array_index", "chunk", "attempt", "index", "ledger_exit_code"):
        df[col] = df[col].astype("Int64")
    df["ledger_state"] = df["ledger_state"].astype("category")
    return df


def load_sweep(sweep: str | Path, *, root: str | Path | None = None, jobs: pd.DataFrame | None = None,
               cache: bool = True, results: bool = True) -> pd.DataFrame:
    """Every point of a sweep with its parameters (one typed column each), its job's fate and its results.

    Args:
        sweep: Sweep id, unique id prefix, or folder.
        root: Folder of sweep folders (default ``./hpcjobs-sweeps`` or ``$HPCJOBS_SWEEP_ROOT``).
        jobs: Accounting rows to join (any scheduler, the normalised schema: e.g. from
            :func:`hpcjobs.accounting.sources.pbs.read_pbs_accounting`). Default: asked of Slurm's ``sacct``
            for the sweep's jobs (one windowed, cached query); on other schedulers, the ledger's
            own record (state and exit code only).
        cache: Cache finished sacct windows on disk, and the points' results read so far.
        results: Add what each run produced: one typed column per metric of the experiment's
            ``results:`` sources (:mod:`hpcjobs.sweep.results`; null where it could not be read,
            with the reason in ``result_error``), and the paths ``log_out``/``log_err`` of the
            point's stdout and stderr.

    Returns:
        ``point_id``, ``index``, the parameters, the fate columns of
        :func:`hpcjobs.accounting.reports.sweeps.sweep_frame` (state, exit code, wait, elapsed,
        efficiencies), plus ``ledger_state`` and ``attempt``, then the metrics, ``result_error``,
        ``log_out`` and ``log_err``.
    """
    folder = find_sweep(sweep, root)
    with Ledger.open(folder) as ledger:
        meta = ledger.meta
        points = sweep_points_frame(ledger)
        job_ids = sorted({s.job_id for s in ledger.submissions() if s.job_id and s.state == "submitted"})
    if jobs is None:
        if meta.scheduler == "slurm" and job_ids:
            from hpcjobs.accounting.sources.slurm import query_sacct

            start = datetime.fromtimestamp(meta.created_at, tz=timezone.utc) - timedelta(hours=1)
            jobs = query_sacct(start, job_ids=job_ids, cache=cache)
        else:
            jobs = empty_frame()
    # matched by the ledger's job ids (and the tag, where the scheduler keeps it): PBS accounting
    # logs carry no comment, so the frame is not filtered on its sweep_id column
    frame = sweep_frame(points, jobs)
    if points.empty:
        return frame
    frame = frame.merge(points[["point_id", "ledger_state", "attempt", "ledger_exit_code"]], on="point_id", how="left")
    # points without an accounting row (local sweeps, jobs not yet in sacct): the ledger's record
    missing = frame["state"].isna() & frame["ledger_state"].astype("string").isin(list(frame["state"].cat.categories))
    if missing.any():
        frame.loc[missing, "state"] = frame.loc[missing, "ledger_state"].astype("string")
        frame.loc[missing, "exit_code"] = frame.loc[missing, "ledger_exit_code"]
    frame = frame.drop(columns=["ledger_exit_code"])
    if not results:
        return frame
    from hpcjobs.sweep.results import join_results, results_frame

    return join_results(frame, results_frame(folder, list(frame["point_id"].astype(str)), cache=cache))
