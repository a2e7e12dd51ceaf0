"""The notebook entry point: a sweep's parameters joined with what happened to its jobs.

>>> import hpcjobs
>>> df = hpcjobs.load_sweep("train-resnet-1a2b3c4d")      # doctest: +SKIP
>>> df.groupby(["lr", "state"], observed=True).size().unstack(fill_value=0)  # doctest: +SKIP

Imports pandas (``hpcjobs`` itself stays light: this module loads on first use).

The ledger is read by column: SQLite writes the points as newline-delimited JSON in one piece
(:meth:`hpcjobs.sweep.ledger.store.Ledger.point_json`) and Arrow's JSON reader turns it into typed
columns; the points' parameters, stored as canonical JSON, are read the same way into one typed
column each (by Python's ``json`` when a sweep's values are outside what that reader keeps exactly:
a parameter that is a number here and text there, integers past 64 bits, text that looks like a
date). A million-point sweep is then never a million Python records or dicts.

:func:`sweep_results` is the table of ``hpcjobs results``: :func:`load_sweep`'s points with the
ledger's states and the metrics each run wrote (:mod:`hpcjobs.sweep.results` reads them), sorted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from hpcjobs import transport
from hpcjobs.accounting.reports.sweeps import SWEEP_FATE_COLUMNS, sweep_frame
from hpcjobs.accounting.schema import empty_frame
from hpcjobs.accounting.sweep_attempts import (  # noqa: F401 (public here too)
    LEDGER_COLUMNS,
    LEDGER_COLUMNS_UNMATCHED,
    SweepReportData,
    ledger_point_columns,
    load_sweep_report,
    params_frame,
    sweep_attempts_frame,
)
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.remote import fetch_outputs, use_recorded
from hpcjobs.sweep.results import join_results, results_frame, sort_results


def sweep_points_frame(ledger: Ledger) -> pd.DataFrame:
    """One row per point of the ledger: ids, parameters (dict), submission and the ledger's last state."""
    meta = ledger.meta
    cols = ledger.point_columns(("point_id", "index", "params_json", "job_id", "array_job_id", "array_index",
                                 "chunk", "state", "attempt", "exit_code"))
    if not cols["point_id"]:
        return pd.DataFrame()
    df = pd.DataFrame({
        "point_id": cols["point_id"], "index": cols["index"], "params": [json.loads(t) for t in cols["params_json"]],
        "job_id": cols["job_id"], "array_job_id": cols["array_job_id"], "array_index": cols["array_index"],
        "chunk": cols["chunk"], "sweep_id": meta.sweep_id, "ledger_state": cols["state"], "attempt": cols["attempt"],
        "ledger_exit_code": cols["exit_code"],
    })
    for col in ("array_index", "chunk", "attempt", "index", "ledger_exit_code"):
        df[col] = df[col].astype("Int64")
    df["ledger_state"] = df["ledger_state"].astype("category")
    return df


