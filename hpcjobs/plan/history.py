"""Queue wait of similar jobs from accounting history, read from cached windows.

:func:`wait_history` reads it from where the scheduler's backend says
(:attr:`~hpcjobs.schedulers.base.BaseBackend.wait_history_source`): on PBS Pro the jobs the server
still holds (``qstat -x -f -F json``); on Slurm the job rows (``sacct -X --allusers``) of the last N
days, fetched one UTC day at a time through :func:`hpcjobs.accounting.sources.slurm.query_sacct`
(whose finished windows are cached as parquet files, as ``hpcjobs report`` caches them). Of each
finished day only the five columns the wait needs are kept, in a small parquet file of their own
(``<cache dir>/plan-wait/``), so a second ``hpcjobs plan`` reads a few columns per day instead of whole
accounting windows; the current day is asked again every time.

A job counts in the day it started (so a job that ran across midnight is counted once), and is
*similar* to the request when it ran on the same partition with the same number of GPUs (in all)
and nodes, and a requested wall time between half and twice the request's (any wall time when the
request names none).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hpcjobs.accounting.cache import WindowCache, accounting_cache_root, window_key
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import find_backend

#: The columns of the compact history, with their dtypes.
WAIT_COLUMNS: dict[str, Any] = {"partition": "category", "gpus": "int32", "nodes": "int32",
                                "limit_s": "float64", "wait_s": "float64"}
_DAY = timedelta(days=1)
_MARGIN = timedelta(hours=1)  # as query_sacct: a window is final an hour after its end
_SHAPE = ("hpcjobs-plan-wait-v1", "sacct", "-X", "--allusers")


@dataclass(frozen=True)
class WaitStats:
    """Queue wait of the similar jobs on one partition.

    Attributes:
        jobs: How many.
        p50_s: Median wait, seconds.
        p90_s: 90th-percentile wait, seconds.
    """

    jobs: int
    p50_s: float
    p90_s: float


def compact_history(df: pd.DataFrame, start: datetime | None = None, end: datetime | None = None) -> pd.DataFrame:
    """The job rows of an accounting frame that started (in [start, end) when given), as :data:`WAIT_COLUMNS`.

    Args:
        df: A frame in the accounting schema (:mod:`hpcjobs.accounting.schema`).
        start: Keep jobs that started at or after this time.
        end: Keep jobs that started before this time.
    """
    jobs = df[df["step"].isna().to_numpy(dtype=bool)]
    keep = jobs["start_time"].notna() & jobs["wait"].notna()
    if start is not None:
        keep &= (jobs["start_time"] >= pd.Timestamp(start)).fillna(False)
    if end is not None:
        keep &= (jobs["start_time"] < pd.Timestamp(end)).fillna(False)
    jobs = jobs[keep.to_numpy(dtype=bool)]
    return pd.DataFrame({
        "partition": jobs["partition"].astype("string").astype("category"),
        "gpus": jobs["gpus"].fillna(0).to_numpy(dtype="int32"),
        "nodes": jobs["nodes"].fillna(1).to_numpy(dtype="int32"),
        "limit_s": jobs["time_limit"].dt.total_seconds().to_numpy(dtype="float64", na_value=np.nan),
        "wait_s": jobs["wait"].dt.total_seconds().to_numpy(dtype="float64", na_value=np.nan),
    }).reset_index(drop=True)


def similar_wait(history: pd.DataFrame, *, gpus: int, nodes: int, walltime_s: int | None,
                 partitions: Iterable[str]) -> dict[str, WaitStats]:
    """Median and 90th-percentile wait of the jobs similar to the request, per partition.

    Args:
        history: :func:`compact_history` rows.
        gpus: GPUs of the request in all (nodes × GPUs per node).
        nodes: Nodes of the request.
        walltime_s: Its wall time (``None``: any).
        partitions: The partitions (scheduler names) to report; others are not looked at.

    Returns:
        Partition → stats, for the partitions with at least one similar job.
    """
    wanted = list(dict.fromkeys(partitions))
    mask = (history["gpus"].to_numpy() == gpus) & (history["nodes"].to_numpy() == nodes)
    if walltime_s:
        limit = history["limit_s"].to_numpy()
        mask &= (limit >= walltime_s / 2) & (limit <= walltime_s * 2)
    mask &= history["partition"].isin(wanted).to_numpy(dtype=bool)
    rows = history.loc[mask, ["partition", "wait_s"]]
    out: dict[str, WaitStats] = {}
    if rows.empty:
        return out
    grouped = rows.groupby(rows["partition"].astype("string"), observed=True)["wait_s"]
    stats = grouped.quantile([0.5, 0.9]).unstack()
    counts = grouped.size()
    for name in wanted:
        if name in counts.index and counts[name] > 0:
            out[name] = WaitStats(int(counts[name]), float(stats.loc[name, 0.5]), float(stats.loc[name, 0.9]))
    return out


Fetch = Callable[[datetime, datetime], pd.DataFrame]


def sacct_fetch(runner: Callable[..., Any] | None = None, now: datetime | None = None,
                cache_dir: str | os.PathLike[str] | None = None) -> Fetch:
    """A fetch of one window's accounting rows: ``query_sacct(-X --allusers)`` with the window cache."""
    from hpcjobs.accounting.sources.slurm import query_sacct

    cache = WindowCache(Path(cache_dir) / "sacct") if cache_dir is not None else True

    def fetch(start: datetime, end: datetime) -> pd.DataFrame:
        return query_sacct(start, end, all_users=True, steps=False, cache=cache, runner=runner, now=now)

    return fetch


