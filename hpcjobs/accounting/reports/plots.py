"""Figures for the accounting reports (matplotlib, headless).

matplotlib is an optional dependency (``pip install hpcjobs[plot]``) and is imported only when a
figure is made. Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas, never
through ``pyplot``, so no display, no global state and no GUI backend are involved.
Every function returns the Figure; :func:`save_figure` writes PNG or SVG.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcjobs.errors import HpcJobsError
from hpcjobs.states import FAILURE_STATES

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Colours of the normalised states (others grey).
STATE_COLOURS: dict[str, str] = {
    "COMPLETED": "#2e7d32", "FAILED": "#c62828", "TIMEOUT": "#ef6c00", "CANCELLED": "#757575",
    "OUT_OF_MEMORY": "#6a1b9a", "NODE_FAIL": "#ad1457", "PREEMPTED": "#00838f", "RUNNING": "#1565c0",
    "PENDING": "#90a4ae", "BOOT_FAIL": "#4e342e", "DEADLINE": "#f9a825",
}
_ACCENT = "#1f5f8b"


def new_figure(width: float = 7.0, height: float = 4.0) -> Figure:
    """An empty Figure on the Agg canvas.

    Raises:
        HpcJobsError: matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HpcJobsError("plots need matplotlib: pip install 'hpcjobs[plot]'") from exc
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _empty(fig: Figure, ax: Any, text: str) -> Figure:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_axis_off()
    return fig


def _style(ax: Any) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e0e0e0", linewidth=0.8)
    ax.set_axisbelow(True)


def plot_wait_by_partition(df: pd.DataFrame) -> Figure:
    """Box plot of queue wait (minutes) per partition, jobs that started only.

    Args:
        df: A schema DataFrame.
    """
    from hpcjobs.accounting.reports.rows import _started, job_rows

    jobs = job_rows(df)
    jobs = jobs[_started(jobs) & jobs["wait"].notna()]
    fig = new_figure()
    ax = fig.add_subplot()
    if jobs.empty:
        return _empty(fig, ax, "no started jobs")
    groups = {str(p): g["wait"].dt.total_seconds().to_numpy() / 60.0
              for p, g in jobs.groupby(jobs["partition"].astype("string").fillna("(none)"), sort=True)}
    ax.boxplot(list(groups.values()), tick_labels=[f"{k}\n(n={len(v)})" for k, v in groups.items()],
               patch_artist=True, boxprops={"facecolor": "#cfe3f1", "edgecolor": _ACCENT},
               medianprops={"color": "#c62828", "linewidth": 2})
    ax.set_ylabel("queue wait (minutes)")
    ax.set_title("Queue wait by partition")
    _style(ax)
    return fig


def plot_efficiency_histograms(eff: pd.DataFrame) -> Figure:
    """Histograms of CPU, memory and time efficiency (fractions) of jobs that ran.

    Args:
        eff: Output of :func:`hpcjobs.accounting.reports.tables.efficiency`.
    """
    fig = new_figure(9.0, 3.0)
    axes = fig.subplots(1, 3, sharey=True)
    ran = eff[eff["elapsed"] > pd.Timedelta(0)]
    for ax, (col, label) in zip(axes, (("cpu_efficiency", "CPU efficiency"), ("mem_efficiency", "memory efficiency"),
                                       ("time_efficiency", "time used / limit")), strict=True):
        vals = ran[col].dropna().astype(float).to_numpy()
        if len(vals) == 0:
            _empty(fig, ax, "no data")
            ax.set_title(label)
            continue
        top = max(1.0, float(vals.max()))
        ax.hist(vals, bins=20, range=(0.0, top), color=_ACCENT, edgecolor="white")
        ax.set_title(label)
        ax.set_xlabel("fraction")
        _style(ax)
    axes[0].set_ylabel("jobs")
    return fig


