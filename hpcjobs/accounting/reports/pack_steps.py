"""Packed sweep points (the experiment's ``pack:``) joined to their own ``sacct`` step.

A packed array task runs several points, each as one job step named by its point id
(``srun --exact --job-name=<point id>``, see :mod:`hpcjobs.render.pack`). :func:`point_step_fate`
finds, for each point, the step row of its array task with its id as the step's name and gives the
point that step's fate (state, exit code, times, peak memory, CPU efficiency) instead of the task's.
A point without such a step (an unpacked sweep, a scheduler without steps) keeps its task's fate.
"""

from __future__ import annotations

import re

import pandas as pd

from hpcjobs.accounting.reports.rows import _ratio, _seconds

__all__ = ["STEP_FATE_COLUMNS", "point_step_fate"]

#: The fate columns a point's own step replaces.
STEP_FATE_COLUMNS: tuple[str, ...] = ("state", "exit_code", "exit_signal", "start_time", "end_time", "elapsed",
                                      "cpu_efficiency", "mem_efficiency", "max_rss_bytes", "node_list")

_ARRAY_KEY = re.compile(r"^\s*(\d+)")
_SCHEDULER_STEPS = ("batch", "extern")


def point_step_fate(fate: pd.DataFrame, left: pd.DataFrame, point_ids: pd.Series, jobs: pd.DataFrame) -> pd.DataFrame:
    """``fate`` with each packed point's columns taken from its own step row.

    Args:
        fate: One row per point (positional index), the task's fate columns.
        left: The points' ``array_job_id`` (array key) and ``array_index``, aligned with ``fate``.
        point_ids: The points' ids, aligned with ``fate``.
        jobs: The schema DataFrame with the step rows (before any filter on the job rows' tags).

    Returns:
        ``fate`` (a copy where anything changed).
    """
    if "step" not in jobs or "job_name" not in jobs or not len(fate):
        return fate
    steps = jobs[jobs["step"].notna() & jobs["job_name"].notna() & ~jobs["step"].isin(_SCHEDULER_STEPS)]
    if steps.empty:
        return fate
    key = pd.DataFrame({
        "array_job_id": steps["array_job_id"].astype("string").str.extract(_ARRAY_KEY, expand=False).astype("string"),
        "array_index": steps["array_task_id"].astype("Int64"),
        "point_id": steps["job_name"].astype("string"),
        "_spos": range(len(steps)),
    }).dropna(subset=["array_job_id", "array_index", "point_id"])
    per_task = key.groupby(["array_job_id", "array_index"])["point_id"].transform("size")
    key = key.assign(_share=per_task.to_numpy()).drop_duplicates(["array_job_id", "array_index", "point_id"],
                                                                    keep="last")
    probe = pd.DataFrame({"array_job_id": left["array_job_id"].to_numpy(),
                          "array_index": left["array_index"].to_numpy(),
                          "point_id": pd.array(point_ids.to_numpy(), dtype="string")})
    probe = probe.astype({"array_job_id": "string", "array_index": "Int64"})
    hit = probe.merge(key, on=["array_job_id", "array_index", "point_id"], how="left")
    has = hit["_spos"].notna().to_numpy()
    if not has.any():
        return fate
    rows = steps.iloc[hit.loc[has, "_spos"].astype(int).to_numpy()].reset_index(drop=True)
    elapsed_s = _seconds(rows["elapsed"])
    own = pd.DataFrame({
        "state": rows["state"], "exit_code": rows["exit_code"], "exit_signal": rows["exit_signal"],
        "start_time": rows["start_time"], "end_time": rows["end_time"], "elapsed": rows["elapsed"],
        "cpu_efficiency": _ratio(_seconds(rows["cpu_time"]), rows["cpus"].astype("Float64") * elapsed_s),
        "max_rss_bytes": rows["max_rss_bytes"], "node_list": rows["node_list"],
    })
    out = fate.copy()
    where = out.index[has]
    for col in own.columns:
        if col in out.columns:
            out.loc[where, col] = own[col].to_numpy()
    if "mem_efficiency" in out.columns and "req_mem_bytes" in jobs:  # the task's memory shared among its points
        task_mem = _task_memory(jobs, hit.loc[has])
        out.loc[where, "mem_efficiency"] = _ratio(
            rows["max_rss_bytes"].astype("Float64"),
            pd.Series(task_mem, dtype="Float64") / hit.loc[has, "_share"].astype("Float64").to_numpy()).to_numpy()
    return out


def _task_memory(jobs: pd.DataFrame, hits: pd.DataFrame) -> list[object]:
    """The requested memory of each hit's array task (its job row), or NA."""
    is_job = jobs["step"].isna()
    job = jobs[is_job]
    keys = pd.DataFrame({
        "array_job_id": job["array_job_id"].astype("string").str.extract(_ARRAY_KEY, expand=False).astype("string"),
        "array_index": job["array_task_id"].astype("Int64"),
        "mem": job["req_mem_bytes"].astype("Float64"),
    }).drop_duplicates(["array_job_id", "array_index"], keep="last")
    got = hits[["array_job_id", "array_index"]].merge(keys, on=["array_job_id", "array_index"], how="left")
    return list(got["mem"])
