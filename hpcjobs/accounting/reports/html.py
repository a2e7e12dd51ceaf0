"""How report values read on a page and in a terminal table: short headings, formatted cells, headline numbers.

The page itself is :mod:`hpcjobs.accounting.reports.page`.
"""

from __future__ import annotations

import numbers
from typing import Any

import pandas as pd

#: Short column headings for people (HTML and terminal tables; CSV/JSON keep the real names).
SHORT_NAMES: dict[str, str] = {
    "core_hours": "core-h", "core_hours_used": "used core-h", "core_hours_wasted": "wasted core-h",
    "cpu_efficiency": "CPU eff", "mem_efficiency": "mem eff", "time_efficiency": "time/limit",
    "gpu_hours": "GPU-h", "gpu_hours_wasted": "wasted GPU-h", "gpu_utilization": "GPU util",
    "median_mem_efficiency": "median mem eff", "median_wait": "median", "p90_wait": "p90", "mean_wait": "mean",
    "max_wait": "max", "exit_code": "exit", "exit_signal": "signal",
}

#: Columns holding fractions, shown as percentages.
_PERCENT = ("efficiency", "fraction", "failure_rate", "gpu_utilization")


def format_cell(value: Any, column: str = "") -> str:
    """One cell as display text: durations as ``[Dd ]HH:MM:SS``, fractions as %, bytes as GiB, NA as ``–``."""
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return "–"
    if isinstance(value, pd.Timedelta):
        total = int(value.total_seconds())
        d, rem = divmod(total, 86400)
        h, rem = divmod(rem, 3600)
        m, s = divmod(rem, 60)
        return (f"{d}d " if d else "") + f"{h:02d}:{m:02d}:{s:02d}"
    if isinstance(value, pd.Timestamp):
        return str(value.strftime("%Y-%m-%d %H:%M"))
    if isinstance(value, float) and not isinstance(value, bool):
        if any(k in column for k in _PERCENT):
            return f"{100 * value:.1f}%"
        if column.endswith("_bytes"):
            return f"{value / 2**30:.2f} GiB"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if column.endswith("_bytes") and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f"{value / 2**30:.2f} GiB"
    return str(value)


def _hours(h: float) -> str:
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def summary_numbers(df: pd.DataFrame) -> dict[str, str]:
    """Headline numbers of a schema DataFrame: jobs, failed, core-hours, GPU-hours, median wait, CPU efficiency."""
    from hpcjobs.accounting.reports.rows import _started, job_rows
    from hpcjobs.accounting.reports.tables import efficiency
    from hpcjobs.states import FAILURE_STATES

    eff = efficiency(df)
    jobs = job_rows(df)
    started = jobs[_started(jobs) & jobs["wait"].notna()]
    core = float(eff["core_hours"].sum())
    used = float(eff["core_hours_used"].sum())
    out = {
        "jobs": f"{len(jobs):,}",
        "failed": f"{int(jobs['state'].isin(FAILURE_STATES).sum()):,}",
        "core-hours": _hours(core),
        "GPU-hours": _hours(float(eff["gpu_hours"].sum())),
        "CPU efficiency": f"{100 * used / core:.1f}%" if core > 0 else "–",
        "median wait": format_cell(started["wait"].median()) if len(started) else "–",
    }
    return out