def plot_efficiency_scatter(eff: pd.DataFrame) -> Figure:
    """CPU efficiency against memory efficiency, one point per job, area by core-hours, colour by state.

    Args:
        eff: Output of :func:`hpcjobs.accounting.reports.tables.efficiency`.
    """
    fig = new_figure(5.6, 4.0)
    ax = fig.add_subplot()
    pts = eff.dropna(subset=["cpu_efficiency", "mem_efficiency"])
    if pts.empty:
        return _empty(fig, ax, "no jobs with CPU and memory efficiency")
    hours = pts["core_hours"].fillna(0).astype(float)
    size = 20 + 300 * (hours / hours.max() if hours.max() > 0 else hours)
    colours = [STATE_COLOURS.get(str(s), "#9e9e9e") for s in pts["state"]]
    ax.scatter(pts["mem_efficiency"].astype(float), pts["cpu_efficiency"].astype(float), s=size, c=colours,
               alpha=0.7, edgecolors="white", linewidths=0.5)
    ax.set_xlabel("memory efficiency (max RSS / requested)")
    ax.set_ylabel("CPU efficiency")
    ax.set_title("Jobs: CPU vs memory efficiency")
    for state in dict.fromkeys(str(s) for s in pts["state"]):
        ax.scatter([], [], c=STATE_COLOURS.get(state, "#9e9e9e"), label=state)
    ax.legend(frameon=False, fontsize=8, loc="best")
    _style(ax)
    return fig


def plot_failures_by_state(by_state: pd.DataFrame) -> Figure:
    """Horizontal bars of jobs per state.

    Args:
        by_state: Output of :func:`hpcjobs.accounting.reports.tables.failures_by_state`.
    """
    fig = new_figure(6.0, 0.6 + 0.4 * max(len(by_state), 1))
    ax = fig.add_subplot()
    if by_state.empty:
        return _empty(fig, ax, "no jobs")
    rows = by_state.iloc[::-1]
    ax.barh(rows["state"].astype(str), rows["jobs"].astype(int),
            color=[STATE_COLOURS.get(str(s), "#9e9e9e") for s in rows["state"]])
    for y, v in enumerate(rows["jobs"].astype(int)):
        ax.text(v, y, f" {v}", va="center", fontsize=9)
    ax.set_xlabel("jobs")
    ax.set_title("Jobs by final state")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def plot_sweep_outcome(points: pd.DataFrame, param: str) -> Figure:
    """Stacked bars: points per value of one sweep parameter, split by state.

    Args:
        points: Output of :func:`hpcjobs.accounting.reports.sweeps.sweep_frame`.
        param: A parameter column.
    """
    fig = new_figure()
    ax = fig.add_subplot()
    if points.empty:
        return _empty(fig, ax, "no points")
    value = points[param]
    order = sorted(value.dropna().unique().tolist())
    table = pd.crosstab(value.astype("string").fillna("<NA>"), points["state"].astype("string").fillna("NOT FOUND"))
    table = table.reindex([str(v) for v in order] + [i for i in table.index if i not in map(str, order)])
    bottom = pd.Series(0, index=table.index, dtype=float)
    states = sorted(table.columns, key=lambda s: (s in FAILURE_STATES, s))
    for state in states:
        ax.bar(table.index, table[state], bottom=bottom, label=state, color=STATE_COLOURS.get(state, "#9e9e9e"))
        bottom += table[state]
    ax.set_xlabel(param)
    ax.set_ylabel("points")
    ax.set_title(f"Sweep outcome by {param}")
    ax.legend(frameon=False, fontsize=8)
    _style(ax)
    return fig


