"""``hpcjobs advise``: what to ask for next time, from what finished runs used."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from hpcjobs.cli import SchedulerChoice, console, count_range, echo, echo_json, handle_errors, new_table


def _fraction(text: str, option: str, low: float, high: float) -> float:
    """``0.95``, ``95%`` or ``p95`` as a fraction in (low, high]."""
    raw = text.strip().lower()
    try:
        if raw.startswith("p"):
            value = float(raw[1:]) / 100
        elif raw.endswith("%"):
            value = float(raw[:-1]) / 100
        else:
            value = float(raw)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (0.95, 95% or p95)", param_hint=option) from None
    if not low < value <= high:
        raise click.BadParameter(f"{text!r} is not between {low:g} and {high:g}", param_hint=option)
    return value


def advice_options(func: Any) -> Any:
    """The options that set how advice is computed (``advise``, ``resubmit --right-size``)."""
    for option in reversed((
        click.option("--quantile", default="0.95", show_default=True, metavar="Q",
                     help="Quantile of use the proposal covers (0.95, 95% or p95)."),
        click.option("--margin", default="0.2", show_default=True, metavar="M",
                     help="Added on top of the quantile (0.2 or 20%)."),
        click.option("--min-runs", type=count_range(1), default=5, show_default=True,
                     help="Completed runs needed before anything is proposed."),
    )):
        func = option(func)
    return func


def settings_from(quantile: str, margin: str, min_runs: int) -> Any:
    """:class:`~hpcjobs.accounting.reports.advise.AdviceSettings` from the command-line options."""
    from hpcjobs.accounting.reports.advise import AdviceSettings

    return AdviceSettings(quantile=_fraction(quantile, "--quantile", 0, 1),
                          margin=_fraction(margin, "--margin", -1e-12, 10), min_runs=min_runs)


def print_advice(advice: Any, label: str) -> None:
    """The advice as rich tables: the proposals, the raises, the savings."""
    from rich.markup import escape

    from hpcjobs.accounting.reports.advise import format_memory, format_walltime

    out = console(stderr=False)
    s = advice.settings
    out.print(f"[bold]{escape(label)}[/]: {advice.runs} finished runs, {advice.completed} completed "
              f"(p{s.quantile * 100:g} + {s.margin * 100:g} %)", highlight=False)
    if not advice.enough:
        out.print(f"[bold red]NO ADVICE[/]: {escape(advice.message)}", highlight=False)

    def shown(resource: str, value: Any) -> str:
        if value is None:
            return "-"
        if resource == "memory":
            return format_memory(int(value), advice.scheduler)
        if resource == "walltime":
            return format_walltime(int(value))
        return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))

    table = new_table("resource", "asked", "used max", f"p{s.quantile * 100:g}", "proposed", "runs", box=None,
                      title="proposals (memory per node)", title_justify="left")
    for r in advice.resources:
        table.add_row(r.resource, shown(r.resource, r.asked), shown(r.resource, r.used_max),
                      shown(r.resource, r.used_quantile),
                      (r.proposed_text or "-") + (f" ({escape(r.limited_by)})" if r.limited_by else ""),
                      f"{r.measured}/{r.runs}")
    out.print(table)
    if advice.raises:
        raises = new_table("state", "resource", "runs", "asked", "ask", "note", box=None, title="runs that hit a limit",
                           title_justify="left")
        for lr in advice.raises:
            raises.add_row(lr.state, lr.resource, str(len(lr.jobs)), shown(lr.resource, lr.asked),
                           "[red]blocked[/]" if lr.blocked else (lr.proposed_text or "-"), escape(lr.note))
        out.print(raises)
    sv = advice.savings
    mem_asked, mem_used = sv.get("memory_asked_bytes"), sv.get("memory_used_bytes")
    if mem_asked and mem_used is not None:
        out.print(f"memory per node: asked {shown('memory', mem_asked)}, used at most {shown('memory', mem_used)} "
                  f"({mem_used / mem_asked:.0%} of it)", highlight=False)
    for kind in ("core", "gpu"):
        asked, proposed = sv.get(f"{kind}_hours_asked"), sv.get(f"{kind}_hours_proposed")
        if asked and proposed is not None:
            change = (f"{(asked - proposed) / asked:.0%} less" if proposed <= asked
                      else f"{(proposed - asked) / asked:.0%} more")
            out.print(f"{'GPU' if kind == 'gpu' else 'core'}-hours reserved (request × limit) over these runs: "
                      f"{asked:.2f} asked, {proposed:.2f} proposed ({change})", highlight=False)


@click.command("advise")
@click.argument("sweep", required=False, metavar="[SWEEP]")
@click.option("--name", metavar="NAME", help="Every past sweep of this experiment name in the sweep folder.")
@click.option("--from-file", type=click.Path(exists=True), metavar="PATH",
              help="Saved sacct/PBS/Torque output (as report --from-file reads it) instead of a live sacct query.")
@advice_options
@click.option("--site", metavar="NAME", help="Site config whose partition limits apply (default: the sweep's).")
@click.option("--scheduler", type=SchedulerChoice(lambda caps: caps.usage_accounting),
              help="With --from-file: settles PBS vs Torque.")
@click.option("--tz", metavar="ZONE", help="Time zone the saved file's times were written in.")
@click.option("--sacct-fields", metavar="F1,F2,...", help="--format fields of headerless saved sacct text.")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--days", type=click.IntRange(min=1, max=366), default=14, show_default=True,
              help="Days of accounting history (as plan reads it) for the queue wait of the asked vs proposed request "
                   "(with --from-file: only when given).")
@click.option("--no-history", is_flag=True, help="Do not compare queue waits (no history query).")
@click.option("--json", "as_json", is_flag=True, help="The advice as JSON.")
@handle_errors
def advise(sweep: str | None, name: str | None, from_file: str | None, quantile: str, margin: str, min_runs: int,
           site: str | None, scheduler: str | None, tz: str | None, sacct_fields: str | None, root: str | None,
           days: int, no_history: bool, as_json: bool) -> None:
    """Propose memory, wall time and CPUs (and GPUs) from what finished runs used.

    The runs are a SWEEP's, every sweep of an experiment --name, or a saved --from-file. The
    proposal is the --quantile of use over the completed runs plus --margin, rounded and within
    the partition's limits; runs that hit their time or memory limit get the raise they need.
    Fewer than --min-runs completed runs give no proposal. The expected queue wait of the asked
    and of the proposed request on the runs' partition comes from the last --days of accounting
    history, as `hpcjobs plan` reads it (--no-history: not compared; with --from-file only when
    --days is given).
    """
    from hpcjobs.plan.advise_run import AdviceRequest, build_advice

    days_given = click.get_current_context().get_parameter_source("days") is not ParameterSource.DEFAULT
    built = build_advice(AdviceRequest(
        sweep=sweep, name=name, from_file=from_file, settings=settings_from(quantile, margin, min_runs), site=site,
        scheduler=scheduler, tz=tz, sacct_fields=sacct_fields.split(",") if sacct_fields else None, root=root,
        days=days, wait="never" if no_history else "always" if days_given else "auto"))
    if as_json:
        echo_json(built.as_dict(), indent=2, default=str)
    else:
        print_advice(built.advice, built.label)
        if built.wait is not None:
            print_wait(built.wait)


def print_wait(wait: Any) -> None:
    """The expected queue wait of the asked and the proposed request, and the difference."""
    from rich.markup import escape

    from hpcjobs.accounting.reports.advise import format_walltime
    from hpcjobs.plan.advice_wait import duration_text as d

    out = console(stderr=False)
    if wait.asked is None:
        out.print(escape(wait.note), highlight=False)
        return
    out.print(f"queue wait on {escape(wait.partition or '?')}, jobs started in the last {wait.days} days "
              f"({wait.history_jobs} jobs)", highlight=False)
    table = new_table("", "walltime", "GPUs", "similar", "p50", "p90", "class", "in class", "p50", "p90", box=None,
                      padding=(0, 1, 0, 0))
    for name, r in (("asked", wait.asked), ("proposed", wait.proposed)):
        if r is None:
            continue
        table.add_row(name, format_walltime(r.walltime_s) if r.walltime_s else "-", str(r.gpus),
                      str(r.similar.jobs), d(r.similar.p50_s), d(r.similar.p90_s), r.walltime_class or "-",
                      str(r.in_class.jobs), d(r.in_class.p50_s), d(r.in_class.p90_s))
    if wait.proposed is not None:
        diffs = [wait.difference(w, s) for w in ("similar", "in_class") for s in ("p50_s", "p90_s")]
        if any(x is not None for x in diffs):
            table.add_row("change", "", "", "", d(diffs[0]), d(diffs[1]), "", "", d(diffs[2]), d(diffs[3]))
    out.print(table)
    out.print(f"similar: same GPUs and nodes, wall time x0.5-x2; class: same GPUs and nodes, wall time in the same "
              f"class; a figure needs {wait.min_jobs} jobs", highlight=False)
    out.print(escape(wait.note), highlight=False)


def resubmit_right_sized(folder: Any, settings: Any, which: tuple[str, ...], throttle: int | None, force: bool,
                         accounting_file: str | None) -> None:
    """``resubmit --right-size``: one library call, then what changed per point and what was submitted."""
    from hpcjobs.accounting.reports.advise import format_memory, format_walltime
    from hpcjobs.plan.rightsize import right_size_resubmit

    prepared, advice, changes, report, reset = right_size_resubmit(
        folder, settings=settings, which=which, throttle=throttle, force=force, from_file=accounting_file)
    if not advice.enough:
        echo(f"no advice from history ({advice.message}): only the raises for runs that hit a limit apply")

    def shown(key: str, value: int | None) -> str:
        if value is None:
            return "default"
        if key == "memory":
            return format_memory(value, prepared.site.scheduler)
        return format_walltime(value) if key == "walltime" else str(value)

    for ch in changes:
        if ch.blocked:
            echo(f"point {ch.point_id} ({ch.state}): {ch.blocked}")
        if ch.changes:
            what = "; ".join(f"{k} {shown(k, before)} -> {shown(k, after)} ({ch.why.get(k, '')})"
                             for k, (before, after) in ch.changes.items())
            echo(f"point {ch.point_id} ({ch.state}): {what}")
        elif not ch.blocked:
            echo(f"point {ch.point_id} ({ch.state}): unchanged")
    assert report is not None
    echo(f"sweep {prepared.sweep_id}: {reset} point(s) reset; submitted {report.points_submitted} in "
         f"{report.chunks_submitted} job(s) {' '.join(report.job_ids)}".rstrip())
