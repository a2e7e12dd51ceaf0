"""Sweep analysis: one row per sweep point with its parameters and its job's fate; failures by parameter.

:func:`sweep_frame` is the core of the notebook entry point: it joins the points of a sweep (as the
sweep ledger knows them) with the accounting rows of their jobs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from hpcjobs.accounting.reports.pack_steps import point_step_fate
from hpcjobs.accounting.reports.rows import _ratio, job_rows
from hpcjobs.accounting.reports.tables import _efficiency
from hpcjobs.accounting.reports.tables import report_tables as _report_tables
from hpcjobs.states import FAILURE_STATES, TERMINAL_STATES

#: The job-fate columns :func:`sweep_frame` adds after the parameters.
SWEEP_FATE_COLUMNS: tuple[str, ...] = (
    "job_id", "state", "exit_code", "exit_signal", "submit_time", "start_time", "end_time", "wait", "elapsed",
    "cpu_efficiency", "mem_efficiency", "time_efficiency", "gpu_utilization", "max_rss_bytes", "node_list",
)

_POINT_META = ("point_id", "index", "params", "job_id", "array_job_id", "array_index", "sweep_id", "chunk")
_ID_KEY = re.compile(r"^\s*(\d+(?:_\d+|\[\d*\])?)")


_ARRAY_KEY = re.compile(r"^\s*(\d+)")


def _id_key(s: pd.Series) -> pd.Series:
    """Scheduler-neutral job key: ``123_4`` (Slurm), ``1234[7]`` (PBS, server suffix dropped)."""
    return s.astype("string").str.extract(_ID_KEY, expand=False).astype("string")


def _array_key(s: pd.Series) -> pd.Series:
    """Scheduler-neutral array key: the sequence number (``11``; ``1234[].srv`` → ``1234``)."""
    return s.astype("string").str.extract(_ARRAY_KEY, expand=False).astype("string")


def _point_params(points: pd.DataFrame) -> pd.DataFrame:
    """One typed column per sweep parameter, from a ``params`` dict column or the extra columns."""
    if "params" in points.columns:
        records = [p if isinstance(p, Mapping) else {} for p in points["params"]]
        params = pd.DataFrame.from_records(records, index=points.index)
    else:
        params = points[[c for c in points.columns if c not in _POINT_META]]
    return params.infer_objects().convert_dtypes()


def _match(left: pd.DataFrame, right: pd.DataFrame, on: list[str]) -> pd.Series:
    """For each row of ``left``, the ``_pos`` of the row of ``right`` with equal ``on`` keys (Int64, NA if none)."""
    r = right.dropna(subset=on).drop_duplicates(on, keep="last")
    merged = left[on].reset_index().merge(r[[*on, "_pos"]], on=on, how="left").set_index("index")
    return merged["_pos"].reindex(left.index).astype("Int64")


def sweep_frame(points: pd.DataFrame, jobs: pd.DataFrame, *, gpu: pd.DataFrame | None = None,
                sweep_id: str | None = None) -> pd.DataFrame:
    """One row per sweep point: its parameters (one typed column each) and its job's fate.

    Points are matched to job rows, first hit wins:

    1. ``(array_job_id, array_index)`` against the schema's ``(array_job_id, array_task_id)``;
    2. ``job_id`` against ``job_id``;
    3. ``(sweep_id, chunk, array_index)`` against the ``hpcjobs:<sweep>:<chunk>:<token>`` tag's
       ``(sweep_id, chunk)`` and ``array_task_id`` (for points whose submission was never recorded;
       a point without ``array_index`` matches the chunk's non-array job).

    A point of a packed sweep then takes the fate of its own job step, the step of its array task
    named by its id (:func:`hpcjobs.accounting.reports.pack_steps.point_step_fate`).

    Ids are compared scheduler-neutrally (``1234[7].server`` ≡ ``1234[7]``; array ``1234[].server`` ≡ ``1234``). A
    requeued job that appears more than once counts with its last submission.

    Args:
        points: One row per point with ``point_id``, ``index``, either ``params`` (dict) or one column
            per parameter, and any of ``job_id``, ``array_job_id``, ``array_index``, ``sweep_id``, ``chunk``.
        jobs: A schema DataFrame (job and step rows).
        gpu: Optional per-job GPU summary (see :func:`efficiency`).
        sweep_id: Only consider jobs tagged with this sweep (and use it for rule 3 when ``points``
            has no ``sweep_id`` column).

    Returns:
        ``point_id``, ``index``, the parameters (a parameter named like a fate column gets a
        ``param_`` prefix), then :data:`SWEEP_FATE_COLUMNS`. Unmatched points have NA fate.
    """
    all_rows = jobs
    if sweep_id is not None:
        jobs = jobs[jobs["sweep_id"].astype("string") == sweep_id]
    full = job_rows(jobs)
    eff = _efficiency(full, gpu)  # the job rows computed once for both
    right = pd.DataFrame({
        "_pos": pd.array(range(len(eff)), dtype="Int64"),
        "array_job_id": _array_key(full["array_job_id"]),
        "array_index": full["array_task_id"].astype("Int64"),
        "job_id": _id_key(full["job_id"]),
        "sweep_id": full["sweep_id"].astype("string"),
        "chunk": full["chunk"].astype("Int64"),
    })
    n = len(points)
    col = points.get
    left = pd.DataFrame({
        "array_job_id": _array_key(col("array_job_id", pd.Series(pd.NA, index=points.index))),
        "array_index": pd.array(col("array_index", pd.Series(pd.NA, index=points.index)), dtype="Int64"),
        "job_id": _id_key(col("job_id", pd.Series(pd.NA, index=points.index))),
        "sweep_id": pd.array(col("sweep_id", pd.Series([sweep_id] * n, index=points.index, dtype=object)),
                             dtype="string"),
        "chunk": pd.array(col("chunk", pd.Series(pd.NA, index=points.index)), dtype="Int64"),
    }, index=points.index)
    pos = _match(left, right, ["array_job_id", "array_index"])
    pos = pos.fillna(_match(left, right, ["job_id"]))
    # rule 3: a non-array job of the chunk has no task index on either side
    left3 = left.assign(array_index=left["array_index"].fillna(-1))
    right3 = right.assign(array_index=right["array_index"].fillna(-1))
    pos = pos.fillna(_match(left3, right3, ["sweep_id", "chunk", "array_index"]))

    fate_src = eff.assign(exit_code=full["exit_code"], exit_signal=full["exit_signal"],
                          submit_time=full["submit_time"], start_time=full["start_time"],
                          end_time=full["end_time"], wait=full["wait"], node_list=full["node_list"])
    fate_src = fate_src[list(SWEEP_FATE_COLUMNS)].assign(_pos=pd.array(range(len(eff)), dtype="Int64"))
    fate = pd.DataFrame({"_pos": pos.to_numpy()}).astype("Int64").merge(fate_src, on="_pos", how="left")
    fate = fate.drop(columns="_pos")
    if "point_id" in points:  # a packed point's own step (srun --job-name=<point id>) over its task's fate
        fate = point_step_fate(fate, left.reset_index(drop=True), points["point_id"].reset_index(drop=True),
                               all_rows)

    params = _point_params(points).reset_index(drop=True)
    params = params.rename(columns={c: f"param_{c}" for c in params.columns
                                    if c in SWEEP_FATE_COLUMNS or c in ("point_id", "index")})
    head = pd.DataFrame({
        "point_id": pd.array(points["point_id"].to_numpy() if "point_id" in points else [pd.NA] * n,
                             dtype="string"),
        "index": pd.array(points["index"] if "index" in points else range(n), dtype="Int64"),
    })
    return pd.concat([head, params, fate], axis=1)


def failure_params(points_df: pd.DataFrame, params: Sequence[str] | None = None) -> pd.DataFrame:
    """Which parameter values go with failures, from a :func:`sweep_frame`.

    Only finished points count (terminal state); a failure is a state in
    :data:`~hpcjobs.states.FAILURE_STATES` (FAILED, TIMEOUT, OUT_OF_MEMORY, CANCELLED, ...).

    Args:
        points_df: Output of :func:`sweep_frame` (parameter columns plus ``state``).
        params: The parameter columns; default every column between ``index`` and ``job_id``.

    Returns:
        ``param``, ``value`` (as text), ``n``, ``failed``, ``failure_rate``: one row per parameter
        value, highest failure rate first (then most points).
    """
    if params is None:
        cols = list(points_df.columns)
        start = cols.index("index") + 1 if "index" in cols else 0
        end = cols.index("job_id") if "job_id" in cols else len(cols)
        params = cols[start:end]
    done = points_df[points_df["state"].isin(TERMINAL_STATES)]
    failed = done["state"].isin(FAILURE_STATES)
    frames = []
    for p in params:
        value = done[p].astype("string").fillna("<NA>")
        g = pd.DataFrame({"value": value, "failed": failed}).groupby("value", sort=True)["failed"]
        part = pd.DataFrame({"n": g.size(), "failed": g.sum()}).reset_index()
        part.insert(0, "param", p)
        frames.append(part)
    if not frames:
        return pd.DataFrame({"param": pd.Series([], dtype="string"), "value": pd.Series([], dtype="string"),
                             "n": pd.Series([], dtype="Int64"), "failed": pd.Series([], dtype="Int64"),
                             "failure_rate": pd.Series([], dtype="Float64")})
    out = pd.concat(frames, ignore_index=True)
    out = out.astype({"param": "string", "value": "string", "n": "Int64", "failed": "Int64"})
    out["failure_rate"] = _ratio(out["failed"], out["n"])
    return out.sort_values(["failure_rate", "n"], ascending=[False, False], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------
# attempts: which job rows are a point's final attempt (``hpcjobs report --sweep``)

#: The columns of an attempts frame (:func:`hpcjobs.analysis.sweep_attempts_frame`) besides the parameters.
ATTEMPT_COLUMNS: tuple[str, ...] = ("point_id", "index", "attempt", "final", "job_id", "array_job_id", "array_index",
                                    "chunk", "sweep_id", "ledger_state", "ledger_exit_code")

#: The fate columns of the per-point table of a sweep report (:func:`sweep_points_table`).
POINT_TABLE_COLUMNS: tuple[str, ...] = ("attempts", "job_id", "state", "exit_code", "elapsed", "wait",
                                        "cpu_efficiency", "mem_efficiency", "time_efficiency")


def attempt_params(attempts: pd.DataFrame) -> list[str]:
    """The parameter columns of an attempts frame: every column not in :data:`ATTEMPT_COLUMNS`."""
    return [c for c in attempts.columns if c not in ATTEMPT_COLUMNS]


def label_attempts(df: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    """Which point and attempt each row of ``df`` ran, and whether that attempt is the point's final one.

    Job rows are matched to the attempts by the rules of :func:`sweep_frame` (array job and task, then
    job id, then the tag's sweep, chunk and task); step rows take their job's label.

    Args:
        df: A schema DataFrame (job and step rows).
        attempts: One row per attempt of every point (:data:`ATTEMPT_COLUMNS` and the parameters), as
            :func:`hpcjobs.analysis.sweep_attempts_frame` reads them from the sweep's ledger.

    Returns:
        Aligned with ``df``: ``point_id`` (string), ``attempt`` (Int64), ``replaced`` (bool: not the final
        attempt of any point, which includes jobs of the sweep the ledger does not know).
    """
    is_job = df["step"].isna().to_numpy(dtype=bool)
    jobs = df.loc[is_job]
    left = pd.DataFrame({
        "array_job_id": _array_key(jobs["array_job_id"]),
        "array_index": jobs["array_task_id"].astype("Int64"),
        "job_id": _id_key(jobs["job_id"]),
        "sweep_id": jobs["sweep_id"].astype("string"),
        "chunk": jobs["chunk"].astype("Int64"),
    }, index=jobs.index)
    right = pd.DataFrame({
        "_pos": pd.array(range(len(attempts)), dtype="Int64"),
        "array_job_id": _array_key(attempts["array_job_id"]),
        "array_index": pd.array(attempts["array_index"], dtype="Int64"),
        "job_id": _id_key(attempts["job_id"]),
        "sweep_id": pd.array(attempts["sweep_id"], dtype="string"),
        "chunk": pd.array(attempts["chunk"], dtype="Int64"),
    })
    pos = _match(left, right, ["array_job_id", "array_index"])
    pos = pos.fillna(_match(left, right, ["job_id"]))
    left3 = left.assign(array_index=left["array_index"].fillna(-1))
    right3 = right.assign(array_index=right["array_index"].fillna(-1))
    pos = pos.fillna(_match(left3, right3, ["sweep_id", "chunk", "array_index"]))
    found = pos.notna().to_numpy(dtype=bool) & (len(attempts) > 0)
    at = pos.fillna(0).to_numpy(dtype="int64")[found]  # taken by position, no loop over the rows
    point = pd.array([pd.NA] * len(jobs), dtype="string")
    point[found] = pd.array(attempts["point_id"], dtype="string").take(at)
    attempt = pd.array([pd.NA] * len(jobs), dtype="Int64")
    attempt[found] = pd.array(attempts["attempt"], dtype="Int64").take(at)
    final = found.copy()
    final[found] = attempts["final"].to_numpy(dtype=bool)[at]
    labels = pd.DataFrame({
        "job_id": jobs["job_id"].astype("string").to_numpy(), "point_id": point, "attempt": attempt, "replaced": ~final,
    }).drop_duplicates("job_id", keep="last")
    by_job = labels.set_index("job_id")
    key = df["job_id"].astype("string")
    return pd.DataFrame({
        "point_id": pd.array(key.map(by_job["point_id"]), dtype="string"),
        "attempt": pd.array(key.map(by_job["attempt"]), dtype="Int64"),
        "replaced": key.map(by_job["replaced"]).fillna(True).astype(bool),
    }, index=df.index)


def final_attempts(df: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` (job and step rows) of each point's final attempt: what a sweep's report counts.

    A point resubmitted after a failure counts once, with the job of its last attempt; jobs of the
    sweep that are no point's final attempt (replaced attempts, strays) are left out.

    Args:
        df: A schema DataFrame.
        attempts: The sweep's attempts (see :func:`label_attempts`).

    Returns:
        The kept rows, index reset.
    """
    keep = ~label_attempts(df, attempts)["replaced"].to_numpy(dtype=bool)
    return df[keep].reset_index(drop=True)


def _attempt_fates(df: pd.DataFrame, rows: pd.DataFrame, params: Sequence[str],
                   gpu: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`sweep_frame` of attempt rows (their own job ids), the ledger's state where no job row matched."""
    points = rows[["point_id", "index", "job_id", "array_job_id", "array_index", "chunk", "sweep_id", *params]]
    frame = sweep_frame(points.reset_index(drop=True), df, gpu=gpu)
    frame = frame.rename(columns={f"param_{c}": c for c in params if f"param_{c}" in frame.columns
                                  and c not in frame.columns})
    missing = frame["state"].isna().to_numpy(dtype=bool)
    if missing.any():
        ledger = pd.Series(pd.array(rows["ledger_state"].astype("string"), dtype="string"))
        frame["state"] = frame["state"].astype("string").where(~missing, ledger).astype("category")
        codes = pd.Series(pd.array(rows["ledger_exit_code"], dtype="Int64"))
        frame["exit_code"] = frame["exit_code"].astype("Int64").where(~missing, codes)
    return frame


def sweep_points_table(df: pd.DataFrame, attempts: pd.DataFrame, *, gpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per point of a sweep: ``point_id``, ``index``, the parameters, then :data:`POINT_TABLE_COLUMNS`.

    The job is the point's final attempt; ``attempts`` counts its attempts. A point whose final job is
    not in the accounting data (not run yet, or outside the period) has the ledger's state.

    Args:
        df: A schema DataFrame of the sweep's jobs.
        attempts: The sweep's attempts (see :func:`label_attempts`).
        gpu: Optional per-job GPU summary.
    """
    params = attempt_params(attempts)
    final = attempts[attempts["final"].astype(bool).to_numpy()].reset_index(drop=True)
    frame = _attempt_fates(df, final, params, gpu)
    counts = attempts.groupby("point_id", sort=False)["attempt"].size()
    frame["attempts"] = pd.array(final["point_id"].map(counts).to_numpy(), dtype="Int64")
    shown = [c for c in frame.columns[2:] if c in params or (c.startswith("param_") and c[6:] in params)]
    return frame[["point_id", "index", *shown, *POINT_TABLE_COLUMNS]]


def sweep_jobs_table(df: pd.DataFrame, attempts: pd.DataFrame, columns: Sequence[str] | None = None, *,
                     gpu: pd.DataFrame | None = None, with_replaced: bool = True) -> pd.DataFrame:
    """:func:`hpcjobs.accounting.reports.jobs.jobs_table` of a sweep's jobs with ``point_id``, ``attempt``,
    ``replaced`` and the point's parameters after ``job_id``.

    Args:
        df: A schema DataFrame of the sweep's jobs (final attempts only, or all of them).
        attempts: The sweep's attempts (see :func:`label_attempts`).
        columns: The job columns (default: those of ``jobs_table``).
        gpu: Optional per-job GPU summary.
        with_replaced: Include the ``replaced`` column (True for a job that is not its point's final attempt).

    Raises:
        ConfigError: An unknown column (from ``jobs_table``).
    """
    from hpcjobs.accounting.reports.jobs import DEFAULT_JOB_COLUMNS, jobs_table

    wanted = list(columns) if columns else list(DEFAULT_JOB_COLUMNS)
    table = jobs_table(df, list(dict.fromkeys(["job_id", *wanted])), gpu=gpu)
    labels = label_attempts(df, attempts)[df["step"].isna().to_numpy(dtype=bool)]
    labels = labels.assign(job_id=df.loc[df["step"].isna(), "job_id"].astype("string")).drop_duplicates(
        "job_id", keep="last").set_index("job_id")
    params = attempt_params(attempts)
    by_point = attempts.drop_duplicates("point_id", keep="last").set_index("point_id")
    key = table["job_id"].astype("string")
    point = pd.array(key.map(labels["point_id"]), dtype="string")
    extra = pd.DataFrame({
        "point_id": point,
        "attempt": pd.array(key.map(labels["attempt"]), dtype="Int64"),
        "replaced": key.map(labels["replaced"]).fillna(True).astype(bool),
    })
    for p in params:
        name = p if p not in table.columns and p not in extra.columns else f"param_{p}"
        extra[name] = pd.array(pd.Series(point).map(by_point[p]), dtype=by_point[p].dtype)
    if not with_replaced:
        extra = extra.drop(columns="replaced")
    at = wanted.index("job_id") + 1 if "job_id" in wanted else 0
    out = table[wanted]
    return pd.concat([out.iloc[:, :at], extra, out.iloc[:, at:]], axis=1)


def failures_by_param(points: pd.DataFrame, params: Sequence[str]) -> pd.DataFrame:
    """:func:`failure_params` of a sweep's points (or attempts), with ``failure_state``: the most common state
    of the failed ones (ties: the first in name order), NA where none failed."""
    table = failure_params(points, params)
    done = points[points["state"].isin(TERMINAL_STATES) & points["state"].isin(FAILURE_STATES)]
    common: dict[tuple[str, str], str] = {}
    for p in params:
        if done.empty:
            break
        value = done[p].astype("string").fillna("<NA>")
        counts = pd.DataFrame({"value": value, "state": done["state"].astype(str)}).value_counts()
        for (v, s), _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][1])):
            common.setdefault((p, str(v)), str(s))
    table["failure_state"] = pd.array([common.get((p, v), pd.NA) for p, v in zip(table["param"], table["value"],
                                                                                 strict=True)], dtype="string")
    return table


def sweep_report_tables(df: pd.DataFrame, attempts: pd.DataFrame | None, section: str = "all", *,
                        gpu: pd.DataFrame | None = None, top: int = 20,
                        all_attempts: bool = False) -> dict[str, pd.DataFrame]:
    """:func:`hpcjobs.accounting.reports.tables.report_tables` of one sweep, with its per-point tables.

    The ``failures`` section (and ``all``) gains ``sweep_points`` (:func:`sweep_points_table`) and
    ``failures_by_param`` (:func:`failures_by_param` of the points: which parameter values go with failures,
    worst first; with ``all_attempts``, of every attempt, so that failures later fixed by a resubmission
    count too).

    Args:
        df: A schema DataFrame of the sweep's jobs, as the report counts them (the final attempts, see
            :func:`final_attempts`, or all of them).
        attempts: The sweep's attempts from its ledger, or ``None`` when the ledger is not at hand (a
            saved file from another machine): then only the summary tables are made.
        section: ``efficiency``, ``wait``, ``failures`` or ``all``.
        gpu: Optional per-job GPU summary.
        top: Rows of the worst-offender tables.
        all_attempts: ``df`` holds the replaced attempts too (``failures_by_param`` counts attempts).
    """
    out = _report_tables(df, section, gpu=gpu, top=top)
    if attempts is None or section not in ("failures", "all"):
        return out
    points = sweep_points_table(df, attempts, gpu=gpu)
    params = [c for c in points.columns[2:] if c not in POINT_TABLE_COLUMNS]
    out["sweep_points"] = points
    if all_attempts:
        by_attempt = _attempt_fates(df, attempts, attempt_params(attempts), gpu)
        out["failures_by_param"] = failures_by_param(by_attempt, params)
    else:
        out["failures_by_param"] = failures_by_param(points, params)
    return out
