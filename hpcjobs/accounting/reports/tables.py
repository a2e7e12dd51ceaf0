"""Report tables on accounting DataFrames: efficiency and waste, failures, and all sections at once.

Every function takes a DataFrame that conforms to :mod:`hpcjobs.accounting.schema` (as the
ingest functions return it, job and step rows mixed) and returns a new DataFrame with real
dtypes: nullable ``Float64`` ratios, ``Int64`` counts, ``timedelta64`` durations. A ratio is
``<NA>`` where its denominator is missing or zero, never ``inf``.

Definitions (see ``docs/accounting.md`` for the long form):

* **job rows**: rows whose ``step`` is NA (the job or array-task allocation). Step rows only
  contribute the peak memory of a job row that has none.
* **CPU efficiency** = ``cpu_time / (cpus × elapsed)``.
* **memory efficiency** = ``max_rss_bytes / req_mem_bytes``.
* **time efficiency** = ``elapsed / time_limit`` (above 1 for jobs killed late past their limit).
* **core-hours** = ``cpus × elapsed``; **used** = ``cpu_time``; **wasted** = allocated − used (≥ 0).
* **GPU-hours** = ``gpus × elapsed``; **GPU-hours wasted** = GPU-hours × (1 − GPU utilisation), only
  where a sampler file recorded the utilisation.
* **queue wait**: the schema's ``wait`` (start − eligible) of jobs that started.

The job rows and the shared arithmetic are in :mod:`hpcjobs.accounting.reports.rows`, the queue-wait
tables (``queue_wait``, ``queue_wait_report``, ``WAIT_KEYS``) in :mod:`hpcjobs.accounting.reports.wait`,
the sweep analysis (``sweep_frame``, ``failure_params``) in :mod:`hpcjobs.accounting.reports.sweeps`;
:mod:`hpcjobs.accounting` exports them all by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hpcjobs.accounting.reports.rows import _HOUR, _job_rows, _negative, _ratio, _seconds
from hpcjobs.accounting.reports.wait import _WAIT_INPUT, _queue_wait_report
from hpcjobs.schedulers.registry import find_backend
from hpcjobs.states import FAILURE_STATES

#: Efficiency columns for which *low* is bad (worst offenders sort them ascending).
LOW_IS_BAD = frozenset({"cpu_efficiency", "mem_efficiency", "time_efficiency", "gpu_utilization"})

# ---------------------------------------------------------------------------
# efficiency


#: Columns of :func:`efficiency`, in order.
EFFICIENCY_COLUMNS: tuple[str, ...] = (
    "job_id", "job_name", "user", "account", "partition", "state", "sweep_id", "chunk", "array_job_id",
    "array_task_id", "nodes", "cpus", "gpus", "gpu_type", "elapsed", "time_limit", "cpu_time", "req_mem_bytes",
    "max_rss_bytes", "cpu_efficiency", "mem_efficiency", "time_efficiency", "core_hours", "core_hours_used",
    "core_hours_wasted", "gpu_hours", "gpu_utilization", "gpu_mem_max_bytes", "gpu_hours_wasted",
)


def efficiency(df: pd.DataFrame, gpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-job utilisation: CPU, memory and time efficiency, core-hours and GPU-hours allocated and wasted.

    Args:
        df: A schema DataFrame (job and step rows; see :func:`~hpcjobs.accounting.reports.rows.job_rows`).
        gpu: Optional per-job GPU summary from :func:`hpcjobs.accounting.sources.gpu.gpu_job_summary`
            (columns ``job_id``, ``gpu_util_mean`` in percent, ``gpu_mem_max_bytes``), joined on ``job_id``,
            else ``job_id_raw`` (a Slurm array task's ``$SLURM_JOB_ID``), else the id without server suffix.

    Returns:
        One row per job with :data:`EFFICIENCY_COLUMNS`. Ratios are ``Float64`` fractions (0.25 = 25 %),
        hours ``Float64``; NA where undefined (no elapsed time, no request, no limit, no sampler file,
        a negative elapsed or CPU time: see :func:`~hpcjobs.accounting.reports.rows.input_warnings`).
    """
    return _efficiency(_job_rows(df, _EFFICIENCY_INPUT), gpu)


#: The job-row columns :func:`efficiency` reads (those not in a frame are left out).
_EFFICIENCY_INPUT = frozenset({*EFFICIENCY_COLUMNS[:19], "job_id_raw", "mem_used_bytes", "gpu_utilization",
                               "gpu_mem_max_bytes"})


