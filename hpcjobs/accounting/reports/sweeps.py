"""Sweep analysis: one row per sweep point with its parameters and its job's fate; failures by parameter.

:func:`sweep_frame` is the core of the notebook entry point: it joins the points of a sweep (as the
sweep ledger knows them) with the accounting rows of their jobs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from hpcjobs.accounting.reports.rows import _ratio, job_rows
from hpcjobs.accounting.reports.tables import _efficiency
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
