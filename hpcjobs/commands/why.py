"""``hpcjobs why``: why a sweep's jobs (or a job) wait, in plain words, and what would change it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from hpcjobs.cli import console, echo, echo_json, handle_errors, new_table

if TYPE_CHECKING:
    from hpcjobs.plan.why import WhyReport
    from hpcjobs.schedulers.pending import PendingJob


@click.command("why")
@click.argument("target", metavar="SWEEP|JOB_ID")
@click.option("--root", type=click.Path(file_okay=False), help="Sweeps root folder (default: ./hpcjobs-sweeps).")
@click.option("--site", metavar="NAME", help="For a job id: the site whose scheduler is asked (default: this "
              "machine's).")
@click.option("--fresh", is_flag=True, help="Ask the scheduler even if it answered in the last few seconds.")
@click.option("--plan", "with_plan", is_flag=True, help="For a sweep: also where its experiment would start soonest "
              "now (hpcjobs plan: one start estimate per partition).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def why(target: str, root: str | None, site: str | None, fresh: bool, with_plan: bool, as_json: bool) -> None:
    """Why SWEEP's waiting jobs (or JOB_ID) have not started: the scheduler's reason in plain words, what
    would change it, the priority and its factors, fair share, the limit in the way and the expected start.

    A sweep's waiting array tasks are grouped by reason. The scheduler is asked a fixed number of times
    however many jobs there are (`-v` says which commands ran), and an answer is reused for a few seconds.
    """
    from hpcjobs.plan.why import explain_waiting

    report = explain_waiting(target, root=root, site=site, fresh=fresh, plan=with_plan)
    if as_json:
        echo_json(_as_json(report), indent=2)
        return
    _print(report)


def _job_json(job: PendingJob) -> dict[str, Any]:
    return {"job_id": job.job_id, "tasks": job.tasks, "reason": job.reason.code, "detail": job.detail,
            "summary": job.reason.summary, "action": job.reason.action, "kind": job.reason.kind,
            "user": job.user, "account": job.account, "partition": job.partition, "qos": job.qos,
            "priority": job.priority, "factors": job.factors, "fair_share": job.fair_share,
            "expected_start": job.expected_start.isoformat() if job.expected_start else None,
            "submitted": job.submitted.isoformat() if job.submitted else None, "time_limit_s": job.time_limit_s,
            "nodes": job.nodes, "cpus": job.cpus, "dependency": job.dependency or None, "limits": job.limits}


def _as_json(report: WhyReport) -> dict[str, Any]:
    q = report.query
    return {"target": report.target, "sweep_id": report.sweep_id, "scheduler": report.scheduler,
            "job_ids": report.job_ids, "pending": [_job_json(j) for j in q.pending],
            "groups": [{"reason": r.code, "kind": r.kind, "summary": r.summary, "action": r.action,
                        "tasks": sum(j.tasks for j in jobs), "job_ids": [j.job_id for j in jobs]}
                       for r, jobs in q.by_reason()],
            "not_waiting": q.others, "calls": q.calls, "cached_calls": report.cached, "notes": q.notes + report.notes,
            "plan": report.plan.to_json() if report.plan is not None else None}


def _print(report: WhyReport) -> None:
    from rich.markup import escape

    q = report.query
    out = console(stderr=False)
    waiting = sum(j.tasks for j in q.pending)
    echo(f"{report.target} ({report.scheduler}): {waiting} task(s) waiting"
         + (f", {len(q.others)} job(s) not waiting" if q.others else ""))
    for reason, jobs in q.by_reason():
        tasks = sum(j.tasks for j in jobs)
        out.print(f"\n[bold]{escape(reason.code)}[/bold] ({tasks} task(s)): {escape(reason.summary)}")
        out.print(f"  what would change it: {escape(reason.action)}")
        for line in dict.fromkeys(x for j in jobs for x in j.limits):
            out.print(f"  limit: {escape(line)}")
        details = sorted({j.detail for j in jobs if j.detail})
        if details:
            out.print(f"  the scheduler adds: {escape('; '.join(details))[:300]}")
        table = new_table("job", "tasks", "partition", "qos", "priority", "fair share", "expected start",
                          "depends on", box=None)
        for j in jobs:
            table.add_row(escape(j.job_id), str(j.tasks), escape(j.partition), escape(j.qos),
                          "-" if j.priority is None else str(j.priority) + _factors(j),
                          "-" if j.fair_share is None else f"{j.fair_share:.3g}",
                          j.expected_start.strftime("%Y-%m-%d %H:%M UTC") if j.expected_start else "-",
                          escape(j.dependency) or "-")
        out.print(table)
    for job_id, state in q.others.items():
        echo(f"{job_id}: {state.lower() if state != 'GONE' else 'no longer in the queue (see hpcjobs status)'}")
    if report.plan is not None:
        echo(f"\nplan now: {report.plan.reason}")
    for note in q.notes + report.notes:
        echo(f"note: {note}", err=True)


def _factors(job: PendingJob) -> str:
    shown = [f"{k} {v:g}" for k, v in job.factors.items() if v]
    return f" ({', '.join(shown)})" if shown else ""