def plot_failures_by_param(by_param: pd.DataFrame, top: int = 20) -> Figure:
    """Horizontal bars of the failure rate of each parameter value, worst first (at most ``top`` bars).

    Args:
        by_param: Output of :func:`hpcjobs.accounting.reports.sweeps.failures_by_param` (or ``failure_params``).
        top: How many parameter values.
    """
    rows = by_param.head(top)
    fig = new_figure(6.5, 0.8 + 0.35 * max(len(rows), 1))
    ax = fig.add_subplot()
    if rows.empty:
        return _empty(fig, ax, "no finished points")
    rows = rows.iloc[::-1]
    labels = [f"{p}={v}" for p, v in zip(rows["param"], rows["value"], strict=True)]
    rate = rows["failure_rate"].astype(float).fillna(0.0).to_numpy()
    ax.barh(labels, rate, color=[STATE_COLOURS["FAILED"] if r > 0 else STATE_COLOURS["COMPLETED"] for r in rate])
    for y, (r, f, n) in enumerate(zip(rate, rows["failed"].astype(int), rows["n"].astype(int), strict=True)):
        ax.text(r, y, f" {f}/{n}", va="center", fontsize=9)
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("failure rate")
    ax.set_title("Failures by parameter value")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def save_figure(fig: Figure, path: str | os.PathLike[str], *, what: str = "figure file") -> Path:
    """Write ``fig`` as PNG or SVG, chosen by the file suffix, atomically (:func:`hpcjobs.output.write_user_file`).

    ``what``: where the path was named (``--plot``), for the messages.

    Raises:
        ValueError: The suffix is neither ``.png`` nor ``.svg``.
        ConfigError: ``path`` is a FIFO, a device or a folder, or goes through something that is not a folder.
        FileSystemError: The file system refused the write (no space, permission).
    """
    from hpcjobs.output import write_user_file

    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ValueError(f"figure format must be .png or .svg, not {p.suffix!r}")
    return write_user_file(p, figure_bytes(fig, fmt), what=what, mode=0o644)


def figure_bytes(fig: Figure, fmt: str = "png") -> bytes:
    """The figure encoded as PNG or SVG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, metadata={"Software": None} if fmt == "png" else {"Date": None})
    return buf.getvalue()


#: At most this many parameters get a ``sweep_outcome_<param>`` figure.
MAX_OUTCOME_FIGURES = 4


def report_figures(df: pd.DataFrame, section: str = "all", *, gpu: pd.DataFrame | None = None,
                   tables: Mapping[str, pd.DataFrame] | None = None) -> dict[str, Figure]:
    """The figures of one report section (or all), by file stem.

    Args:
        df: A schema DataFrame.
        section: ``efficiency``, ``wait``, ``failures`` or ``all``.
        gpu: Optional per-job GPU summary for the efficiency figures.
        tables: The report's tables; a sweep report's ``failures_by_param`` and ``sweep_points`` (see
            :func:`hpcjobs.accounting.reports.sweeps.sweep_report_tables`) add their figures.

    Returns:
        ``efficiency_histograms``, ``efficiency_scatter`` (efficiency); ``wait_by_partition`` (wait);
        ``failures_by_state`` (failures); for a sweep, ``failures_by_param`` and ``sweep_outcome_<param>``
        for its first :data:`MAX_OUTCOME_FIGURES` parameters.
    """
    from hpcjobs.accounting.reports import tables as tbl

    given = tables
    out: dict[str, Figure] = {}
    if section in ("efficiency", "all"):
        eff = tbl.efficiency(df, gpu=gpu)
        out["efficiency_histograms"] = plot_efficiency_histograms(eff)
        out["efficiency_scatter"] = plot_efficiency_scatter(eff)
    if section in ("wait", "all"):
        out["wait_by_partition"] = plot_wait_by_partition(df)
    if section in ("failures", "all"):
        out["failures_by_state"] = plot_failures_by_state(tbl.failures_by_state(df))
    if section in ("failures", "all") and given is not None:
        if "failures_by_param" in given:
            out["failures_by_param"] = plot_failures_by_param(given["failures_by_param"])
        points = given.get("sweep_points")
        if points is not None:
            params = list(dict.fromkeys(given["failures_by_param"]["param"])) if "failures_by_param" in given else []
            for param in params[:MAX_OUTCOME_FIGURES]:
                out["sweep_outcome_" + re.sub(r"[^A-Za-z0-9_.-]", "_", param)] = plot_sweep_outcome(points, param)
    return out
