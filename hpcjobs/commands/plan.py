"""``hpcjobs plan``: where and when the experiment's job would start, partition by partition."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpcjobs.cli import console, echo_json, handle_errors, new_table

if TYPE_CHECKING:
    from hpcjobs.plan.api import Plan
    from hpcjobs.plan.rank import PlanRow


@click.command()
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.option("--site", "site", metavar="NAME", help="Site config (name or path); default: the file's, else detected.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the experiment.")
@click.option("--days", type=click.IntRange(min=0, max=366), default=14, show_default=True,
              help="Days of accounting history for the queue wait of similar jobs (0: none).")
@click.option("--remote", metavar="[USER@]HOST[:PORT]", envvar="HPCJOBS_REMOTE",
              help="Ask the scheduler of this login node over SSH (default: the site's remote:, else this machine's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def plan(experiment: str, site: str | None, overrides: tuple[str, ...], days: int, remote: str | None,
         as_json: bool) -> None:
    """Where EXPERIMENT's job would start soonest: every partition (and QOS) of the site, with whether it
    fits, Slurm's estimate (sbatch --test-only), the queue wait of similar jobs and the cost.

    Recommends the partition with the earliest expected start; ties and missing estimates go to the
    lowest historical median wait, then the lowest cost. `sweep` and `submit` take --partition auto
    to choose by the same rule.
    """
    from hpcjobs.plan.api import plan_experiment

    result = plan_experiment(experiment, site=site, overrides=overrides, days=days, remote=remote)
    if as_json:
        echo_json(result.to_json(), indent=2)
        return
    _print(result)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _wait(row: PlanRow) -> str:
    if row.wait_p50_s is None or row.wait_p90_s is None:
        return "-"
    from hpcjobs.units import format_duration_short

    return f"{format_duration_short(row.wait_p50_s)} / {format_duration_short(row.wait_p90_s)} ({row.wait_jobs})"


def _print(result: Plan) -> None:
    from rich.markup import escape

    out = console(stderr=False)
    req = result.request
    walltime = req["walltime_s"]
    what = (f"{req['nodes']} node(s) x {req['cpus_per_node']} CPUs, {req['gpus_per_node']} GPUs/node, "
            f"wall time {walltime // 60 if walltime else '(partition default)'}{' min' if walltime else ''}")
    out.print(f"[bold]{escape(result.experiment)}[/] on {escape(result.site)} ({result.scheduler}): {what}; "
              f"asked at {result.planned_at:%Y-%m-%d %H:%M:%S} UTC")
    queues = result.queue_states  # the queue's state (PBS Pro) in place of a start estimate
    table = new_table(box=None)
    for name in ("partition", "fits", "queue (Q/R)" if queues else "expected start", "wait p50 / p90 (jobs)",
                 "core-h", "GPU-h", "billing-h", "why not"):
        table.add_column(name)
    for row in result.rows:
        if queues:
            start = f"{row.queue_state or '?'} ({row.queued if row.queued is not None else '?'}/" \
                    f"{row.running if row.running is not None else '?'})"
        elif row.start is not None:
            start = f"{row.start:%Y-%m-%d %H:%M:%S}" + (f" on {row.start_nodes}" if row.start_nodes else "")
        else:
            start = "-"
        mark = "*" if result.recommended is row else ""
        table.add_row(escape(row.label) + mark, "[green]yes[/]" if row.fits else "[red]no[/]", escape(start),
                      _wait(row), _hours(row.core_hours), _hours(row.gpu_hours),
                      _hours(row.billing_hours) + ("" if row.billing_known or row.billing_hours is None else "*"),
                      escape("; ".join(row.why_not) if not row.fits else (row.estimate_error or "")))
    out.print(table)
    if result.history_error:
        out.print(f"history: not read ({escape(result.history_error)})")
    elif result.history_days:
        out.print(f"history: {result.history_jobs} {escape(result.history_source)}; similar = same partition, GPUs "
                  "and nodes, wall time within x0.5-x2")
    if any(r.billing_hours is not None and not r.billing_known for r in result.rows):
        out.print(f"billing-h*: {result.billing_without_weights}")
    for note in result.notes:
        out.print(escape(note))
    if result.recommended is not None:
        out.print(f"[bold]recommended: {escape(result.recommended.label)}[/] — {escape(result.reason)}")
    else:
        out.print(f"[bold red]no partition fits:[/] {escape(result.reason)}")
