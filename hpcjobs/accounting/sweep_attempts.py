"""A sweep's attempts beside its accounting rows: what ``hpcjobs report --sweep`` counts.

Each point of a sweep has a current attempt and the attempts a resubmission replaced; the ledger
holds them and the sweep's parameters, the scheduler's accounting holds the jobs. The frames here
join the two so that a report counts each point once, by its final attempt (or every attempt).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcjobs.sweep.ledger.store import Ledger

if TYPE_CHECKING:
    from hpcjobs.accounting.report_source import ReportFilters

#: The ledger's columns a sweep's frames read (:func:`hpcjobs.analysis.load_sweep` too), with their Arrow types.
LEDGER_COLUMNS = (("point_id", "string"), ("index", "int64"), ("job_id", "string"), ("array_job_id", "string"),
            ("array_index", "int64"), ("chunk", "int64"), ("state", "string"), ("attempt", "int64"),
            ("exit_code", "int64"))
#: Those needed when there are no accounting rows to match.
LEDGER_COLUMNS_UNMATCHED = tuple(c for c in LEDGER_COLUMNS
                                 if c[0] in ("point_id", "index", "state", "attempt", "exit_code"))
#: Digits Arrow could read as a lossy double instead of an integer past 64 bits.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


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


def ledger_point_columns(ledger: Ledger, columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
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


def sweep_attempts_frame(ledger: Ledger) -> pd.DataFrame:
    """One row per attempt of every point of a sweep: its current attempt (``final``) and the attempts a
    resubmission replaced, with the point's parameters (one typed column each).

    Returns:
        :data:`hpcjobs.accounting.reports.sweeps.ATTEMPT_COLUMNS`, then the parameters (a parameter named
        like one of those columns gets a ``param_`` prefix); in point order, earlier attempts first.
    """
    from hpcjobs.accounting.reports.sweeps import ATTEMPT_COLUMNS

    meta = ledger.meta
    current = ledger_point_columns(ledger, LEDGER_COLUMNS).rename(
        columns={"state": "ledger_state", "exit_code": "ledger_exit_code"})
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
    from hpcjobs import transport

    if transport.session() is None and read.get("from_file") is None:
        from hpcjobs.sweep.remote import use_recorded

        use_recorded(meta)  # a sweep submitted over SSH: its login node's accounting (inside build_report's scope)
    from hpcjobs.schedulers.registry import capabilities_of

    if read.get("from_file") is None and capabilities_of(meta.scheduler).runs_here:  # what the local runner measured
        from hpcjobs.accounting.sources.local import local_usage_rows
        from hpcjobs.sweep.local_procs import LocalFiles

        df = local_usage_rows(LocalFiles(folder).usages())
        if not all_attempts:
            df = final_attempts(df, attempts)
        return SweepReportData(meta.sweep_id, df, attempts, all_attempts)
    if read.get("from_file") is None and read.get("scheduler") is None and has_live_accounting(meta.scheduler):
        read = {**read, "scheduler": meta.scheduler}  # asked live, of the sweep's own scheduler
    if filters.since is None and read.get("from_file") is None:
        filters = replace(filters, since=datetime.fromtimestamp(meta.created_at, tz=timezone.utc) - timedelta(hours=1))
    df = load_report_frame(replace(filters, sweep=meta.sweep_id), **read)
    if not all_attempts:
        df = final_attempts(df, attempts)
    return SweepReportData(meta.sweep_id, df, attempts, all_attempts)