def load_history(days: int, fetch: Fetch, *, now: datetime | None = None,
                 cache_dir: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The :func:`compact_history` of the last ``days`` days, finished days from the compact cache.

    Args:
        days: How many days back (whole UTC days, the current one included).
        fetch: Returns the accounting rows of a window (:func:`sacct_fetch`).
        now: The current time (tests, benchmarks).
        cache_dir: Cache folder (default: :func:`hpcjobs.accounting.cache.default_cache_dir`).

    Raises:
        CommandError: sacct failed (and whatever ``fetch`` raises).
    """
    now_ = now or datetime.now(timezone.utc)
    store = WindowCache(Path(cache_dir or accounting_cache_root()) / "plan-wait")
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    first = epoch + ((now_ - epoch) // _DAY - (days - 1)) * _DAY
    frames = []
    ws = first
    while ws < now_:
        we = ws + _DAY
        final = we + _MARGIN < now_
        key = window_key(_SHAPE, ws, we)
        compact = _load(store, key) if final else None
        if compact is None:
            compact = compact_history(fetch(ws, we), ws, we)
            if final:
                store.store(key, compact)
        frames.append(compact)
        ws = we
    if not frames:
        return _empty()
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    out["partition"] = out["partition"].astype("category")
    return out


#: Seconds the command of a saved-format history (``qstat -x -f -F json``) may take.
HISTORY_TIMEOUT_S = 60.0


def _sacct_history(backend: BaseBackend, days: int, now: datetime,
                   cache_dir: str | os.PathLike[str] | None) -> pd.DataFrame:
    """Slurm: ``sacct`` windows of the last ``days`` days, finished days from the compact cache."""
    return load_history(days, sacct_fetch(now=now, cache_dir=cache_dir), now=now, cache_dir=cache_dir)


def _qstat_json(text: str) -> pd.DataFrame:
    from hpcjobs.accounting.sources.pbs import read_qstat_json

    return read_qstat_json(text)


#: The histories read another way than a saved format's text: by :attr:`BaseBackend.wait_history_source`.
_HISTORIES: dict[str, Callable[[BaseBackend, int, datetime, str | os.PathLike[str] | None], pd.DataFrame]] = {
    "sacct": _sacct_history}
#: The saved formats a history command's output is read in, by :attr:`BaseBackend.wait_history_source`.
_TEXT_READERS: dict[str, Callable[[str], pd.DataFrame]] = {"qstat-json": _qstat_json}


def wait_history(scheduler: str | None, days: int, *, now: datetime | None = None,
                 cache_dir: str | os.PathLike[str] | None = None) -> pd.DataFrame | None:
    """The :func:`compact_history` of ``scheduler``'s jobs of the last ``days`` days, from its backend's
    :attr:`~hpcjobs.schedulers.base.BaseBackend.wait_history_source`: ``sacct`` windows (cached) on Slurm,
    the jobs the server still holds (``qstat -x -f -F json``) on PBS Pro.

    Returns:
        The history, or ``None`` where the scheduler keeps no live history (or is unknown).

    Raises:
        HpcJobsError: The scheduler's command failed, or its output could not be read.
    """
    backend = find_backend(scheduler)
    source = backend.wait_history_source if backend is not None else None
    if backend is None or source is None:
        return None
    now_ = now or datetime.now(timezone.utc)
    history = _HISTORIES.get(source)
    if history is not None:
        return history(backend, days, now_, cache_dir)
    reader = _TEXT_READERS.get(source)
    if reader is None:
        return None
    from hpcjobs.schedulers.client import SchedulerClient

    result = SchedulerClient(backend).run(backend.wait_history_argv(), timeout=HISTORY_TIMEOUT_S)
    return compact_history(reader(result.stdout), now_ - timedelta(days=days), None)


def _load(store: WindowCache, key: str) -> pd.DataFrame | None:
    path = store.path(key)
    if not path.is_file():
        return None
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError):
        return None
    if list(df.columns) != list(WAIT_COLUMNS):
        return None
    return df


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in WAIT_COLUMNS.items()})


def wait_by_partition(history: pd.DataFrame, *, gpus: int, nodes: int, walltime_s: int | None,
                      partitions: Sequence[str]) -> dict[str, WaitStats]:
    """:func:`similar_wait` of an empty-safe history (an empty frame gives no stats)."""
    if history.empty:
        return {}
    return similar_wait(history, gpus=gpus, nodes=nodes, walltime_s=walltime_s, partitions=partitions)
