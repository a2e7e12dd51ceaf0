"""The rows every report starts from, and the arithmetic the report tables share.

:func:`job_rows` picks the job/allocation rows of a schema DataFrame (:mod:`hpcjobs.accounting.schema`)
and gives each the peak memory of its steps; :func:`_ratio`, :func:`_seconds` and :func:`_started` are
the ``<NA>``-safe ratio, the duration in seconds and "the job ran", as the efficiency, queue-wait and
sweep tables (:mod:`~hpcjobs.accounting.reports.tables`, :mod:`~hpcjobs.accounting.reports.wait`,
:mod:`~hpcjobs.accounting.reports.sweeps`) and the plots define them.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

#: Seconds in an hour (core-hours and GPU-hours are seconds over this).
_HOUR = 3600.0

def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    """``num / den`` as Float64, NA where either is missing or ``den`` is 0."""
    num = num.astype("Float64")
    den = den.astype("Float64")
    out = num / den.where(den != 0)
    return out.astype("Float64")


def _seconds(td: pd.Series) -> pd.Series:
    """A timedelta column as Float64 seconds (NaT → NA)."""
    return td.dt.total_seconds().astype("Float64")


def _negative(seconds: pd.Series) -> pd.Series:
    """Where a duration in seconds is below 0 (an end before its start: damaged accounting), False for NA."""
    return seconds.lt(0).fillna(False).astype(bool)


def input_warnings(df: pd.DataFrame) -> list[str]:
    """Warnings about the data of a report: job rows whose elapsed or CPU time is negative.

    Such rows (an end before the start, in damaged or hand-edited accounting) get NA efficiencies
    and core-hours in :func:`~hpcjobs.accounting.reports.tables.efficiency` instead of negative ones; this counts them.

    Args:
        df: A schema DataFrame.

    Returns:
        One message per kind of problem found (empty when there is none).
    """
    is_job = df["step"].isna().to_numpy(dtype=bool)
    out = []
    for column, what in (("elapsed", "elapsed time (end before start)"), ("cpu_time", "CPU time")):
        n = int((_negative(_seconds(df[column])).to_numpy() & is_job).sum())
        if n:
            out.append(f"{n} job{'s' if n != 1 else ''} with a negative {what}: their efficiencies and "
                       "core-hours are left empty")
    return out


def job_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The job/allocation rows of ``df`` (``step`` is NA), one per job.

    A job row whose ``max_rss_bytes`` is missing takes the maximum over its step rows (matched on
    ``job_id``), which is what sacct's job rows lack. When a job appears more than once
    (``sacct --duplicates`` of a requeued job) the row submitted last is kept.

    Args:
        df: A schema DataFrame.

    Returns:
        The job rows, index reset, schema columns and dtypes unchanged.
    """
    return _job_rows(df)


#: Columns :func:`_job_rows` needs whatever the caller keeps.
_ROW_KEYS = frozenset({"step", "job_id", "cluster", "submit_time", "max_rss_bytes"})
_NO_PEAK = np.iinfo(np.int64).min


def _job_rows(df: pd.DataFrame, columns: Collection[str] | None = None) -> pd.DataFrame:
    """:func:`job_rows` keeping only ``columns`` (and the few it needs itself; default: all).

    Nothing is copied but the job rows of the kept columns: the step peaks are a maximum over
    integer codes of ``job_id``, not a groupby on the text.
    """
    is_job = df["step"].isna().to_numpy(dtype=bool)
    cols = list(df.columns) if columns is None else [c for c in df.columns if c in columns or c in _ROW_KEYS]
    all_jobs = bool(is_job.all())
    jobs = df[cols] if all_jobs else df.loc[is_job, cols]
    codes: np.ndarray | None = None
    if not all_jobs and jobs["max_rss_bytes"].isna().any():
        codes = pd.factorize(df["job_id"])[0]  # NA ids: -1, never matched (as groupby drops them)
        rss = df["max_rss_bytes"]
        from_step = ~is_job & rss.notna().to_numpy(dtype=bool) & (codes >= 0)
        if from_step.any():
            peak = np.full(int(codes.max()) + 1, _NO_PEAK, dtype=np.int64)
            np.maximum.at(peak, codes[from_step], rss.to_numpy(dtype=np.int64, na_value=0)[from_step])
            job_codes = codes[is_job]
            best = peak[np.maximum(job_codes, 0)]
            found = (job_codes >= 0) & (best != _NO_PEAK)
            filled = pd.Series(pd.arrays.IntegerArray(np.where(found, best, 0), ~found), index=jobs.index)
            jobs = jobs.assign(max_rss_bytes=jobs["max_rss_bytes"].fillna(filled))
    job_codes = pd.factorize(jobs["job_id"])[0] if codes is None else codes[is_job]
    if len(job_codes) and (np.bincount(job_codes + 1).max(initial=0) > 1):
        jobs = jobs.sort_values("submit_time", kind="stable").drop_duplicates(
            ["job_id", "cluster"], keep="last").sort_index()
    return jobs.reset_index(drop=True)


def _started(jobs: pd.DataFrame) -> pd.Series:
    """Jobs that ran: a start time, and not cancelled before running (sacct sets Start=End then)."""
    never_ran = jobs["state"].isin(["PENDING", "HELD"]) | (
        (jobs["state"] == "CANCELLED") & (jobs["elapsed"].fillna(pd.Timedelta(0)) == pd.Timedelta(0)))
    return jobs["start_time"].notna() & ~never_ran
