"""The charts of the interactive report, aggregated here so that the page's weight does not grow with the jobs.

Each function returns a chart spec (a JSON-ready dict) that ``report.js`` draws as SVG: ``bars``
(a histogram with its clipped share in an orange last bar and written in the note), ``density`` (a
2-D histogram shaded on a log scale; a ``scatter`` of the jobs themselves, each named on hover, when
there are at most :data:`SCATTER_MAX` of them), ``lines`` (time series the reader zooms by dragging),
``hbars`` and ``parallel`` (parallel coordinates of a sweep's points). The sizes are bounded: at most
:data:`TIME_BINS` time bins, :data:`MAX_SERIES` series, :data:`DENSITY_BINS` squared cells, however
many jobs there are.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

#: Above this many jobs the efficiency plane is a density, not one dot per job.
SCATTER_MAX = 2000
#: Cells per side of the density plane.
DENSITY_BINS = 40
#: Time bins of a time series.
TIME_BINS = 240
#: Series of a time series (the partitions with most jobs; the others are summed as "other").
MAX_SERIES = 8
#: Where the efficiency axes are cut: higher values go into the last bar (shares written down).
EFFICIENCY_CLIP = {"cpu_efficiency": 1.0, "mem_efficiency": 1.5, "time_efficiency": 1.0}

_LABELS = {"cpu_efficiency": "CPU efficiency", "mem_efficiency": "memory efficiency (max RSS / asked)",
           "time_efficiency": "time used / limit"}


def epoch_seconds(times: pd.Series) -> np.ndarray:
    """Seconds since 1970 of a datetime column, whatever its unit (ns, us) or zone (naive: UTC); NaN where missing."""
    zero = pd.Timestamp(0, tz="UTC") if getattr(times.dt, "tz", None) is not None else pd.Timestamp(0)
    return (times - zero).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)


def _percent(v: float) -> str:
    return f"{100 * v:.0f}%"


def _share(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "0%"


def efficiency_histogram(eff: pd.DataFrame, column: str) -> dict[str, Any]:
    """Jobs that ran by ``column`` (a fraction): bars 5% wide up to the clip, one bar for all above it."""
    ran = eff[eff["elapsed"] > pd.Timedelta(0)] if "elapsed" in eff else eff
    values = ran[column].dropna().astype(float).to_numpy()
    clip = EFFICIENCY_CLIP[column]
    bins = round(clip / 0.05)
    edges = np.linspace(0.0, clip, bins + 1)
    counts, _ = np.histogram(np.clip(values, 0.0, clip), bins=edges)
    over = int((values > clip).sum())
    counts[-1] -= over  # np.histogram puts the clipped values (== clip) in the last bar: count them apart
    out = [{"from": _percent(edges[i]), "to": _percent(edges[i + 1]), "count": int(counts[i])} for i in range(bins)]
    note = f"{len(values):,} jobs that ran"
    if over:
        out.append({"from": _percent(clip), "to": f"{_percent(float(values.max()))} (max)", "count": over,
                    "over": True})
        note += f"; {over:,} ({_share(over, len(values))}) above {_percent(clip)}, in the orange bar"
    return {"kind": "bars", "name": f"hist_{column}", "title": f"Jobs by {_LABELS[column]}", "bins": out,
            "x_label": _LABELS[column], "y_label": "jobs", "note": note}


def efficiency_plane(eff: pd.DataFrame) -> dict[str, Any]:
    """CPU against memory efficiency: each job (named on hover) up to :data:`SCATTER_MAX`, else a density."""
    pts = eff.dropna(subset=["cpu_efficiency", "mem_efficiency"])
    x = pts["mem_efficiency"].astype(float).to_numpy()
    y = pts["cpu_efficiency"].astype(float).to_numpy()
    xclip, yclip = EFFICIENCY_CLIP["mem_efficiency"], EFFICIENCY_CLIP["cpu_efficiency"]
    clipped = int(((x > xclip) | (y > yclip)).sum())
    base = {"name": "efficiency_plane", "title": "Jobs: CPU against memory efficiency",
            "x_label": "memory efficiency", "y_label": "CPU efficiency", "x_unit": "%", "y_unit": "%"}
    note = f"{len(x):,} jobs with both figures"
    if clipped:
        note += (f"; {clipped:,} ({_share(clipped, len(x))}) above {_percent(xclip)} memory or {_percent(yclip)} CPU "
                 "are drawn on the edge")
    x, y = np.clip(x, 0.0, xclip), np.clip(y, 0.0, yclip)
    if len(x) <= SCATTER_MAX:
        labels = _job_labels(pts)
        states = pts["state"].astype("string").fillna("?").tolist()
        points = [[round(float(a), 4), round(float(b), 4), lab, s]
                  for a, b, lab, s in zip(x, y, labels, states, strict=True)]
        return {**base, "kind": "scatter", "points": points, "x_range": [0.0, xclip], "y_range": [0.0, yclip],
                "note": note + "; colour: the job's state"}
    xe = np.linspace(0.0, xclip, DENSITY_BINS + 1)
    ye = np.linspace(0.0, yclip, DENSITY_BINS + 1)
    counts, _, _ = np.histogram2d(y, x, bins=[ye, xe])
    return {**base, "kind": "density", "x_edges": [round(float(v), 4) for v in xe],
            "y_edges": [round(float(v), 4) for v in ye], "counts": counts.astype(int).tolist(),
            "note": note + f"; above {SCATTER_MAX:,} jobs the plane shows how many fall in each cell (darker: more)"}


def _job_labels(rows: pd.DataFrame) -> list[str]:
    """``job 123 · ada · sweep s1 point 4`` for each row (hover text)."""
    out = []
    missing = pd.Series([pd.NA] * len(rows), index=rows.index, dtype="string")
    users = rows["user"].astype("string").fillna("?") if "user" in rows else missing.fillna("?")
    sweeps = rows["sweep_id"].astype("string") if "sweep_id" in rows else missing
    tasks = rows.get("array_task_id", missing)
    for job, user, sweep, task in zip(rows["job_id"].astype("string").fillna("?"), users, sweeps, tasks, strict=True):
        label = f"job {job} · {user}"
        if sweep is not pd.NA and sweep is not None:
            label += f" · sweep {sweep}" + (f" point {task}" if task is not pd.NA and pd.notna(task) else "")
        out.append(label)
    return out


def _series_keys(partition: pd.Series, counts_from: pd.Series) -> pd.Series:
    """The partition of each job, the ones past the :data:`MAX_SERIES` busiest as ``other``."""
    names = partition.astype("string").fillna("(none)")
    top = counts_from.astype("string").fillna("(none)").value_counts().index[:MAX_SERIES - 1]
    return names.where(names.isin(top) | (names.nunique() <= MAX_SERIES), "other")


def _time_bins(lo: pd.Timestamp, hi: pd.Timestamp) -> tuple[np.ndarray, float]:
    """Bin edges (epoch ms) over ``lo``..``hi``, at most :data:`TIME_BINS`, a round width; the width in s."""
    span = max(1.0, (hi - lo).total_seconds())
    nice = [60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400, 30 * 86400]
    width = next((w for w in nice if span / w <= TIME_BINS), math.ceil(span / TIME_BINS / 86400) * 86400)
    start = math.floor(lo.timestamp() / width) * width
    n = max(1, math.ceil((hi.timestamp() - start) / width))
    return (start + width * np.arange(n + 1)) * 1000.0, float(width)


def _width_text(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:g} day" + ("s" if seconds > 86400 else "")
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min"


def wait_over_time(jobs: pd.DataFrame) -> dict[str, Any] | None:
    """Median queue wait (minutes) of the jobs submitted in each time bin, one line per partition."""
    started = jobs[jobs["start_time"].notna() & jobs["wait"].notna() & jobs["submit_time"].notna()]
    if started.empty:
        return None
    edges, width = _time_bins(started["submit_time"].min(), started["submit_time"].max())
    t = epoch_seconds(started["submit_time"]) * 1000.0
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(edges) - 2)
    frame = pd.DataFrame({"bin": idx, "series": _series_keys(started["partition"], started["partition"]).to_numpy(),
                          "wait": started["wait"].dt.total_seconds().to_numpy() / 60.0})
    med = frame.groupby(["series", "bin"], sort=True)["wait"].median()
    series = []
    for name, part in med.groupby(level=0, sort=True):
        by_bin = dict(zip(part.index.get_level_values(1), part.to_numpy(), strict=True))
        pts = [[float(edges[i] + width * 500.0), round(float(by_bin[i]), 3) if i in by_bin else None]
               for i in range(len(edges) - 1)]
        series.append({"name": str(name), "points": pts})
    return {"kind": "lines", "name": "wait_over_time", "title": "Queue wait over time, by partition",
            "series": series, "x_range": [float(edges[0]), float(edges[-1])], "x_label": "submitted (UTC)",
            "y_label": "median wait (minutes)", "unit": "min", "wide": True,
            "note": f"median wait of the jobs submitted in each {_width_text(width)}; "
                    f"{len(started):,} jobs that started"}


def busy_cores_over_time(jobs: pd.DataFrame) -> dict[str, Any] | None:
    """Average cores allocated in each time bin, one line per partition (from each job's start, end and CPUs)."""
    ran = jobs[jobs["start_time"].notna() & jobs["end_time"].notna() & jobs["cpus"].notna()]
    ran = ran[ran["end_time"] > ran["start_time"]]
    if ran.empty:
        return None
    edges, width = _time_bins(ran["start_time"].min(), ran["end_time"].max())
    grid = edges / 1000.0
    keys = _series_keys(ran["partition"], ran["partition"]).to_numpy()
    series = []
    for name in sorted(set(keys.tolist())):
        part = ran[keys == name]
        s = epoch_seconds(part["start_time"])
        e = epoch_seconds(part["end_time"])
        c = part["cpus"].astype(float).to_numpy()
        used = _core_seconds_until(grid, s, c) - _core_seconds_until(grid, e, c)  # ∫ cores dt up to each edge
        avg = np.diff(used) / width
        series.append({"name": str(name), "points": [[float(edges[i] + width * 500.0), round(float(avg[i]), 3)]
                                                     for i in range(len(avg))]})
    return {"kind": "lines", "name": "busy_cores_over_time", "title": "Cores allocated over time, by partition",
            "series": series, "x_range": [float(edges[0]), float(edges[-1])], "x_label": "time (UTC)",
            "y_label": "cores allocated (average)", "unit": "cores", "wide": True,
            "note": f"average over each {_width_text(width)} of the cores that {len(ran):,} jobs held"}


def _core_seconds_until(grid: np.ndarray, times: np.ndarray, cores: np.ndarray) -> np.ndarray:
    """Σ cores × max(0, t − time) at each ``t`` of ``grid``: sorted times and prefix sums, O(n log n)."""
    order = np.argsort(times, kind="stable")
    t, c = times[order], cores[order]
    n_before = np.searchsorted(t, grid, side="right")
    sum_c = np.concatenate([[0.0], np.cumsum(c)])
    sum_ct = np.concatenate([[0.0], np.cumsum(c * t)])
    return grid * sum_c[n_before] - sum_ct[n_before]


def state_bars(by_state: pd.DataFrame) -> dict[str, Any] | None:
    """Jobs per final state (from the ``failures_by_state`` table)."""
    if by_state.empty:
        return None
    from hpcjobs.accounting.reports.plots import STATE_COLOURS

    rows = [{"label": str(r["state"]), "value": int(r["jobs"]), "colour": STATE_COLOURS.get(str(r["state"]), "#9e9e9e"),
             "details": [f"{int(r['jobs']):,} jobs"]} for _, r in by_state.iterrows()]
    return {"kind": "hbars", "name": "jobs_by_state", "title": "Jobs by final state", "bars": rows,
            "x_label": "jobs"}


def failure_bars(by_param: pd.DataFrame, top: int = 25) -> dict[str, Any] | None:
    """The parameter values with the highest failure rate (``failures_by_param``), most failures first."""
    if by_param.empty:
        return None
    rows = by_param.head(top)  # highest failure rate first, then most points (failure_params' order)
    bars = [{"label": f"{r['param']}={r['value']}",
             "value": float(r["failure_rate"]) if pd.notna(r["failure_rate"]) else 0.0, "colour": "#c62828",
             "details": [f"{int(r['failed'])} of {int(r['n'])} finished points failed"]}
            for _, r in rows.iterrows()]
    note = f"the {len(bars)} values with the highest failure rate" if len(by_param) > top else ""
    return {"kind": "hbars", "name": "failures_by_param", "title": "Failure rate by parameter value", "bars": bars,
            "x_label": "share of the points that failed", "x_unit": "%", "note": note}