def _fate(points: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """:func:`hpcjobs.accounting.reports.sweeps.sweep_frame` of points without parameters.

    With no accounting rows nothing can match: every fate column is missing (same columns and dtypes).
    """
    if len(jobs):
        return sweep_frame(points, jobs)
    template = sweep_frame(points.iloc[:0], jobs)
    frame = template.reindex(pd.RangeIndex(len(points)))
    frame["point_id"] = pd.array(points["point_id"].to_numpy(), dtype="string")
    frame["index"] = pd.array(points["index"], dtype="Int64")
    return frame


def load_sweep(sweep: str | Path, *, root: str | Path | None = None, jobs: pd.DataFrame | None = None,
               cache: bool = True, results: bool = True) -> pd.DataFrame:
    """Every point of a sweep with its parameters (one typed column each), its job's fate and its results.

    Args:
        sweep: Sweep id, unique id prefix, or folder.
        root: Folder of sweep folders (default ``./hpcjobs-sweeps`` or ``$HPCJOBS_SWEEP_ROOT``).
        jobs: Accounting rows to join (any scheduler, the normalised schema: e.g. from
            :func:`hpcjobs.accounting.sources.pbs.read_pbs_accounting`). Default: asked of the scheduler's
            live accounting for the sweep's jobs where it answers for job ids (Slurm's ``sacct``: one windowed,
            cached query, :func:`hpcjobs.accounting.report_source.query_jobs_of`); on other schedulers, the
            ledger's own record (state and exit code only).
        cache: Cache finished sacct windows on disk, and the points' results read so far.
        results: Add what each run produced: one typed column per metric of the experiment's
            ``results:`` sources (:mod:`hpcjobs.sweep.results`; null where it could not be read,
            with the reason in ``result_error``), and the paths ``log_out``/``log_err`` of the
            point's stdout and stderr.

    Returns:
        ``point_id``, ``index``, the parameters, the fate columns of
        :func:`hpcjobs.accounting.reports.sweeps.sweep_frame` (state, exit code, wait, elapsed,
        efficiencies), plus ``ledger_state`` and ``attempt``, then the metrics, ``result_error``,
        ``log_out`` and ``log_err``; with the experiment's ``tracking:``, each point's tracker runs:
        ``wandb_run_id`` and ``wandb_url``, ``mlflow_run_id`` and ``mlflow_url`` (:mod:`hpcjobs.sweep.tracking`).
    """
    folder = find_sweep(sweep, root)
    with transport.scope():  # a sweep on a login node: one SSH connection for its accounting and its files
        return _load_sweep(folder, jobs, cache, results)


def _load_sweep(folder: Path, jobs: pd.DataFrame | None, cache: bool, results: bool) -> pd.DataFrame:
    with Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        job_ids = sorted({s.job_id for s in ledger.submissions(with_points=False)
                          if s.job_id and s.state == "submitted"})
    if results or jobs is None:
        use_recorded(meta)
    if results:
        fetch_outputs(folder, meta, job_ids)
    if jobs is None:
        from hpcjobs.accounting.report_source import query_jobs_of

        query = query_jobs_of(meta.scheduler) if job_ids else None
        if query is not None:
            from hpcjobs.ids import values_from

            start = datetime.fromtimestamp(meta.created_at, tz=timezone.utc) - timedelta(hours=1)
            with values_from(ledger.path):  # the ids' file, should one not be a job id of the scheduler
                jobs = query(start, job_ids, cache)
        elif capabilities_of(meta.scheduler).runs_here:  # the local runner measured what it ran
            from hpcjobs.accounting.sources.local import local_usage_rows
            from hpcjobs.sweep.local_procs import LocalFiles

            jobs = local_usage_rows(LocalFiles(folder).usages())
        else:
            jobs = empty_frame()
    with Ledger.open(folder, allow_read_only=True) as ledger:  # no accounting rows: no ids to match them by
        points = ledger_point_columns(ledger, LEDGER_COLUMNS if len(jobs) else LEDGER_COLUMNS_UNMATCHED)
        params_text = ledger.params_json_lines()
    if points.empty:
        return sweep_frame(pd.DataFrame(), jobs)
    # matched by the ledger's job ids (and the tag, where the scheduler keeps it): PBS accounting
    # logs carry no comment, so the frame is not filtered on its sweep_id column
    ledger_cols = points[["state", "attempt", "exit_code"]]
    points = points.drop(columns=["state", "attempt", "exit_code"])
    points["sweep_id"] = pd.Categorical([meta.sweep_id]).repeat(len(points))
    fate = _fate(points, jobs)
    params = params_frame(params_text)
    params = params.rename(columns={c: f"param_{c}" for c in params.columns
                                    if c in SWEEP_FATE_COLUMNS or c in ("point_id", "index")})
    frame = pd.concat([fate[["point_id", "index"]], params, fate[list(SWEEP_FATE_COLUMNS)]], axis=1)
    frame["ledger_state"] = ledger_cols["state"].astype(object).astype("category")  # categories as before
    frame["attempt"] = ledger_cols["attempt"]
    # points without an accounting row (local sweeps, jobs not yet in sacct): the ledger's record
    missing = frame["state"].isna() & frame["ledger_state"].astype("string").isin(list(frame["state"].cat.categories))
    if missing.any():
        frame.loc[missing, "state"] = frame.loc[missing, "ledger_state"].astype("string")
        frame.loc[missing, "exit_code"] = ledger_cols["exit_code"][missing]
    if not results:
        return frame
    found = results_frame(folder, points["point_id"].array, cache=cache)
    if found["point_id"].equals(frame["point_id"]):  # in the same order: side by side, no join
        rename = {c: f"result_{c}" for c in found.columns if c != "point_id" and c in frame.columns}
        frame = pd.concat([frame, found.drop(columns="point_id").rename(columns=rename)], axis=1)
    else:
        frame = join_results(frame, found)
    return _with_tracker_runs(frame, folder, meta.sweep_id)


def _with_tracker_runs(frame: pd.DataFrame, folder: Path, sweep_id: str) -> pd.DataFrame:
    """``frame`` with the points' tracker runs (``wandb_run_id``, ``mlflow_run_id``, their URLs), if the sweep
    has ``tracking:`` (:func:`hpcjobs.sweep.tracking.tracking_columns`)."""
    from hpcjobs.sweep.tracking import tracking_columns

    columns = tracking_columns(folder, sweep_id, [str(p) for p in frame["point_id"]])
    for name, values in columns.items():
        frame[name if name not in frame.columns else f"tracking_{name}"] = pd.array(values, dtype="string")
    return frame


def point_efficiencies(folder: Path) -> dict[str, list[float]]:
    """The finished points' efficiencies of one sweep (column → values, missing ones left out), from
    :func:`load_sweep` (the scheduler's accounting), for ``hpcjobs metrics --efficiency``; none where it
    cannot be read (a warning)."""
    from hpcjobs.errors import HpcJobsError

    try:
        frame = load_sweep(folder, results=False)
    except (HpcJobsError, OSError) as exc:
        logging.getLogger("hpcjobs.metrics").warning("sweep %s: no efficiency figures: %s", folder.name, exc)
        return {}
    out: dict[str, list[float]] = {}
    for column in ("cpu_efficiency", "mem_efficiency", "time_efficiency"):
        if column in frame.columns:
            out[column] = [float(v) for v in frame[column].dropna() if float(v) == float(v)]
    return out


def sweep_results(sweep: str | Path, *, root: str | Path | None = None, sort: Sequence[str] = (),
                  top: int | None = None, poll: bool = True, cache: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """The table of ``hpcjobs results``: each point's parameters, state and metrics, sorted.

    Args:
        sweep: Sweep id, unique prefix, or folder.
        root: Folder of sweep folders.
        sort: Columns to sort by (``-val_acc``: descending); nulls last.
        top: Keep the first N rows.
        poll: Ask the scheduler once for the current states first (one batched call).
        cache: Use the results cache.

    Returns:
        The frame (``index``, ``point_id``, parameters, ``state``, ``exit_code``, metrics,
        ``result_error``, ``log_out``, ``log_err``) and the names of the metric columns.

    Raises:
        ConfigError: No such sweep, or a sort column that is not in the table.
    """
    folder = find_sweep(sweep, root)
    if poll:
        sweep_status(folder)
    frame = load_sweep(folder, jobs=empty_frame(), cache=cache, results=False)
    if frame.empty:
        return frame, []
    params = list(frame.columns[2:list(frame.columns).index("job_id")])
    # no accounting rows were joined: the state is the ledger's (SUBMITTED, RUNNING, ... included)
    frame["state"] = frame["ledger_state"].astype("string")
    with Ledger.open(folder, allow_read_only=True) as ledger:
        # a sweep on a login node: new or changed run folders (and its own logs) come here
        fetch_outputs(folder, ledger.meta, [s.job_id for s in ledger.submissions(with_points=False) if s.job_id])
    results = results_frame(folder, list(frame["point_id"].astype(str)), cache=cache)
    joined = join_results(frame, results)
    metrics = list(joined.columns[len(frame.columns):-3])
    table = joined[["index", "point_id", *params, "state", "exit_code", *metrics, "result_error", "log_out",
                    "log_err"]]
    return sort_results(table, sort, top), metrics
