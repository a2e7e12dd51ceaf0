"""One row per job, with the columns a person picks: ``hpcjobs report --jobs [--columns ...]``.

What reportseff prints for a list of jobs (state, elapsed, CPU and memory efficiency), from any
accounting source hpcjobs reads, with the exit code explained (:func:`~hpcjobs.accounting.reports.tables.exit_meaning`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hpcjobs.accounting.reports import tables
from hpcjobs.accounting.reports.rows import job_rows
from hpcjobs.errors import ConfigError, ConfigProblem

#: What ``--jobs`` shows when no ``--columns`` are given.
DEFAULT_JOB_COLUMNS: tuple[str, ...] = (
    "job_id", "job_name", "user", "state", "exit", "elapsed", "cpus", "cpu_efficiency", "mem_efficiency",
    "time_efficiency", "gpus", "gpu_utilization",
)

#: Columns of the schema's job rows that ``--columns`` may name besides
#: :data:`~hpcjobs.accounting.reports.tables.EFFICIENCY_COLUMNS`.
_EXTRA = ("submit_time", "start_time", "end_time", "exit_code", "exit_signal", "wait", "exit")


def job_columns() -> tuple[str, ...]:
    """Every column ``--columns`` accepts."""
    return tuple(dict.fromkeys((*tables.EFFICIENCY_COLUMNS, *_EXTRA)))


def jobs_table(df: pd.DataFrame, columns: Sequence[str] | None = None, *,
               gpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per job (steps folded into their job), in submission order, with ``columns``.

    Args:
        df: A schema DataFrame (job and step rows).
        columns: Columns to show (default :data:`DEFAULT_JOB_COLUMNS`); ``exit`` is the exit code and
            signal in words, ``wait`` the time from submission to start.
        gpu: Optional per-job GPU sampler summary, as for :func:`~hpcjobs.accounting.reports.tables.efficiency`.

    Raises:
        ConfigError: A column name that does not exist (the valid choices are listed; exit 2).
    """
    wanted = list(columns) if columns else list(DEFAULT_JOB_COLUMNS)
    valid = job_columns()
    unknown = [c for c in wanted if c not in valid]
    if unknown:
        raise ConfigError(ConfigProblem(f"no job column {unknown[0]!r}", key="--columns", choices=valid))
    jobs = job_rows(df)
    eff = tables.efficiency(df, gpu)
    out = eff.copy()
    for extra in ("submit_time", "start_time", "end_time", "exit_code", "exit_signal", "scheduler"):
        if extra in jobs.columns:
            out[extra] = jobs[extra].to_numpy()
    if "wait" in wanted:
        out["wait"] = (out["start_time"] - out["submit_time"]) if {"start_time", "submit_time"} <= set(out) \
            else pd.Series(pd.NaT, index=out.index, dtype="timedelta64[ns]")
    if "exit" in wanted:
        sched = out["scheduler"].astype(str) if "scheduler" in out else pd.Series("slurm", index=out.index)
        codes = out["exit_code"] if "exit_code" in out else pd.Series(pd.NA, index=out.index)
        sigs = out["exit_signal"] if "exit_signal" in out else pd.Series(pd.NA, index=out.index)
        out["exit"] = pd.Series([tables.exit_meaning(s, c, g, st) for s, c, g, st in
                                 zip(sched, codes, sigs, out["state"].astype(str), strict=True)],
                                index=out.index, dtype="string")
    missing = [c for c in wanted if c not in out.columns]
    for c in missing:
        out[c] = pd.NA
    if "submit_time" in out:
        out = out.sort_values("submit_time", kind="stable", na_position="last")
    return out[wanted].reset_index(drop=True)
