"""The interactive HTML report: one self-contained file that people sort, filter, zoom and hover.

The page holds its own CSS and JavaScript (``report.css``, ``report.js``: about 30 KB, no library)
and one JSON document of what it shows; it makes no network request and needs no plotting package.
Everything is aggregated here, in pandas, so the page's weight depends on the tables' rows and the
charts' bins, not on the number of jobs (see ``benchmarks/bench_report_page.py``).

Why no chart library: the charts are histograms, densities, time series and bars of numbers
aggregated in Python. Measured, the libraries the field inlines weigh more than the whole budget
of a page for a million jobs allows: Plotly's ``plotly.min.js`` (plotly 7.1.0 wheel) is 4.8 MB,
Bokeh's ``bokeh.min.js`` 1.27 MB plus ``bokeh-tables.min.js`` 0.30 MB (bokeh 3.9.2 wheel). The
SVG drawing these charts need is a few hundred lines of ``report.js``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd

from hpcjobs.accounting.reports.catalog import SECTIONS, table_info
from hpcjobs.accounting.reports.page import charts
from hpcjobs.accounting.reports.page.sweep import sweep_parallel
from hpcjobs.accounting.reports.page.tables import table_spec


def _asset(name: str) -> str:
    return files("hpcjobs.accounting.reports.page").joinpath(name).read_text(encoding="utf-8")


def with_metrics(points: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """A sweep's points table with its points' result metrics (numeric columns) after the parameters."""
    keep = [c for c in metrics.columns if c != "point_id" and c not in points.columns
            and pd.api.types.is_numeric_dtype(metrics[c]) and not pd.api.types.is_bool_dtype(metrics[c])]
    if not keep:
        return points
    merged = points.merge(metrics[["point_id", *keep]], on="point_id", how="left")
    at = list(points.columns).index("attempts") if "attempts" in points.columns else len(points.columns)
    order = [*points.columns[:at], *keep, *points.columns[at:]]
    return merged[order]


def page_data(df: pd.DataFrame, tables: Mapping[str, pd.DataFrame], *, section: str = "all",
              gpu: pd.DataFrame | None = None, log_folder: Path | None = None,
              metrics: pd.DataFrame | None = None) -> dict[str, Any]:
    """What the page shows, JSON-ready: its sections, each with charts and tables.

    Args:
        df: A schema DataFrame (the report's rows).
        tables: The report's tables, by name (:func:`hpcjobs.accounting.reports.tables.report_tables`).
        section: ``efficiency``, ``wait``, ``failures`` or ``all``: which charts to make.
        gpu: Optional per-job GPU summary.
        log_folder: A sweep folder on this machine: the points table links each point's logs.
        metrics: The sweep's result metrics, one row per ``point_id`` (:func:`hpcjobs.sweep.results.results_frame`):
            shown in the points table and on the parallel axes, after the parameters.
    """
    from hpcjobs.accounting.reports import tables as tbl
    from hpcjobs.accounting.reports.plots import STATE_COLOURS
    from hpcjobs.accounting.reports.rows import job_rows

    if metrics is not None and "sweep_points" in tables:
        tables = {**tables, "sweep_points": with_metrics(tables["sweep_points"], metrics)}
    by_section: dict[str, dict[str, list[Any]]] = {k: {"charts": [], "tables": [], "notes": []} for k in SECTIONS}
    jobs = job_rows(df)
    if section in ("efficiency", "all"):
        eff = tbl.efficiency(df, gpu=gpu)
        made = [charts.efficiency_plane(eff), *(charts.efficiency_histogram(eff, c) for c in charts.EFFICIENCY_CLIP),
                charts.busy_cores_over_time(jobs)]  # two by two, the wide time series under them
        by_section["efficiency"]["charts"] += [c for c in made if c is not None]
    if section in ("wait", "all"):
        chart = charts.wait_over_time(jobs)
        if chart is not None:
            by_section["wait"]["charts"].append(chart)
    if section in ("failures", "all"):
        made = [charts.state_bars(tbl.failures_by_state(df))]
        if "failures_by_param" in tables:
            made.append(charts.failure_bars(tables["failures_by_param"]))
        if "sweep_points" in tables:
            made.append(sweep_parallel(tables["sweep_points"]))
        by_section["failures"]["charts"] += [c for c in made if c is not None]
    for name, table in tables.items():
        info = table_info(name)
        links = log_folder if name == "sweep_points" else None
        by_section[info.section]["tables"].append(table_spec(name, info.heading, table, log_folder=links))
    sections = [{"key": k, "heading": SECTIONS[k], **parts} for k, parts in by_section.items()
                if parts["charts"] or parts["tables"]]
    return {"sections": sections, "state_colours": STATE_COLOURS}


def _json_for_script(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element or open a comment: ``<``, ``>``, ``&`` as escapes."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_page(title: str, data: Mapping[str, Any], *, summary: Mapping[str, str] | None = None,
                subtitle: str = "", notes: list[str] | None = None) -> str:
    """The whole page as one HTML string (no external reference: the CSP forbids every request)."""
    nav = "".join(f'<a href="#{escape(s["key"])}">{escape(s["heading"])}</a>' for s in data["sections"])
    cards = ""
    if summary:
        cards = '<div class="cards">' + "".join(
            f'<div class="card"><div class="v">{escape(v)}</div><div class="k">{escape(k)}</div></div>'
            for k, v in summary.items()) + "</div>"
    warn = "".join(f'<p class="note">{escape(n)}</p>' for n in notes or ())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p><nav>{nav}</nav></header>"
        f"<main>{cards}{warn}<noscript><p>This report draws its tables and charts with JavaScript; "
        "`hpcjobs report --csv` prints the same tables.</p></noscript></main>"
        f"<footer>generated by hpcjobs on {stamp}</footer>"
        f"<script type=\"application/json\" id=\"hpcjobs-data\">{_json_for_script(data)}</script>"
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def write_page(path: str | os.PathLike[str], df: pd.DataFrame, *, section: str = "all",
               gpu: pd.DataFrame | None = None, title: str = "hpcjobs accounting report", subtitle: str = "",
               tables: Mapping[str, pd.DataFrame] | None = None, log_folder: Path | None = None,
               metrics: pd.DataFrame | None = None, notes: list[str] | None = None,
               what: str = "HTML file") -> Path:
    """Compute the page of ``section`` and write it (atomically, mode 0644).

    Args:
        path: Output file.
        df: A schema DataFrame.
        section: ``efficiency``, ``wait``, ``failures`` or ``all``.
        gpu: Optional per-job GPU summary.
        title: Page title.
        subtitle: Line under the title.
        tables: Tables already computed (default: :func:`~hpcjobs.accounting.reports.tables.report_tables`).
        log_folder: A sweep folder on this machine, whose points' logs the points table links.
        metrics: The sweep's result metrics by ``point_id`` (see :func:`page_data`).
        notes: Warnings shown under the headline numbers.
        what: Where the path was named (``--html``), for the messages.

    Raises:
        ConfigError: ``path`` is a FIFO, a device or a folder, or goes through something that is not a folder.
        FileSystemError: The file system refused the write (no space, permission).
    """
    from hpcjobs.accounting.reports.html import summary_numbers
    from hpcjobs.accounting.reports.tables import report_tables
    from hpcjobs.output import write_user_file

    if tables is None:
        tables = report_tables(df, section, gpu=gpu)
    data = page_data(df, tables, section=section, gpu=gpu, log_folder=log_folder, metrics=metrics)
    text = render_page(title, data, summary=summary_numbers(df), subtitle=subtitle, notes=notes)
    return write_user_file(path, text, what=what, mode=0o644)


__all__ = ["page_data", "render_page", "with_metrics", "write_page"]
