"""``hpcjobs results | logs``: what a sweep's runs produced, and what they printed."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import click

from hpcjobs.cli import console, count_range, echo, handle_errors, new_table

STATE_STYLE = {"COMPLETED": "green", "FAILED": "red", "TIMEOUT": "red", "OUT_OF_MEMORY": "red",
               "CANCELLED": "yellow", "RUNNING": "cyan", "PENDING": "blue", "NODE_FAIL": "red"}


def _cell(value: Any) -> str:
    """A value for the terminal table: ``-`` for null, 6 significant digits for floats."""
    if value is None or (not isinstance(value, str) and _is_na(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _is_na(value: Any) -> bool:
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return isinstance(value, float) and math.isnan(value)


@click.command("results")
@click.argument("sweep_name", metavar="SWEEP")
@click.option("--sort", "sort", multiple=True, metavar="[-]COLUMN",
              help="Sort by a column (a metric, a parameter, state); -COLUMN: largest first. Repeatable.")
@click.option("--top", type=count_range(1), help="Show the first N rows (after sorting).")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--no-poll", is_flag=True, help="Do not ask the scheduler for the current states (the ledger's).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout (with result_error and log paths).")
@click.option("--json", "as_json", is_flag=True, help="JSON records on stdout (with result_error and log paths).")
@handle_errors
def results(sweep_name: str, sort: tuple[str, ...], top: int | None, root: str | None, no_poll: bool,
            as_csv: bool, as_json: bool) -> None:
    """Each point of SWEEP with its parameters, state and the metrics its run wrote (`results:` of the experiment)."""
    from hpcjobs.analysis import sweep_results

    frame, metrics = sweep_results(sweep_name, root=root, sort=sort, top=top, poll=not no_poll)
    if as_csv:
        click.echo(frame.to_csv(index=False), nl=False)
        return
    if as_json:
        click.echo(frame.to_json(orient="records", double_precision=15))
        return
    from rich.markup import escape

    shown = [c for c in frame.columns if c not in ("log_out", "log_err", "result_error")]
    errors = "result_error" in frame.columns and bool(frame["result_error"].notna().any())
    table = new_table(*shown, *(["result_error"] if errors else []), box=None,
                      caption=None if metrics else "no metrics: declare `results:` in the experiment")
    for values in frame.to_dict(orient="records"):
        cells = []
        for col in shown:
            text = escape(_cell(values[col]))
            if col == "state" and text != "-":
                text = f"[{STATE_STYLE.get(text, 'white')}]{text}[/]"
            cells.append(text)
        if errors:
            cells.append(escape(_cell(values["result_error"])))
        table.add_row(*cells)
    out = console(stderr=False)
    if not out.is_terminal:  # piped or captured: whole cells, as wide as the table needs
        out.width = 100_000
    out.print(table)


@click.command("logs")
@click.argument("sweep_name", metavar="SWEEP|JOB_ID")
@click.argument("point", required=False, metavar="[POINT_ID]")
@click.option("--index", "index", type=count_range(0), help="The point with this index.")
@click.option("--failed", is_flag=True, help="Points in a failure state (asks the scheduler once).")
@click.option("--state", "states_", multiple=True, help="Points in these states (e.g. TIMEOUT). Repeatable.")
@click.option("--tail", "tail", type=count_range(0), default=20, show_default=True,
              help="Lines from the end of each file.")
@click.option("--all-lines", is_flag=True, help="Whole files (up to their last 4 MiB) instead of --tail.")
@click.option("--out", "which", flag_value="out", help="Only stdout.")
@click.option("--err", "which", flag_value="err", help="Only stderr.")
@click.option("-f", "--follow", "follow_", is_flag=True, help="Keep printing what is appended (Ctrl-C stops).")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds between looks (-f).")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@handle_errors
def logs(sweep_name: str, point: str | None, index: int | None, failed: bool, states_: tuple[str, ...], tail: int,
         all_lines: bool, which: str | None, follow_: bool, interval: float, root: str | None) -> None:
    """Show the stdout and stderr of SWEEP's points (one point, by index, or by state), or of the job JOB_ID
    submitted with `hpcjobs submit` (`1234`, `1234.server`)."""
    from hpcjobs import states
    from hpcjobs.errors import printable
    from hpcjobs.sweep.log_files import sweep_logs
    from hpcjobs.sweep.logs import follow, tail_text

    wanted = tuple(s.upper() for s in states_)
    bad = [s for s in wanted if s not in states.ALL_STATES]
    if bad:
        raise click.BadParameter(f"unknown state(s) {', '.join(bad)}; choose from {', '.join(states.ALL_STATES)}",
                                 param_hint="--state")
    selected = sweep_logs(sweep_name, root=root, point=point, index=index, only_states=wanted, failed=failed)
    if not selected:
        echo("no points match", err=True)
        return
    files = []
    inside: dict[Path, Path] = {}
    for p in selected:
        exit_text = "" if p.exit_code is None or p.state not in states.TERMINAL_STATES else f", exit {p.exit_code}"
        for label, path in p.files(which or "both"):
            files.append(path)
            inside[path] = p.inside(path)
            what = f"job {p.job_id or '(not submitted)'} ({p.state}" if p.single else \
                f"point {p.point_id} (index {p.index}, {p.state}"
            echo(f"==> {label} of {what}{exit_text}): {path} <==")
            text = tail_text(path, None if all_lines else tail, inside=p.inside(path))
            if text:
                click.echo(printable(text), nl=not text.endswith("\n"))  # the file's tabs kept
            elif not path.exists():
                echo("(no such file yet)")
    if not follow_:
        return
    current = None
    try:
        for path, text in follow(files, interval=interval, inside=inside):
            if path != current:
                echo(f"==> {path} <==")
                current = path
            click.echo(printable(text), nl=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        return
