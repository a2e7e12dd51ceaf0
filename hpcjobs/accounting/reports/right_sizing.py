"""The report's ``right_sizing`` table: jobstats-style notes per user and sweep, computed for every group at once.

The figures are those of :func:`hpcjobs.accounting.reports.advise.advise` for each group of
:func:`~hpcjobs.accounting.reports.advise.advise_groups` (user × sweep, or user × job name for jobs of no
sweep), without partition limits (a report has no site config); the per-group quantiles and maxima are
one grouped pass over the job rows, so thousands of groups cost what one does. The sentences are built by
the same functions as ``hpcjobs advise``'s (``asked 64G, used at most 6G in 40 of 40 runs: ask 8G``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hpcjobs.accounting.reports.advise import (
    ADVICE_INPUT,
    AdviceSettings,
    _shown,
    limit_raise,
    memory_hits,
    resource_advice,
)
from hpcjobs.accounting.reports.rows import _job_rows, _seconds
from hpcjobs.states import COMPLETED, OUT_OF_MEMORY, TERMINAL_STATES, TIMEOUT

#: Columns of :func:`right_sizing_table`.
RIGHT_SIZING_COLUMNS = ("user", "sweep_or_job", "resource", "runs", "asked", "used_max", "proposed", "note")

#: A proposal is noted when it is at least this fraction below the request.
MIN_SAVING = 0.25

_RESOURCES = ("memory", "walltime", "cpus", "gpus")


def right_sizing_table(df: pd.DataFrame, settings: AdviceSettings | None = None, *,
                       min_saving: float = MIN_SAVING, groups: int | None = None) -> pd.DataFrame:
    """Notes per user and sweep: requests well above use, and raises for runs that hit a limit.

    Args:
        df: A schema DataFrame (job and step rows).
        settings: How advice is computed (quantile, margin, minimum runs, raise factor).
        min_saving: A proposal is noted when it is at least this fraction below the request.
        groups: Only the notes of this many groups (those with most finished runs that have a note); all by default.

    Returns:
        :data:`RIGHT_SIZING_COLUMNS`; ``asked``/``used_max``/``proposed`` as text in the resource's units,
        ``note`` the sentence. Groups with most finished runs first; in a group memory, wall time, CPUs,
        GPUs, then the raises (wall time after ``TIMEOUT``, memory after ``OUT_OF_MEMORY``).
    """
    return _right_sizing(_job_rows(df, ADVICE_INPUT), settings or AdviceSettings(), min_saving, groups)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype="Int64" if c == "runs" else "string") for c in RIGHT_SIZING_COLUMNS})


def _float(s: pd.Series) -> np.ndarray:
    out: np.ndarray = s.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    return out


def _right_sizing(jobs: pd.DataFrame, settings: AdviceSettings, min_saving: float = MIN_SAVING,
                  groups: int | None = None) -> pd.DataFrame:
    """:func:`right_sizing_table` of job rows (as :func:`~hpcjobs.accounting.reports.rows._job_rows` gives them)."""
    jobs = jobs[jobs["state"].isin(TERMINAL_STATES).to_numpy(dtype=bool)].reset_index(drop=True)
    if jobs.empty:
        return _empty()
    codes, names = _group_codes(jobs)

    nodes = np.fmax(np.nan_to_num(_float(jobs["nodes"]), nan=1.0), 1.0)
    elapsed = _float(_seconds(jobs["elapsed"]))
    done = (jobs["state"] == COMPLETED).to_numpy(dtype=bool) & (elapsed > 0)
    timeout = (jobs["state"] == TIMEOUT).to_numpy(dtype=bool)
    used_mem = _float(jobs["mem_used_bytes"].fillna(jobs["max_rss_bytes"]) if "mem_used_bytes" in jobs
                      else jobs["max_rss_bytes"]) / nodes
    asked_mem = _float(jobs["req_mem_bytes"]) / nodes
    oom = memory_hits(jobs["state"], pd.Series(used_mem), pd.Series(asked_mem))
    limit_s = _float(_seconds(jobs["time_limit"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        busy_cpus = _float(_seconds(jobs["cpu_time"])) / np.where(elapsed > 0, elapsed, np.nan)
    gpus = _float(jobs["gpus"])
    util = _float(jobs["gpu_utilization"]) if "gpu_utilization" in jobs else np.full(len(jobs), np.nan)
    busy_gpus = np.where(gpus > 0, gpus * util, np.nan)
    used = {"memory": used_mem, "walltime": elapsed, "cpus": busy_cpus, "gpus": busy_gpus}
    asked = {"memory": asked_mem, "walltime": limit_s, "cpus": _float(jobs["cpus"]),
             "gpus": np.where(gpus > 0, gpus, np.nan)}

    cols: dict[str, Any] = {"_g": codes, "done": done, "timeout": timeout, "oom": oom,
                            "t_asked": np.where(timeout, limit_s, np.nan), "o_asked": np.where(oom, asked_mem, np.nan),
                            "used_mem_all": used_mem}
    for r in _RESOURCES:
        cols[f"{r}_used"] = np.where(done, used[r], np.nan)
        cols[f"{r}_asked"] = asked[r]
    g = pd.DataFrame(cols).groupby("_g", sort=True)
    stats = g.agg(**{"runs": ("done", "size"), "completed": ("done", "sum"), "timeouts": ("timeout", "sum"),
                     "ooms": ("oom", "sum"), "t_asked": ("t_asked", "max"), "o_asked": ("o_asked", "max"),
                     "used_mem_all": ("used_mem_all", "max"),
                     **{f"{r}_{k}": (f"{r}_{src}", fn) for r in _RESOURCES
                        for k, src, fn in (("max", "used", "max"), ("n", "used", "count"), ("asked", "asked", "max"))}})
    quantiles = g[[f"{r}_used" for r in _RESOURCES]].quantile(settings.quantile)
    schedulers = _modes(codes, jobs["scheduler"])

    runs_of = stats["runs"].to_numpy().tolist()
    # most runs first, then by sweep (or job) and user in text order: as advise_groups sorts
    order = sorted(range(len(runs_of)), key=lambda k: (-runs_of[k], names[k][0], names[k][1]))
    col = {c: stats[c].to_numpy(dtype=float).tolist() for c in stats.columns}  # plain floats: no pandas per group
    qs = {r: quantiles[f"{r}_used"].to_numpy(dtype=float).tolist() for r in _RESOURCES}
    group_codes = stats.index.to_numpy().tolist()
    rows: list[dict[str, Any]] = []
    noted = 0
    for i in order:
        if groups is not None and noted >= groups:
            break
        enough = col["completed"][i] >= settings.min_runs
        if not (enough or col["timeouts"][i] or col["ooms"][i]):
            continue  # nothing to say
        code = group_codes[i]
        group, user = names[code]
        what = group[4:] if str(group).startswith("job:") else group
        runs = int(col["runs"][i])
        scheduler = schedulers.get(code)
        base = {"user": user, "sweep_or_job": what, "runs": runs}
        before = len(rows)
        for r in _RESOURCES if enough else ():
            if r == "gpus" and not col["gpus_n"][i]:
                continue
            a = resource_advice(r, _num(col[f"{r}_max"][i]), _num(qs[r][i]), int(col[f"{r}_n"][i]),
                                _int(col[f"{r}_asked"][i]), runs, settings, enough, None, None, scheduler)
            if a.proposed is None or a.asked is None or a.proposed > a.asked * (1 - min_saving):
                continue
            rows.append({**base, "resource": r, "asked": _shown(r, a.asked, scheduler),
                         "used_max": _shown(r, a.used_max, scheduler), "proposed": a.proposed_text, "note": a.note})
        for r, state_name, n, asked_max, seen in (
                ("walltime", TIMEOUT, col["timeouts"][i], col["t_asked"][i], col["walltime_max"][i]),
                ("memory", OUT_OF_MEMORY, col["ooms"][i], col["o_asked"][i], col["used_mem_all"][i])):
            if not n:
                continue
            lr = limit_raise(r, state_name, ("",) * int(n), _int(asked_max), _num(seen), settings, None, None,
                             scheduler)
            rows.append({**base, "resource": r, "asked": None if lr.asked is None else _shown(r, lr.asked, scheduler),
                         "used_max": None, "proposed": lr.proposed_text, "note": lr.note})
        noted += len(rows) > before
    if not rows:
        return _empty()
    out = pd.DataFrame(rows, columns=list(RIGHT_SIZING_COLUMNS))
    return out.astype({c: "Int64" if c == "runs" else "string" for c in RIGHT_SIZING_COLUMNS})


def _group_codes(jobs: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Each row's group (0..n-1, user × sweep, else user × job name) and each group's (``sweep``/``job:name``, user).

    Worked out on integer codes: the text of a group is made once per group, not per row.
    """
    sweep_codes, sweeps = pd.factorize(jobs["sweep_id"])
    name_codes, job_names = pd.factorize(jobs["job_name"])
    user_codes, users = pd.factorize(jobs["user"])
    n_sweeps = len(sweeps)
    group = np.where(sweep_codes >= 0, sweep_codes, n_sweeps + 1 + name_codes).astype(np.int64)
    codes, _uniques = pd.factorize(group * (len(users) + 1) + (user_codes + 1))
    first = np.empty(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    sweep_text = [str(v) for v in sweeps]
    job_text = [f"job:{v}" for v in job_names] + ["job:?"]  # code -1 (no name) is the last
    user_text = [str(v) for v in users] + ["?"]
    names = [(sweep_text[s] if s >= 0 else job_text[j], user_text[u]) for s, j, u in
             zip(sweep_codes[first].tolist(), name_codes[first].tolist(), user_codes[first].tolist(), strict=True)]
    return codes, names


def _modes(codes: np.ndarray, values: pd.Series) -> dict[int, str]:
    """Each group's most common value (the first in text order among equals), as ``advise`` takes it."""
    value_codes, uniques = pd.factorize(values)
    text = [str(v) for v in uniques]
    rank = np.argsort(np.argsort(np.array(text, dtype=object)))  # text order of each distinct value
    keep = value_codes >= 0
    frame = pd.DataFrame({"_g": codes[keep], "v": value_codes[keep]})
    counts = frame.groupby(["_g", "v"], sort=False).size().reset_index(name="n")
    counts["rank"] = rank[counts["v"].to_numpy()] if len(counts) else 0
    best = counts.sort_values(["_g", "n", "rank"], ascending=[True, False, True]).drop_duplicates("_g")
    return dict(zip(best["_g"].tolist(), (text[v] for v in best["v"].tolist()), strict=True))


def _num(value: float) -> float | None:
    return None if value != value else value  # NaN


def _int(value: float) -> int | None:
    return None if value != value else int(value)


__all__ = ["MIN_SAVING", "RIGHT_SIZING_COLUMNS", "right_sizing_table"]