def _efficiency(jobs: pd.DataFrame, gpu: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`efficiency` of job rows (as :func:`_job_rows` returns them)."""
    elapsed_s = _seconds(jobs["elapsed"])
    cpus = jobs["cpus"].astype("Float64")
    gpus = jobs["gpus"].astype("Float64")
    cpu_s = _seconds(jobs["cpu_time"])
    damaged = _negative(elapsed_s) | _negative(cpu_s)  # counted by input_warnings: never negative hours
    elapsed_s = elapsed_s.mask(damaged)
    cpu_s = cpu_s.mask(damaged)
    out = pd.DataFrame({c: jobs[c] for c in EFFICIENCY_COLUMNS[:19]})
    out["cpu_efficiency"] = _ratio(cpu_s, cpus * elapsed_s)
    mem_used = (jobs["mem_used_bytes"].fillna(jobs["max_rss_bytes"]) if "mem_used_bytes" in jobs
                else jobs["max_rss_bytes"])
    out["mem_efficiency"] = _ratio(mem_used, jobs["req_mem_bytes"])  # memory used as defined per scheduler
    out["time_efficiency"] = _ratio(elapsed_s, _seconds(jobs["time_limit"]))
    core_hours = (cpus * elapsed_s / _HOUR).astype("Float64")
    used = (cpu_s / _HOUR).astype("Float64")
    out["core_hours"] = core_hours
    out["core_hours_used"] = used
    out["core_hours_wasted"] = (core_hours - used).clip(lower=0).astype("Float64")
    gpu_hours = (gpus.fillna(0) * elapsed_s / _HOUR).astype("Float64")
    out["gpu_hours"] = gpu_hours
    # the scheduler's own GPU figures (Slurm usage TRES, jobstats AdminComment), the sampler's where it ran
    util = jobs["gpu_utilization"] if "gpu_utilization" in jobs else pd.Series(pd.NA, index=out.index, dtype="Float64")
    gmem = jobs["gpu_mem_max_bytes"] if "gpu_mem_max_bytes" in jobs else pd.Series(pd.NA, index=out.index,
                                                                                     dtype="Int64")
    if gpu is not None and len(gpu):
        sampled = (_map_by_job(jobs, gpu, "gpu_util_mean").astype("Float64") / 100.0).astype("Float64")
        util = sampled.fillna(util.astype("Float64"))
        if "gpu_mem_max_bytes" in gpu:
            gmem = _map_by_job(jobs, gpu, "gpu_mem_max_bytes").astype("Int64").fillna(gmem.astype("Int64"))
    out["gpu_utilization"] = util
    out["gpu_mem_max_bytes"] = gmem
    out["gpu_hours_wasted"] = (gpu_hours * (1 - util)).astype("Float64")
    return out.reset_index(drop=True)


_JOB_KEY = r"^\s*(\d+(?:_\d+|\[\d*\])?)"


def _map_by_job(jobs: pd.DataFrame, per_job: pd.DataFrame, column: str) -> pd.Series:
    """``per_job[column]`` looked up for each job row by ``job_id``, else ``job_id_raw`` (what ``$SLURM_JOB_ID``
    holds for an array task), else the id without its server suffix (``1234[7].srv`` ≡ ``1234[7]``)."""
    per_job = per_job.drop_duplicates("job_id", keep="last")
    by_id = pd.Series(per_job[column].to_numpy(), index=pd.Index(per_job["job_id"].astype(str)))
    keyed = per_job.assign(_k=per_job["job_id"].astype("string").str.extract(_JOB_KEY, expand=False))
    keyed = keyed.dropna(subset=["_k"]).drop_duplicates("_k", keep="last")
    by_key = pd.Series(keyed[column].to_numpy(), index=pd.Index(keyed["_k"].astype(str)))
    out = jobs["job_id"].astype(str).map(by_id)
    out = out.where(out.notna(), jobs["job_id_raw"].astype("string").fillna("").astype(str).map(by_id))
    job_key = jobs["job_id"].astype("string").str.extract(_JOB_KEY, expand=False).fillna("").astype(str)
    return out.where(out.notna(), job_key.map(by_key))


def _as_efficiency(df: pd.DataFrame) -> pd.DataFrame:
    return df if "cpu_efficiency" in df.columns else efficiency(df)


def worst_offenders(df: pd.DataFrame, n: int = 10, by: str = "core_hours_wasted") -> pd.DataFrame:
    """The ``n`` jobs worst by one measure.

    Args:
        df: A schema DataFrame or the output of :func:`efficiency`.
        n: How many jobs.
        by: An :func:`efficiency` column. Efficiencies and ``gpu_utilization`` rank lowest first
            (only jobs that ran are ranked); waste and hours rank highest first.

    Returns:
        Rows of :func:`efficiency`, worst first; jobs where ``by`` is NA are left out, and for a
        ``gpu_*`` measure jobs without GPU-hours.

    Raises:
        KeyError: ``by`` is not a column of :func:`efficiency`.
    """
    eff = _as_efficiency(df)
    if by not in eff.columns:
        raise KeyError(f"unknown measure {by!r}; choose one of {', '.join(EFFICIENCY_COLUMNS[19:])}")
    keep = eff[by].notna().to_numpy(dtype=bool)
    ascending = by in LOW_IS_BAD
    if ascending:
        keep = keep & (eff["elapsed"] > pd.Timedelta(0)).to_numpy(dtype=bool)
    if by.startswith("gpu_"):
        keep = keep & (eff["gpu_hours"].fillna(0) > 0).to_numpy(dtype=bool)
    rows = _top_candidates(eff[by], np.flatnonzero(keep), n, ascending)
    # sort the one column (positions of the kept rows), then take n whole rows: no copy of the frame
    ranked = pd.Series(eff[by].array[rows]).sort_values(ascending=ascending, kind="stable").index[:n]
    return eff.iloc[rows[ranked]].reset_index(drop=True)


def _top_candidates(column: pd.Series, rows: np.ndarray, n: int, ascending: bool) -> np.ndarray:
    """The positions among ``rows`` whose value ties or beats the n-th best: the rows a stable sort puts first.

    Every value strictly worse than the n-th best sorts after it, so sorting only these candidates
    (in their order) gives the same first ``n`` rows as sorting all of them.
    """
    if n <= 0 or len(rows) <= 4 * n:
        return rows
    values = column.to_numpy(dtype=float, na_value=np.nan)[rows]
    if np.isnan(values).any():
        return rows
    if ascending:
        return rows[values <= np.partition(values, n - 1)[n - 1]]
    return rows[values >= np.partition(values, len(values) - n)[len(values) - n]]


def waste_summary(df: pd.DataFrame, by: str | Sequence[str] = "user") -> pd.DataFrame:
    """Core-hours and GPU-hours allocated, used and wasted per user, account or partition.

    Args:
        df: A schema DataFrame or the output of :func:`efficiency`.
        by: Column(s) to group on (``user``, ``account``, ``partition``, ...).

    Returns:
        One row per group, most core-hours wasted first: ``jobs``, ``core_hours``, ``core_hours_used``,
        ``core_hours_wasted``, ``cpu_efficiency`` (used / allocated over the group), ``gpu_hours``,
        ``gpu_hours_wasted`` (over jobs with sampler data), ``median_mem_efficiency``.
    """
    eff = _as_efficiency(df)
    keys = [by] if isinstance(by, str) else list(by)
    g = eff.groupby(keys, observed=True, dropna=False, sort=False)
    out = pd.DataFrame({
        "jobs": g.size().astype("Int64"),
        "core_hours": g["core_hours"].sum(min_count=1).astype("Float64"),
        "core_hours_used": g["core_hours_used"].sum(min_count=1).astype("Float64"),
        "core_hours_wasted": g["core_hours_wasted"].sum(min_count=1).astype("Float64"),
        "gpu_hours": g["gpu_hours"].sum(min_count=1).astype("Float64"),
        "gpu_hours_wasted": g["gpu_hours_wasted"].sum(min_count=1).astype("Float64"),
        "median_mem_efficiency": g["mem_efficiency"].median().astype("Float64"),
    })
    out.insert(4, "cpu_efficiency", _ratio(out["core_hours_used"], out["core_hours"]))
    out = out.sort_values("core_hours_wasted", ascending=False, kind="stable", na_position="last")
    return out.reset_index()


# ---------------------------------------------------------------------------
# failures


def failures_by_state(df: pd.DataFrame) -> pd.DataFrame:
    """Job counts per normalised state.

    Args:
        df: A schema DataFrame.

    Returns:
        ``state``, ``jobs``, ``fraction`` (of all jobs), ``failure`` (True for the terminal states
        that count as a failure of the job, :data:`hpcjobs.states.FAILURE_STATES`); most jobs first.
    """
    return _failures_by_state(_job_rows(df, _FAILURE_INPUT))


#: The job-row columns the failure tables read.
_FAILURE_INPUT = frozenset({"scheduler", "state", "exit_code", "exit_signal"})


def _failures_by_state(jobs: pd.DataFrame) -> pd.DataFrame:
    counts = jobs["state"].value_counts(sort=False)
    counts = counts[counts > 0]
    out = pd.DataFrame({"state": counts.index.astype(str), "jobs": counts.to_numpy()})
    out["jobs"] = out["jobs"].astype("Int64")
    out["fraction"] = _ratio(out["jobs"], pd.Series(len(jobs), index=out.index))
    out["failure"] = out["state"].isin(FAILURE_STATES)
    return out.sort_values(["jobs", "state"], ascending=[False, True], kind="stable").reset_index(drop=True)


_STATE_MEANING = {
    "TIMEOUT": "time limit reached", "CANCELLED": "cancelled", "OUT_OF_MEMORY": "out of memory",
    "NODE_FAIL": "node failure", "PREEMPTED": "preempted", "BOOT_FAIL": "node boot failure",
    "DEADLINE": "deadline reached", "FAILED": "failed",
}


def exit_meaning(scheduler: str, code: Any, sig: Any, state: str | None = None) -> str:
    """A short human explanation of an exit code/signal pair (OpenPBS ``job.h``, Torque ``pbs_job.h``).

    Negative codes are looked up in the scheduler's
    :attr:`~hpcjobs.schedulers.base.BaseBackend.job_exec_codes` (PBS Pro's and Torque's JOB_EXEC_* codes).

    Args:
        scheduler: ``slurm``, ``pbspro`` or ``torque``.
        code: Exit code (may be NA).
        sig: Signal (may be NA).
        state: The normalised state, used when code and signal say nothing (``0:0`` of a TIMEOUT).

    Returns:
        Text such as ``"exit 3"``, ``"killed by SIGKILL"``, ``"pbspro: walltime exceeded (-29)"``.
    """
    import signal as _signal

    def name(n: int) -> str:
        try:
            return _signal.Signals(n).name
        except ValueError:
            return f"signal {n}"

    if state == "OUT_OF_MEMORY":  # Slurm records 0:125 (no signal 125 exists): the memory cgroup's kill
        return _STATE_MEANING[state]
    if pd.notna(sig) and int(sig) > 0:
        if int(sig) >= 65 and state in _STATE_MEANING:  # beyond the signals (1..64): not a signal number
            return _STATE_MEANING[state]
        return f"killed by {name(int(sig))}"
    if pd.isna(code) or int(code) == 0:
        if state in _STATE_MEANING:
            return _STATE_MEANING[state]
        return "unknown" if pd.isna(code) else "success"
    c = int(code)
    backend = find_backend(scheduler)
    table = backend.job_exec_codes if backend is not None else None
    if table is not None:
        if c < 0:
            return f"{scheduler}: {table.get(c, 'JOB_EXEC error')} ({c})"
        if c > 256:
            return f"top shell killed by {name(c - 256)}"
    if 128 < c < 160:
        return f"exit {c} (a command killed by {name(c - 128)})"
    return f"exit {c}"


def failures_by_exit(df: pd.DataFrame) -> pd.DataFrame:
    """Failed jobs counted by state, exit code and signal.

    Args:
        df: A schema DataFrame.

    Returns:
        ``state``, ``exit_code``, ``exit_signal``, ``meaning`` (:func:`exit_meaning`), ``jobs``; only
        jobs in :data:`~hpcjobs.states.FAILURE_STATES`; most jobs first.
    """
    return _failures_by_exit(_job_rows(df, _FAILURE_INPUT))


def _failures_by_exit(jobs: pd.DataFrame) -> pd.DataFrame:
    jobs = jobs[jobs["state"].isin(FAILURE_STATES).to_numpy(dtype=bool)]
    keys = ["scheduler", "state", "exit_code", "exit_signal"]
    frame = pd.DataFrame({
        "scheduler": jobs["scheduler"],
        "state": jobs["state"],
        "exit_code": jobs["exit_code"],
        "exit_signal": jobs["exit_signal"].fillna(0).astype("Int64"),
    })
    # grouped on the category codes; the few groups are then named and ordered as text
    out = frame.groupby(keys, observed=True, dropna=False, sort=False).size().rename("jobs").reset_index()
    out = out.astype({"scheduler": str, "state": str})
    out = out.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)
    out["meaning"] = [exit_meaning(s, c, g_, st) for s, c, g_, st in
                      zip(out["scheduler"], out["exit_code"], out["exit_signal"], out["state"], strict=True)]
    out["jobs"] = out["jobs"].astype("Int64")
    out["exit_code"] = out["exit_code"].astype("Int64")
    out = out[["state", "exit_code", "exit_signal", "meaning", "jobs"]]
    return out.sort_values(["jobs", "state"], ascending=[False, True], kind="stable").reset_index(drop=True)


def failures(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Both failure tables: ``{"failures_by_state": ..., "failures_by_exit": ...}``."""
    return _failures(_job_rows(df, _FAILURE_INPUT))


def _failures(jobs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {"failures_by_state": _failures_by_state(jobs), "failures_by_exit": _failures_by_exit(jobs)}


# ---------------------------------------------------------------------------
# all sections

#: The columns of the worst-offender tables in :func:`report_tables`.
OFFENDER_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "account", "partition", "state", "cpus", "gpus", "elapsed", "cpu_efficiency",
    "mem_efficiency", "time_efficiency", "core_hours", "core_hours_wasted", "gpu_hours", "gpu_utilization",
    "gpu_hours_wasted",
)

#: Report sections and what :func:`report_tables` puts in each.
SECTIONS = ("efficiency", "wait", "failures")


def report_tables(df: pd.DataFrame, section: str = "all", *, gpu: pd.DataFrame | None = None,
                  top: int = 20, tz: str | None = None) -> dict[str, pd.DataFrame]:
    """The tables of one report section (or all), by name, in display order.

    Args:
        df: A schema DataFrame.
        section: ``efficiency``, ``wait``, ``failures`` or ``all``.
        gpu: Optional per-job GPU summary for :func:`efficiency`.
        top: Rows of the worst-offender tables.
        tz: Time zone for the hour/weekday wait tables.

    Returns:
        ``efficiency``: ``waste_by_user``, ``waste_by_account``, ``waste_by_partition``,
        ``worst_cpu_waste``, ``worst_gpu_waste`` (only with GPU jobs), ``right_sizing`` (the notes of the
        ``top`` groups: :func:`hpcjobs.accounting.reports.right_sizing.right_sizing_table`); ``wait``: ``wait_by_<key>``
        for each of :data:`WAIT_KEYS`; ``failures``: ``failures_by_state``, ``failures_by_exit``.

    Raises:
        ValueError: Unknown section.
    """
    if section not in (*SECTIONS, "all"):
        raise ValueError(f"unknown section {section!r}; choose one of {', '.join(SECTIONS)}, all")
    out: dict[str, pd.DataFrame] = {}
    from hpcjobs.accounting.reports.advise import ADVICE_INPUT, AdviceSettings
    from hpcjobs.accounting.reports.right_sizing import _right_sizing

    wanted = {"efficiency": _EFFICIENCY_INPUT | ADVICE_INPUT, "wait": _WAIT_INPUT, "failures": _FAILURE_INPUT}
    jobs = _job_rows(df, frozenset().union(*(v for k, v in wanted.items() if section in (k, "all"))))
    if section in ("efficiency", "all"):
        eff = _efficiency(jobs, gpu)
        for key in ("user", "account", "partition"):
            out[f"waste_by_{key}"] = waste_summary(eff, key)
        out["worst_cpu_waste"] = worst_offenders(eff, top, "core_hours_wasted")[list(OFFENDER_COLUMNS)]
        if (eff["gpu_hours"].fillna(0) > 0).any():
            gpu_by = "gpu_hours_wasted" if eff["gpu_hours_wasted"].notna().any() else "gpu_hours"
            out["worst_gpu_waste"] = worst_offenders(eff, top, gpu_by)[list(OFFENDER_COLUMNS)]
        # jobstats-style notes of the `top` user × sweep groups with most runs
        out["right_sizing"] = _right_sizing(jobs, AdviceSettings(), groups=top)
    if section in ("wait", "all"):
        out.update(_queue_wait_report(jobs, tz))
    if section in ("failures", "all"):
        out.update(_failures(jobs))
    return out

