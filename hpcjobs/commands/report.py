"""``hpcjobs report``: efficiency, queue wait and failure reports from sacct or saved scheduler output."""

from __future__ import annotations

import sys
from typing import Any

import click

from hpcjobs.accounting.reports.catalog import SECTION_CHOICES
from hpcjobs.cli import SchedulerChoice, console, count_range, echo, echo_json, handle_errors, new_table


def _machine_frame(df: Any) -> Any:
    """Durations as float seconds, timestamps as ISO 8601 text, for CSV and JSON."""
    import pandas as pd

    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_timedelta64_dtype(out[c]):
            out[c] = out[c].dt.total_seconds().astype("Float64")
        elif pd.api.types.is_datetime64_any_dtype(out[c]):
            out[c] = out[c].map(lambda t: t.isoformat() if pd.notna(t) else None).astype("string")
        elif isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype("string")
    return out


def _records(df: Any) -> list[dict[str, Any]]:
    import pandas as pd

    m = _machine_frame(df).astype(object)
    m = m.where(m.notna(), None)
    recs: list[dict[str, Any]] = m.to_dict(orient="records")
    for r in recs:
        for k, v in r.items():
            if v is pd.NA:
                r[k] = None
            elif hasattr(v, "item"):
                r[k] = v.item()
    return recs


def _print_tables(tables: dict[str, Any], max_rows: int) -> None:
    from hpcjobs.accounting.reports.html import SHORT_NAMES, format_cell

    out = console(stderr=False)
    if not out.is_terminal:  # piped or redirected: full width, never cut to 80 columns
        out.width = max(out.width, 100_000)
    for name, df in tables.items():
        table = new_table(title=name.replace("_", " "), title_justify="left", box=None, header_style="bold")
        for c in df.columns:
            text = df[c].dtype.kind in "OUS" or str(df[c].dtype) in ("string", "category", "str")
            table.add_column(SHORT_NAMES.get(str(c), str(c)), no_wrap=True, justify="left" if text else "right")
        for row in df.head(max_rows).itertuples(index=False, name=None):
            table.add_row(*(format_cell(v, str(c)) for v, c in zip(row, df.columns, strict=True)))
        if df.empty:
            out.print(f"[bold]{name.replace('_', ' ')}[/]: no rows\n")
            continue
        out.print(table)
        if len(df) > max_rows:
            out.print(f"  … {len(df) - max_rows} more rows (use --csv or --json for all)")
        out.print()


@click.command("report")
@click.option("--since", metavar="WHEN", help="Jobs active since: a date/time (2026-11-30, 2026-11-30T08:00, UTC "
              "if no zone) or an age (7d, 12h, 2w). Default for a live query: 7d.")
@click.option("--until", metavar="WHEN", help="Jobs submitted before this time (same forms as --since).")
@click.option("--user", "users", multiple=True, metavar="NAME", help="Only these users (repeatable).")
@click.option("--all-users", is_flag=True, help="Live sacct query: every user (needs operator rights).")
@click.option("--account", "accounts", multiple=True, metavar="NAME", help="Only these accounts (repeatable).")
@click.option("--partition", "partitions", multiple=True, metavar="NAME",
              help="Only these partitions/queues (repeatable).")
@click.option("--sweep", metavar="SWEEP", help="Only the jobs of this hpcjobs sweep (id, name, unique prefix or "
              "folder, as status takes it), each point counted by its final attempt, with the parameter columns, a "
              "per-point table and failures by parameter value.")
@click.option("--all-attempts", is_flag=True, help="With --sweep: count the attempts a resubmission replaced too "
              "(marked by the attempt and replaced columns of --jobs).")
@click.option("--scheduler", type=SchedulerChoice(),
              help="Scheduler (default slurm for a live query, or the sweep's; kubernetes and swarm are asked live "
              "too; with --from-file it settles PBS vs Torque).")
@click.option("--from-file", type=click.Path(exists=True), metavar="PATH",
              help="Read saved sacct --parsable2/--json, qstat -f (-F json), Torque qstat -x XML, a PBS/Torque "
                   "accounting log (file or directory), kubectl get jobs,pods -o json or docker inspect of Swarm "
                   "services and tasks instead of querying; the format is detected.")
@click.option("--tz", metavar="ZONE", help="Time zone the saved file's times were written in (e.g. Europe/Berlin).")
@click.option("--sacct-fields", metavar="F1,F2,...", help="--format fields of headerless saved sacct text.")
@click.option("--delimiter", metavar="X", help="sacct --delimiter of the saved sacct text (default: detected); "
              "--parsable (a delimiter ending each line) and --parsable2 are both read.")
