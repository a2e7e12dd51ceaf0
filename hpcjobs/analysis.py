"""The notebook entry point: a sweep's parameters joined with what happened to its jobs.

>>> import hpcjobs
>>> df = hpcjobs.load_sweep("train-resnet-1a2b3c4d")      # doctest: +SKIP
>>> df.groupby(["lr", "state"], observed=True).size().unstack(fill_value=0)  # doctest: +SKIP

Imports pandas (``hpcjobs`` itself stays light: this module loads on first use).

The ledger is read by column: SQLite writes the points as newline-delimited JSON in one piece
(:meth:`hpcjobs.sweep.ledger.Ledger.point_json`) and Arrow's JSON reader turns it into typed
columns; the points' parameters, stored as canonical JSON, are read the same way into one typed
column each (by Python's ``json`` when a sweep's values are outside what that reader keeps exactly:
a parameter that is a number here and text there, integers past 64 bits, text that looks like a
date). A million-point sweep is then never a million Python records or dicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcjobs.accounting.reports.sweeps import SWEEP_FATE_COLUMNS, sweep_frame
from hpcjobs.accounting.schema import empty_frame
from hpcjobs.sweep.api import find_sweep
from hpcjobs.sweep.ledger import Ledger

if TYPE_CHECKING:
    from hpcjobs.accounting.report_source import ReportFilters

#: The ledger's columns load_sweep reads, with their Arrow types.
_COLUMNS = (("point_id", "string"), ("index", "int64"), ("job_id", "string"), ("array_job_id", "string"),
            ("array_index", "int64"), ("chunk", "int64"), ("state", "string"), ("attempt", "int64"),
            ("exit_code", "int64"))
#: Those needed when there are no accounting rows to match.
_COLUMNS_UNMATCHED = tuple(c for c in _COLUMNS if c[0] in ("point_id", "index", "state", "attempt", "exit_code"))
#: Digits Arrow could read as a lossy double instead of an integer past 64 bits.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


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


def params_frame(params_json: Sequence[str] | bytes) -> pd.DataFrame:
    """One typed column per parameter from the points' canonical JSON (a list, or newline-delimited), as
    ``pandas.DataFrame.from_records`` of the parsed dicts gives it (``infer_objects().convert_dtypes()``),
    read by Arrow."""
    data = params_json if isinstance(params_json, bytes) else "\n".join(params_json).encode("utf-8")
    n = data.count(b"\n") + 1 if data else 0  # canonical JSON has no raw line break
    if len(data) == 3 * n - 1 and data.count(b"{}") == n:  # no parameters at all
        return pd.DataFrame.from_records([{}] * n, index=pd.RangeIndex(n)).infer_objects().convert_dtypes()
    table = None
    if not _LONG_DIGITS.search(data):
        import pyarrow as pa
        import pyarrow.json as pa_json

        try:
            table = pa_json.read_json(pa.py_buffer(data), parse_options=pa_json.ParseOptions(newlines_in_values=False))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
        if table is not None and (table.num_rows != n or not all(
                pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t) for t in table.schema.types)):
            table = None  # a date-like text read as a timestamp, a column of nulls only: Python decides
    if table is None:
        frame = pd.DataFrame.from_records([json.loads(t) for t in data.split(b"\n")], index=pd.RangeIndex(n))
    else:
        frame = table.to_pandas()
    return frame.infer_objects().convert_dtypes()


def _points(ledger: Ledger, columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """The ledger's ``columns`` (name, Arrow type) of every point, in index order, read by Arrow."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    data = ledger.point_json([name for name, _ in columns])
    types = {"string": pa.string(), "int64": pa.int64()}
    schema = pa.schema([(f"c{i}", types[kind]) for i, (_, kind) in enumerate(columns)])
    if not data:
        table = schema.empty_table()
    else:
        table = pa_json.read_json(pa.py_buffer(data), parse_options=pa_json.ParseOptions(
            explicit_schema=schema, newlines_in_values=False))
    mapper = {pa.string(): pd.StringDtype(), pa.int64(): pd.Int64Dtype()}.get
    frame = table.to_pandas(types_mapper=mapper)
    frame.columns = [name for name, _ in columns]
    return frame


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
        ``log_out`` and ``log_err``.
    """
    folder = find_sweep(sweep, root)
    with Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        job_ids = sorted({s.job_id for s in ledger.submissions(with_points=False)
                          if s.job_id and s.state == "submitted"})
    if jobs is None:
        from hpcjobs.accounting.report_source import query_jobs_of

        query = query_jobs_of(meta.scheduler) if job_ids else None
        if query is not None:
            from hpcjobs.ids import values_from

            start = datetime.fromtimestamp(meta.created_at, tz=timezone.utc) - timedelta(hours=1)
            with values_from(ledger.path):  # the ids' file, should one not be a job id of the scheduler
                jobs = query(start, job_ids, cache)
        else:
            jobs = empty_frame()
    with Ledger.open(folder, allow_read_only=True) as ledger:  # no accounting rows: no ids to match them by
        points = _points(ledger, _COLUMNS if len(jobs) else _COLUMNS_UNMATCHED)
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
    from hpcjobs.sweep.results import join_results, results_frame

    found = results_frame(folder, points["point_id"].array, cache=cache)
    if found["point_id"].equals(frame["point_id"]):  # in the same order: side by side, no join
        rename = {c: f"result_{c}" for c in found.columns if c != "point_id" and c in frame.columns}
        return pd.concat([frame, found.drop(columns="point_id").rename(columns=rename)], axis=1)
    return join_results(frame, found)


def sweep_attempts_frame(ledger: Ledger) -> pd.DataFrame:
    """One row per attempt of every point of a sweep: its current attempt (``final``) and the attempts a
    resubmission replaced, with the point's parameters (one typed column each).

    Returns:
        :data:`hpcjobs.accounting.reports.sweeps.ATTEMPT_COLUMNS`, then the parameters (a parameter named
        like one of those columns gets a ``param_`` prefix); in point order, earlier attempts first.
    """
    from hpcjobs.accounting.reports.sweeps import ATTEMPT_COLUMNS

    meta = ledger.meta
    current = _points(ledger, _COLUMNS).rename(columns={"state": "ledger_state", "exit_code": "ledger_exit_code"})
    params = params_frame(ledger.params_json_lines()) if len(current) else pd.DataFrame(index=current.index)
    params = params.rename(columns={c: f"param_{c}" for c in params.columns if c in ATTEMPT_COLUMNS})
    current = pd.concat([current, params], axis=1)
    current["final"] = True
    earlier_cols = ledger.earlier_attempt_columns()
    earlier = pd.DataFrame({
        "point_id": pd.array(earlier_cols["point_id"], dtype="string"),
        "attempt": pd.array(earlier_cols["attempt"], dtype="Int64"),
        "chunk": pd.array(earlier_cols["chunk"], dtype="Int64"),
        "array_job_id": pd.array(earlier_cols["array_job_id"], dtype="string"),
        "array_index": pd.array(earlier_cols["array_index"], dtype="Int64"),
        "job_id": pd.array(earlier_cols["job_id"], dtype="string"),
        "ledger_state": pd.array(earlier_cols["state"], dtype="string"),
        "ledger_exit_code": pd.array(earlier_cols["exit_code"], dtype="Int64"),
    })
    by_point = current.set_index("point_id")
    for col in ("index", *params.columns):
        earlier[col] = pd.array(earlier["point_id"].map(by_point[col]), dtype=by_point[col].dtype)
    earlier["final"] = False
    frame = pd.concat([earlier, current], ignore_index=True) if len(earlier) else current.reset_index(drop=True)
    frame["sweep_id"] = pd.array([meta.sweep_id] * len(frame), dtype="string")
    frame["ledger_state"] = frame["ledger_state"].astype("string")
    frame = frame.sort_values(["index", "attempt"], kind="stable").reset_index(drop=True)
    return frame[[*ATTEMPT_COLUMNS, *params.columns]]


@dataclass
class SweepReportData:
    """What ``hpcjobs report --sweep`` reports on.

    Attributes:
        sweep_id: The sweep.
        jobs: The schema rows the report counts: each point's final attempt (or every attempt).
        attempts: The sweep's attempts from its ledger (:func:`sweep_attempts_frame`), or ``None`` when the
            sweep is not on this machine (the accounting data alone: every attempt counts).
        all_attempts: Whether ``jobs`` holds the replaced attempts too.
    """

    sweep_id: str
    jobs: pd.DataFrame
    attempts: pd.DataFrame | None
    all_attempts: bool


def load_sweep_report(filters: ReportFilters, *, all_attempts: bool = False, **read: Any) -> SweepReportData:
    """The accounting rows of one sweep (``filters.sweep``), each point counted once by its final attempt.

    The sweep is the one ``status``/``cancel``/``resubmit`` would take (exact id, name, unique prefix or
    folder, on this machine), else the sweep id in the accounting data it matches the same way. With
    the sweep's ledger at hand, a live query starts an hour before the sweep was planned when no
    ``since`` is given.

    Args:
        filters: The report's filters; ``sweep`` is required.
        all_attempts: Keep the attempts a resubmission replaced.
        **read: What :func:`hpcjobs.accounting.report_source.load_report_frame` takes besides the filters.

    Raises:
        ConfigError: No sweep given, no such sweep (here or in the data), or an ambiguous one (exit 2).
    """
    from dataclasses import replace

    from hpcjobs.accounting.report_source import has_live_accounting, load_report_frame, local_sweep
    from hpcjobs.accounting.reports.sweeps import final_attempts
    from hpcjobs.errors import ConfigError

    if not filters.sweep:
        raise ConfigError("a sweep report needs --sweep")
    folder = local_sweep(filters.sweep)
    if folder is None:
        df = load_report_frame(filters, **read)
        ids = df["sweep_id"].dropna().astype(str).unique().tolist()
        return SweepReportData(ids[0] if len(ids) == 1 else filters.sweep, df, None, True)
    with Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        attempts = sweep_attempts_frame(ledger)
    if read.get("from_file") is None and read.get("scheduler") is None and has_live_accounting(meta.scheduler):
        read = {**read, "scheduler": meta.scheduler}  # asked live, of the sweep's own scheduler
    if filters.since is None and read.get("from_file") is None:
        filters = replace(filters, since=datetime.fromtimestamp(meta.created_at, tz=timezone.utc) - timedelta(hours=1))
    df = load_report_frame(replace(filters, sweep=meta.sweep_id), **read)
    if not all_attempts:
        df = final_attempts(df, attempts)
    return SweepReportData(meta.sweep_id, df, attempts, all_attempts)
