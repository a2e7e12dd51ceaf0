"""A self-contained HTML report: inline CSS, figures as base64 PNG, escaped tables, no external URL.

The file opens offline in any browser and can be mailed or attached to a ticket as it is.
"""

from __future__ import annotations

import base64
import html
import numbers
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hpcjobs.accounting.reports.catalog import SECTIONS, table_info

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_CSS = """
:root { --ink:#1d2733; --muted:#5f6b7a; --line:#dde3ea; --accent:#1f5f8b; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { margin:0; font-family: -apple-system, "Segoe UI", "DejaVu Sans", Roboto, Helvetica, Arial, sans-serif;
       color:var(--ink); background:var(--bg); font-size:14px; line-height:1.45; }
header { background:var(--accent); color:#fff; padding:22px 32px 18px; }
header h1 { margin:0 0 4px; font-size:24px; font-weight:600; }
header p { margin:0; opacity:.85; font-size:13px; }
main { padding:8px 32px 40px; max-width:1180px; }
nav { margin:14px 0 0; font-size:13px; }
nav a { color:#fff; margin-right:14px; text-decoration:none; border-bottom:1px solid rgba(255,255,255,.4); }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 22px 10px;
          margin:18px 0; }
h2 { font-size:19px; margin:2px 0 10px; color:var(--accent); }
h3 { font-size:15px; margin:18px 0 6px; }
.cards { display:flex; gap:12px; flex-wrap:wrap; margin:16px 0 4px; }
.card { background:#fff; border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:150px; }
.card .v { font-size:22px; font-weight:600; }
.card .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.figs { display:flex; flex-wrap:wrap; gap:14px; align-items:flex-start; }
figure { margin:10px 0 14px; }
figure img { max-width:100%; height:auto; border:1px solid var(--line); border-radius:6px; background:#fff; }
figcaption { color:var(--muted); font-size:12px; }
.tablewrap { overflow-x:auto; margin-bottom:12px; }
table { border-collapse:collapse; font-size:12.5px; min-width:40%; }
th, td { padding:4px 10px; border-bottom:1px solid var(--line); text-align:right; white-space:nowrap; }
th { background:#eef2f6; font-weight:600; position:sticky; top:0; }
td:first-child, th:first-child { text-align:left; }
tbody tr:nth-child(even) { background:#fafbfc; }
.note { color:var(--muted); font-size:12px; }
footer { color:var(--muted); font-size:12px; padding:0 32px 24px; }
"""

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


def table_html(df: pd.DataFrame, max_rows: int = 50) -> str:
    """A DataFrame as an escaped HTML table (first ``max_rows`` rows)."""
    if df.empty:
        return '<p class="note">no rows</p>'
    shown = df.head(max_rows)
    head = "".join(f"<th>{html.escape(SHORT_NAMES.get(str(c), str(c)))}</th>" for c in shown.columns)
    body = []
    for row in shown.itertuples(index=False, name=None):
        cells = "".join(f"<td>{html.escape(format_cell(v, str(c)))}</td>"
                        for v, c in zip(row, shown.columns, strict=True))
        body.append(f"<tr>{cells}</tr>")
    more = f'<p class="note">{len(df) - max_rows} more rows not shown</p>' if len(df) > max_rows else ""
    rows = "".join(body)
    return f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>{more}'


def figure_html(fig: Figure, caption: str = "") -> str:
    """A figure embedded as a base64 PNG ``<img>`` in a ``<figure>``."""
    from hpcjobs.accounting.reports.plots import figure_bytes

    data = base64.b64encode(figure_bytes(fig, "png")).decode("ascii")
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">{cap}</figure>'


#: Which section a figure goes under (by its name's first word); tables say theirs in the catalog.
_FIGURE_SECTION = {"efficiency": "efficiency", "wait": "wait", "failures": "failures", "sweep": "failures"}


def _title(name: str) -> str:
    return name.replace("_", " ").capitalize()


def render_html(title: str, tables: Mapping[str, pd.DataFrame], figures: Mapping[str, Figure] | None = None, *,
                summary: Mapping[str, str] | None = None, subtitle: str = "") -> str:
    """The whole report as one HTML string.

    Args:
        title: Page title.
        tables: Named tables (as :func:`hpcjobs.accounting.reports.tables.report_tables` returns them); names
            starting ``waste``/``worst``, ``wait``, ``failures`` and ``sweep`` go to their sections.
        figures: Named figures (as :func:`hpcjobs.accounting.reports.plots.report_figures` returns them).
        summary: Headline numbers shown as cards (label → text).
        subtitle: A line under the title (filters, source).

    Returns:
        A complete HTML document with no external reference.
    """
    figures = figures or {}
    sections: dict[str, list[str]] = {k: [] for k in SECTIONS}
    figs: dict[str, list[str]] = {k: [] for k in SECTIONS}
    for name, fig in figures.items():
        figs[_FIGURE_SECTION.get(name.split("_")[0], "efficiency")].append(figure_html(fig, _title(name)))
    for key, parts in figs.items():
        if parts:
            sections[key].append(f'<div class="figs">{"".join(parts)}</div>')
    for name, df in tables.items():
        info = table_info(name)
        sections[info.section].append(f"<h3>{html.escape(info.heading)}</h3>{table_html(df)}")
    used = [k for k, parts in sections.items() if parts]
    nav = "".join(f'<a href="#{k}">{html.escape(SECTIONS[k])}</a>' for k in used)
    cards = ""
    if summary:
        cards = '<div class="cards">' + "".join(
            f'<div class="card"><div class="v">{html.escape(v)}</div><div class="k">{html.escape(k)}</div></div>'
            for k, v in summary.items()) + "</div>"
    body = "".join(f'<section id="{k}"><h2>{html.escape(SECTIONS[k])}</h2>{"".join(sections[k])}</section>'
                   for k in used)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p><nav>{nav}</nav></header>"
        f"<main>{cards}{body}</main><footer>generated by hpcjobs on {stamp}</footer></body></html>\n"
    )


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


def write_html_report(path: str | os.PathLike[str], df: pd.DataFrame, *, section: str = "all",
                      gpu: pd.DataFrame | None = None, title: str = "hpcjobs accounting report",
                      subtitle: str = "", tables: Mapping[str, pd.DataFrame] | None = None,
                      what: str = "HTML file") -> Path:
    """Compute the tables and figures of ``section`` and write the HTML report.

    Args:
        path: Output file.
        df: A schema DataFrame.
        section: ``efficiency``, ``wait``, ``failures`` or ``all``.
        gpu: Optional per-job GPU summary.
        title: Page title.
        subtitle: Line under the title.
        tables: Tables already computed (default: :func:`~hpcjobs.accounting.reports.tables.report_tables`); a
            sweep report's tables add its figures (see :func:`~hpcjobs.accounting.reports.plots.report_figures`).
        what: Where the path was named (``--html``), for the messages.

    Returns:
        The path written (atomically: :func:`hpcjobs.output.write_user_file`).

    Raises:
        ConfigError: ``path`` is a FIFO, a device or a folder, or goes through something that is not a folder.
        FileSystemError: The file system refused the write (no space, permission).
    """
    from hpcjobs.accounting.reports.plots import report_figures
    from hpcjobs.accounting.reports.tables import report_tables

    if tables is None:
        tables = report_tables(df, section, gpu=gpu)
    figures = report_figures(df, section, gpu=gpu, tables=tables)
    text = render_html(title, tables, figures, summary=summary_numbers(df), subtitle=subtitle)
    from hpcjobs.output import write_user_file

    return write_user_file(path, text, what=what, mode=0o644)
