"""Queue-wait tables: median and 90th-percentile wait of the jobs that started, by partition, GPUs, nodes,
hour, weekday and requested wall time.

Importable from :mod:`hpcjobs.accounting.reports.tables` too; :func:`~hpcjobs.accounting.reports.tables.report_tables`
passes its job rows (computed once) to :func:`_queue_wait_report`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hpcjobs.accounting.reports.rows import _job_rows, _started

#: Keys accepted by :func:`queue_wait`'s ``by``.
WAIT_KEYS = ("partition", "gpus", "nodes", "hour", "weekday", "walltime")

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

#: Default requested-walltime bins (upper edges) for ``queue_wait(by="walltime")``.
WALLTIME_BINS: tuple[pd.Timedelta, ...] = tuple(
    pd.Timedelta(x) for x in ("1h", "4h", "12h", "1D", "2D", "7D")
)



def _walltime_bin(limit: pd.Series, bins: Sequence[pd.Timedelta]) -> pd.Series:
    edges = [pd.Timedelta(0), *bins]
    labels = [f"<={_short(bins[0])}"]
    labels += [f"{_short(a)}-{_short(b)}" for a, b in itertools.pairwise(bins)]
    labels += [f">{_short(bins[-1])}", "unlimited"]
    secs = limit.dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
    idx = np.searchsorted([e.total_seconds() for e in edges[1:]], secs, side="left")
    codes = np.where(np.isnan(secs), len(labels) - 1, idx)
    return pd.Series(pd.Categorical.from_codes(codes, categories=labels, ordered=True), index=limit.index)


def _short(td: pd.Timedelta) -> str:
    s = int(td.total_seconds())
    if s % 86400 == 0:
        return f"{s // 86400}d"
    if s % 3600 == 0:
        return f"{s // 3600}h"
    return f"{s // 60}m"


def _wait_keys(jobs: pd.DataFrame, key: str, tz: str | None, bins: Sequence[pd.Timedelta]) -> pd.Series:
    if key in ("hour", "weekday"):
        t = jobs["eligible_time"].fillna(jobs["submit_time"])
        if tz:
            t = t.dt.tz_convert(tz)
        if key == "hour":
            return t.dt.hour.astype("Int64").rename("hour")
        day = t.dt.day_of_week.to_numpy(dtype=float, na_value=np.nan)  # 0 = Monday, as _WEEKDAYS
        codes = np.where(np.isnan(day), -1, day).astype(np.int8)
        return pd.Series(pd.Categorical.from_codes(codes, categories=_WEEKDAYS, ordered=True),
                         index=jobs.index, name="weekday")
    if key == "walltime":
        return _walltime_bin(jobs["time_limit"], bins).rename("walltime")
    if key in ("gpus", "nodes"):
        return jobs[key].fillna(0).astype("Int64")
    return jobs[key]


#: The job-row columns the queue-wait tables read (besides their keys).
_WAIT_INPUT = frozenset({"state", "elapsed", "start_time", "wait", "eligible_time", "submit_time", "time_limit",
                         "partition", "gpus", "nodes"})


def _waited(jobs: pd.DataFrame) -> pd.DataFrame:
    """The job rows whose queue wait is over: they started and have a wait."""
    return jobs[(_started(jobs) & jobs["wait"].notna()).to_numpy(dtype=bool)]


def queue_wait(df: pd.DataFrame, by: str | Sequence[str] = "partition", *, tz: str | None = None,
               walltime_bins: Sequence[pd.Timedelta] = WALLTIME_BINS) -> pd.DataFrame:
    """Median and 90th-percentile queue wait of the jobs that started, by one or more keys.

    Args:
        df: A schema DataFrame.
        by: One or more of :data:`WAIT_KEYS`: ``partition``, ``gpus`` (requested/allocated GPUs),
            ``nodes``, ``hour`` (0-23) or ``weekday`` of the time the job became eligible (submit time
            where eligible is unknown), ``walltime`` (requested time limit, binned by ``walltime_bins``;
            no limit → ``unlimited``). Any other schema column is grouped on as it is.
        tz: Time zone for ``hour``/``weekday`` (default UTC, as stored).
        walltime_bins: Upper edges of the walltime bins.

    Returns:
        One row per group, in key order: the key columns, ``jobs``, ``median_wait``, ``p90_wait``,
        ``mean_wait``, ``max_wait`` (timedeltas). Jobs never started (pending, held, cancelled while
        queued) are left out: their wait is not over.
    """
    keys = [by] if isinstance(by, str) else list(by)
    return _queue_wait(_waited(_job_rows(df, _WAIT_INPUT | set(keys))), keys, tz, walltime_bins)


def _queue_wait(jobs: pd.DataFrame, keys: list[str], tz: str | None,
                walltime_bins: Sequence[pd.Timedelta]) -> pd.DataFrame:
    """:func:`queue_wait` of the job rows :func:`_waited` kept."""
    frame = pd.DataFrame({k: _wait_keys(jobs, k, tz, walltime_bins) for k in keys})
    frame["_w"] = jobs["wait"].dt.total_seconds()
    g = frame.groupby(keys, observed=True, dropna=False, sort=True)["_w"]
    out = pd.DataFrame({
        "jobs": g.size().astype("Int64"),
        "median_wait": pd.to_timedelta(g.median(), unit="s"),
        "p90_wait": pd.to_timedelta(g.quantile(0.9), unit="s"),
        "mean_wait": pd.to_timedelta(g.mean(), unit="s"),
        "max_wait": pd.to_timedelta(g.max(), unit="s"),
    })
    return out.reset_index()


def queue_wait_report(df: pd.DataFrame, *, tz: str | None = None) -> dict[str, pd.DataFrame]:
    """:func:`queue_wait` by each of :data:`WAIT_KEYS`, keyed ``by_<key>``."""
    return _queue_wait_report(_job_rows(df, _WAIT_INPUT), tz)


def _queue_wait_report(jobs: pd.DataFrame, tz: str | None) -> dict[str, pd.DataFrame]:
    waited = _waited(jobs)
    return {f"wait_by_{k}": _queue_wait(waited, [k], tz, WALLTIME_BINS) for k in WAIT_KEYS}