@click.option("--gpu-logs", type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Directory with the in-job GPU sampler files (*.gpu.csv) to add GPU utilisation.")
@click.option("--section", type=click.Choice(SECTION_CHOICES), default="all", show_default=True,
              help="Which report.")
@click.option("--table", "table_name", metavar="NAME", help="Only this table of the section (e.g. wait_by_partition).")
@click.option("--top", type=count_range(1), default=20, show_default=True, help="Rows of worst-offender tables.")
@click.option("--jobs", "per_job", is_flag=True, help="One row per job (state, exit, elapsed, efficiencies) instead "
              "of the summary tables, like reportseff.")
@click.option("--columns", metavar="C1,C2,...", help="With --jobs: the columns to show (e.g. job_id,state,exit,"
              "elapsed,cpu_efficiency,mem_efficiency,max_rss_bytes,wait).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout (durations in seconds; several tables are "
              "separated by '# <name>' lines).")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout: {table: [rows]} (durations in seconds).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write the figures to DIR as PNG or SVG files (needs matplotlib: pip install 'hpcjobs[plot]').")
@click.option("--plot-format", type=click.Choice(["png", "svg"]), default="png", show_default=True)
@click.option("--html", "html_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write one self-contained HTML page to explore: sortable, filterable tables and charts that "
              "zoom and show details on hover (works offline, no plotting package needed).")
@click.option("--site", "site", metavar="NAME", help="Ask this site's scheduler (over SSH when the site has remote:).")
@click.option("--remote", metavar="[USER@]HOST[:PORT]", envvar="HPCJOBS_REMOTE",
              help="Query the scheduler of this login node over SSH (a sweep submitted over SSH uses its own).")
@handle_errors
def report(since: str | None, until: str | None, users: tuple[str, ...], all_users: bool, accounts: tuple[str, ...],
           partitions: tuple[str, ...], sweep: str | None, all_attempts: bool, scheduler: str | None,
           from_file: str | None, tz: str | None, sacct_fields: str | None, delimiter: str | None,
           gpu_logs: str | None, section: str, table_name: str | None,
           top: int, per_job: bool, columns: str | None, as_csv: bool, as_json: bool, plot_dir: str | None,
           plot_format: str, html_file: str | None, site: str | None, remote: str | None) -> None:
    """Efficiency and waste, queue wait and failures of finished jobs.

    Queries sacct (Slurm) for the period, or reads a saved scheduler output with --from-file.
    Tables go to the terminal; --csv/--json print them for programs; --html writes an interactive
    self-contained page, --plot figure files.
    """
    from hpcjobs.accounting.build import ReportRequest, build_report
    from hpcjobs.accounting.report_source import ReportFilters, parse_when
    from hpcjobs.errors import ConfigError

    if as_csv and as_json:
        raise ConfigError("choose one of --csv and --json")
    filters = ReportFilters(
        since=parse_when(since) if since else None, until=parse_when(until, option="--until") if until else None,
        users=users, accounts=accounts, partitions=partitions, sweep=sweep)
    built = build_report(ReportRequest(
        filters=filters, all_attempts=all_attempts, scheduler=scheduler, from_file=from_file, tz=tz,
        all_users=all_users, sacct_fields=sacct_fields.split(",") if sacct_fields else None, delimiter=delimiter,
        gpu_logs=gpu_logs, section=section, table=table_name, top=top, per_job=per_job,
        columns=columns.split(",") if columns else None, plot_dir=plot_dir, plot_format=plot_format,
        html_file=html_file, remote=remote, site=site))
    for warning in built.warnings:
        echo(f"warning: {warning}", err=True)
    for path in built.written:
        echo(f"wrote {path}", err=True)
    tables = built.tables
    if as_json:
        echo_json({name: _records(t) for name, t in tables.items()}, indent=2, default=str)
    elif as_csv:
        for i, (name, t) in enumerate(tables.items()):
            if len(tables) > 1:
                sys.stdout.write(("\n" if i else "") + f"# {name}\n")
            sys.stdout.write(_machine_frame(t).to_csv(index=False))
        sys.stdout.flush()
    elif not (plot_dir or html_file) or sys.stdout.isatty():
        _print_tables(tables, max_rows=len(tables["jobs"]) if per_job else top)
