"""``hpcjobs sweep | status | cancel | resubmit | ls``: options in, one library call, output out.

``status``, ``cancel`` and ``resubmit`` also take the job id of a single job of ``hpcjobs submit``
(:mod:`hpcjobs.sweep.singles`), and ``ls --jobs`` lists those jobs.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from hpcjobs.cli import console, count_range, echo, echo_json, handle_errors, new_table
from hpcjobs.commands.advise import advice_options
from hpcjobs.states import TERMINAL_STATES

STATE_STYLE = {"COMPLETED": "green", "FAILED": "red", "TIMEOUT": "red", "OUT_OF_MEMORY": "red",
               "CANCELLED": "yellow", "RUNNING": "cyan", "PENDING": "blue", "NODE_FAIL": "red"}


def _progress_bar(label: str) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console(), transient=False)


@click.command()
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.argument("sweep_args", nargs=-1, metavar="[PARAM=V1,V2 ...]")
@click.option("--site", metavar="NAME", help="Site config (name or path); default: the file's, else detected.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the experiment.")
@click.option("--partition", metavar="NAME|auto",
              help="Partition (as --set partition=NAME); auto: where it would start soonest (hpcjobs plan's rule).")
@click.option("--throttle", type=count_range(1), help="At most N tasks of each array run at once.")
@click.option("--after", "after", multiple=True, metavar="[WHEN:]SWEEP",
              help="Wait for this sweep (id, name, experiment file, or job id) to end: WHEN ok (default: every point "
              "succeeded), any or done (any ending). Repeatable; recorded, so resuming keeps it.")
@click.option("--root", type=click.Path(file_okay=False),
              help="Folder of sweep folders (default: the nearest hpcjobs-sweeps/ here or above, else "
              "$HPCJOBS_SWEEP_ROOT, else ./hpcjobs-sweeps).")
@click.option("--dry-run", is_flag=True, help="Render everything and print the scheduler commands; submit nothing.")
@click.option("--show-script", is_flag=True, help="With --dry-run: also print the first chunk's array script.")
@click.option("--detach", is_flag=True, help="Return right after submitting (local site: run in the background).")
@click.option("--workers", type=count_range(1), help="Local site: points run at once (default: CPUs).")
@click.option("--force", is_flag=True, help="Go on although the experiment changed since the sweep was planned "
              "(a sweep of the same name with other content: continue the newest one).")
@click.option("--new", "new", is_flag=True, help="Start another sweep, even if one of this name or content exists.")
@click.option("--refresh-site", is_flag=True,
              help="Discover this machine's cluster again (when no site file describes it) instead of the cached site.")
@click.option("--remote", metavar="[USER@]HOST[:PORT]", envvar="HPCJOBS_REMOTE",
              help="Submit through this login node over SSH (your ssh, its config and keys; the ledger stays "
              "here). Default: the site's remote:, else $HPCJOBS_REMOTE.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def sweep(experiment: str, sweep_args: tuple[str, ...], site: str | None, overrides: tuple[str, ...],
          throttle: int | None, root: str | None, dry_run: bool, show_script: bool, detach: bool, workers: int | None,
          force: bool, new: bool, refresh_site: bool, as_json: bool, partition: str | None = None,
          after: tuple[str, ...] = (), remote: str | None = None) -> None:
    """Submit (or resume) the parameter sweep of EXPERIMENT.

    Hydra-style PARAM=V1,V2 arguments add a grid to the file's sweep. Running the same command
    again continues the same sweep: nothing is submitted twice and nothing is lost. A sweep of the
    same name with other content is refused (exit 2) unless --new or --force says what to do.
    """
    from hpcjobs.sweep.api import run_sweep

    if new and force:
        raise click.UsageError("--new and --force exclude each other: start another sweep, or continue one")
    if partition is not None:
        from hpcjobs.plan.api import with_partition

        overrides, chosen = with_partition(experiment, partition, site=site, overrides=overrides)
        if chosen:
            echo(chosen, err=True)
    bar = None if (as_json or dry_run) else _progress_bar("points")
    task = None

    def progress(done: int, total: int) -> None:
        nonlocal task
        if bar is None:
            return
        if task is None:
            task = bar.add_task("points", total=total)
        bar.update(task, completed=done)

    if bar is not None:
        bar.start()
    try:
        prepared, report = run_sweep(experiment, site=site, overrides=overrides, sweep_args=sweep_args, root=root,
                                     throttle=throttle, dry_run=dry_run, force=force, new=new, detach=detach,
                                     workers=workers, progress=progress, refresh_site=refresh_site, after=after,
                                     remote=remote)
    finally:
        if bar is not None:
            bar.stop()
    if dry_run:
        import shlex

        if as_json:
            echo_json({"sweep_id": prepared.sweep_id, "points": len(prepared.points),
                       "commands": report.dry_run_commands, "script": report.dry_run_script,
                       "point_list": _dry_points(prepared)})
        else:
            if show_script and report.dry_run_script:
                click.echo(report.dry_run_script)
            echo(f"# sweep {prepared.sweep_id}: {len(prepared.points)} points on {prepared.site.name}"
                 + (f", {len(prepared.shapes)} job shapes" if len(prepared.shapes) > 1 else ""))
            console(stderr=False).print(_dry_table(prepared, DRY_RUN_ROWS))
            for argv in report.dry_run_commands:
                echo(shlex.join(argv))
        return
    if as_json:
        echo_json({"sweep_id": prepared.sweep_id, "folder": str(prepared.folder),
                   "points": len(prepared.points), "chunks_submitted": report.chunks_submitted,
                   "points_submitted": report.points_submitted, "recovered": report.recovered,
                   "job_ids": report.job_ids,
                   "images": [{"reference": i.reference, "runtime": i.runtime, "path": i.path, "fetched": i.fetched}
                              for i in report.images]})
        return
    for image in report.images:
        echo(f"image {image.reference}: {'fetched into' if image.fetched else 'reused'} {image.path} ({image.runtime})")
    echo(f"sweep {prepared.sweep_id}: {len(prepared.points)} points; submitted {report.points_submitted} in "
         f"{report.chunks_submitted} job(s) {' '.join(report.job_ids)}".rstrip())
    from hpcjobs.schedulers.registry import capabilities_of

    if not detach and not capabilities_of(prepared.site.scheduler).runs_here:
        echo(f"follow it with: hpcjobs status {prepared.sweep_id} --watch")


#: Points ``status --points`` lists unless ``--limit`` says otherwise.
STATUS_POINTS_PAGE = 100

#: Points shown by ``sweep --dry-run`` (``--json`` lists them all).
DRY_RUN_ROWS = 20


def _dry_points(prepared: Any) -> list[dict[str, Any]]:
    """Every point as the job will see it: index, id, job shape, and parameters (floats as written)."""
    shape_of = prepared.shape_of
    return [{"index": p.index, "point_id": p.point_id, "shape": shape_of.get(p.point_id, 0), "params": p.params,
             "env_text": dict(p.spelled)} for p in prepared.points]


def _dry_table(prepared: Any, limit: int) -> Any:
    from rich.markup import escape

    from hpcjobs.sweep.points.point import env_value

    points = prepared.points
    names = list(dict.fromkeys(k for p in points[:limit] for k in p.params))
    shown = min(limit, len(points))
    more = f" (first {shown} of {len(points)}; --json lists all)" if len(points) > shown else ""
    table = new_table("index", "point", *(["shape"] if len(prepared.shapes) > 1 else []), *map(escape, names),
                      title=f"points{more}", box=None)
    for p in points[:limit]:
        spelled = dict(p.spelled)
        cells = [escape(spelled.get(n) or env_value(p.params[n])) if n in p.params else "" for n in names]
        shape = [str(prepared.shape_of.get(p.point_id, 0))] if len(prepared.shapes) > 1 else []
        table.add_row(str(p.index), p.point_id, *shape, *cells)
    return table


def _status_table(status: Any, job: Any = None) -> Any:
    if job is not None:  # a single job of `hpcjobs submit`
        return _job_table(job)
    table = new_table(title=f"{status.sweep_id} ({status.site}, {status.scheduler}): "
                          f"{status.finished}/{status.total} finished", box=None)
    table.add_column("state")
    table.add_column("points", justify="right")
    for state, n in sorted(status.counts.items(), key=lambda kv: -kv[1]):
        table.add_row(f"[{STATE_STYLE.get(state, 'white')}]{state}[/]", str(n))
    return table


def _job_table(job: Any) -> Any:
    """A single job: its state, exit code, attempts and files."""
    from rich.markup import escape

    table = new_table(title=f"job {job.job_id or '-'} ({job.request_id}, {job.site}, {job.scheduler})", box=None,
                      show_header=False)
    table.add_column(style="bold")
    table.add_column()
    done = job.exit_code is not None and job.state in TERMINAL_STATES
    table.add_row("state", f"[{STATE_STYLE.get(job.state, 'white')}]{job.state}[/]"
                  + (f", exit {job.exit_code}" if done else ""))
    if job.state_raw and job.state_raw != job.state:
        table.add_row("scheduler", escape(job.state_raw))
    if job.earlier:
        table.add_row("attempt", f"{job.attempt} (before: {', '.join(f'{j} {s}' for j, s in job.earlier)})")
    for label, path in (("stdout", job.stdout), ("stderr", job.stderr), ("script", job.script)):
        if path is not None:
            table.add_row(label, escape(str(path)))
    return table


@click.command()
@click.argument("sweep_name", metavar="SWEEP|JOB_ID")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--watch", is_flag=True, help="Poll until every point is finished, with a live table.")
@click.option("--interval", type=float, default=10.0, show_default=True, help="Seconds between polls (--watch).")
@click.option("--points", "show_points", is_flag=True,
              help="List the points with their parameters, a page at a time (--offset, --limit, --state).")
@click.option("--offset", type=count_range(0), default=0, show_default=True,
              help="First point listed (index order; --points, --json).")
@click.option("--limit", type=count_range(0), default=None,
              help="Points listed at most (--points: 100, --json: 1000 unless given; 0: all of them).")
@click.option("--state", "point_states", multiple=True, metavar="STATE",
              help="List only the points in this state (repeatable; --points, --json).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def status(sweep_name: str, root: str | None, watch: bool, interval: float, show_points: bool, offset: int,
           limit: int | None, point_states: tuple[str, ...], as_json: bool) -> None:
    """Show a sweep's progress, or a job's state (one batched scheduler call per poll).

    SWEEP is a sweep's id, name or unique prefix; JOB_ID the id of a job submitted with
    `hpcjobs submit` (`1234`, `1234.server`), or its name. The counts come from the ledger's
    per-state counts; --points lists one page of points (a sweep may have a million).
    """
    from hpcjobs.sweep.api import POINTS_PAGE, sweep_status
    from hpcjobs.sweep.singles_read import read_single, settle_exit_code

    if limit is None:
        limit = POINTS_PAGE if as_json else STATUS_POINTS_PAGE
    listed = show_points or as_json
    states = list(point_states) or None

    def read_status(where: Any, **kw: Any) -> Any:  # the counts, and one page of points when they are listed
        return sweep_status(where, points_offset=offset, points_limit=(limit or None) if listed else 0,
                            points_state=states, **kw)

    st = read_status(sweep_name, root=root)
    single = read_single(st.folder)  # None for a sweep
    if single is not None and settle_exit_code(st.folder):  # finished, but its exit code was not known yet
        st = read_status(st.folder, poll=False)
        single = read_single(st.folder)
    if watch and not as_json:
        from rich.live import Live

        with Live(_status_table(st, single), console=console(stderr=False), refresh_per_second=2) as live:
            while not st.done:
                time.sleep(interval)
                st = read_status(st.folder)
                single = single and read_single(st.folder)
                live.update(_status_table(st, single))
    elif watch:
        while not st.done:
            time.sleep(interval)
            st = read_status(st.folder)
    if as_json:
        data = st.as_dict()
        if single is not None:
            data["job"] = (read_single(st.folder) or single).as_dict()
        echo_json(data, default=str)
        return
    out = console(stderr=False)
    if single is not None and not out.is_terminal:  # piped: whole paths
        out.width = 100_000
    if not watch:
        out.print(_status_table(st, single))
    if st.upstreams and not st.done:
        waits = "; ".join(f"{u.sweep_id or u.ref} ({u.condition}" + (f": job {' '.join(u.job_ids)})" if u.job_ids
                                                                   else ": ended)") for u in st.upstreams)
        out.print(f"after: {waits}", highlight=False)
    if st.upstream_cancelled:
        out.print(f"cancelled {len(st.upstream_cancelled)} job(s) {' '.join(st.upstream_cancelled)}: an upstream "
                  "failed, so they could never run (Slurm: DependencyNeverSatisfied; PBS deletes them itself); "
                  f"resubmit the upstream, then hpcjobs resubmit {st.sweep_id}", highlight=False)
    if show_points:
        from rich.markup import escape

        shown = f"points {offset:,}-{offset + len(st.points) - 1:,}" if st.points else f"no points from {offset:,}"
        which = f" in {', '.join(point_states)}" if point_states else ""
        table = new_table("index", "point", "state", "exit", "job", "params", box=None, title=f"{shown}{which}")
        for p in st.points:
            table.add_row(str(p.index), p.point_id, f"[{STATE_STYLE.get(p.state, 'white')}]{p.state}[/]",
                          "" if p.exit_code is None else str(p.exit_code), p.job_id or "",
                          escape(json.dumps(p.params)))
        out.print(table)
        if limit and len(st.points) == limit:
            out.print(f"more: --offset {offset + limit}", highlight=False)


@click.command()
@click.argument("sweep_name", metavar="SWEEP|JOB_ID")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@handle_errors
def cancel(sweep_name: str, root: str | None) -> None:
    """Cancel a sweep's queued and running jobs and its points not yet submitted, or one job of `hpcjobs submit`."""
    from hpcjobs.sweep.api import cancel_sweep

    ids = cancel_sweep(sweep_name, root=root)
    echo(f"cancelled {len(ids)} job(s) {' '.join(ids)}".rstrip())


@click.command()
@click.argument("sweep_name", metavar="SWEEP|JOB_ID")
@click.option("--failed", "which", flag_value="failed", default=True, help="Every failure state (default).")
@click.option("--state", "states_", multiple=True, help="Only points in these states (e.g. TIMEOUT).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Change the experiment for the retry.")
@click.option("--scale-walltime", type=float, help="Multiply the wall time (e.g. 2 for points that timed out).")
@click.option("--throttle", type=count_range(1), help="At most N tasks of each array run at once.")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--force", is_flag=True, help="Go on although the experiment file changed.")
@click.option("--right-size", is_flag=True, help="Give each failed point what the sweep's accounting advises "
              "(hpcjobs advise): a longer wall time after TIMEOUT, more memory after OUT_OF_MEMORY, and the "
              "advised memory, wall time and CPUs.")
@advice_options
@click.option("--from-file", "accounting_file", type=click.Path(exists=True), metavar="PATH",
              help="With --right-size: saved accounting (as report --from-file reads it) instead of sacct.")
@handle_errors
def resubmit(sweep_name: str, which: str, states_: tuple[str, ...], overrides: tuple[str, ...],
             scale_walltime: float | None, throttle: int | None, root: str | None, force: bool,
             right_size: bool = False, quantile: str = "0.95", margin: str = "0.2", min_runs: int = 5,
             accounting_file: str | None = None) -> None:
    """Submit a sweep's failed points again (or a failed job of `hpcjobs submit`), optionally with changed resources."""
    from hpcjobs import states
    from hpcjobs.sweep.api import resubmit_sweep
    from hpcjobs.sweep.find import find_sweep
    from hpcjobs.sweep.singles_read import read_single

    wanted = tuple(s.upper() for s in states_) or tuple(sorted(states.FAILURE_STATES))
    bad = [s for s in wanted if s not in states.ALL_STATES]
    if bad:
        raise click.BadParameter(f"unknown state(s) {', '.join(bad)}; choose from {', '.join(states.ALL_STATES)}",
                                 param_hint="--state")
    folder = find_sweep(sweep_name, root)
    if right_size or accounting_file:
        from hpcjobs.commands.advise import resubmit_right_sized, settings_from

        if overrides or scale_walltime or not right_size or read_single(folder) is not None:
            raise click.UsageError("--right-size (with --from-file) goes with a sweep, without --set or "
                                   "--scale-walltime")
        resubmit_right_sized(folder, settings_from(quantile, margin, min_runs), wanted, throttle, force,
                             accounting_file)
        return
    if read_single(folder) is not None:  # one job: a new attempt in its own ledger, a plain job again
        from hpcjobs.sweep.singles import resubmit_single

        sub, _reset = resubmit_single(folder, which=wanted, overrides=overrides, scale_walltime=scale_walltime,
                                      force=force)
        if sub.new:
            echo(f"job {sub.request_id}: resubmitted as job {sub.job_id}")
        else:
            echo(f"job {sub.job_id} is {sub.state}, not in {', '.join(wanted)}: not resubmitted "
                 "(--state chooses the states)")
        return
    sweep_name = str(folder)
    prepared, report, reset = resubmit_sweep(sweep_name, which=wanted, overrides=overrides,
                                             scale_walltime=scale_walltime, root=root, throttle=throttle, force=force)
    echo(f"sweep {prepared.sweep_id}: {reset} point(s) reset; submitted {report.points_submitted} in "
         f"{report.chunks_submitted} job(s) {' '.join(report.job_ids)}".rstrip())


@click.command("ls")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--poll/--no-poll", default=True, show_default=True,
              help="Ask the scheduler about the sweeps' live jobs first (one batched call per scheduler).")
@click.option("--jobs", "jobs", is_flag=True, help="List the single jobs of `hpcjobs submit` instead of the sweeps.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def ls(root: str | None, poll: bool, jobs: bool, as_json: bool) -> None:
    """List the sweeps under the sweep folder, each with the time its counts are from (--jobs: the single jobs)."""
    from hpcjobs.sweep.api import list_sweeps

    if jobs:
        _ls_jobs(root, poll, as_json)
        return
    listing = list_sweeps(root, poll=poll)
    sweeps = listing.sweeps
    if as_json:
        echo_json([{"sweep_id": s.sweep_id, "folder": str(s.folder), "site": s.site,
                    "scheduler": s.scheduler, "created_at": s.created_at, "counts": s.counts,
                    "as_of": s.as_of, "polled": s.polled, "poll_error": s.poll_error}
                   for s in sweeps])
        return
    from hpcjobs.sweep.singles_read import count_singles

    singles = count_singles(listing.root.path)
    hint = f"{singles} single job(s) of `hpcjobs submit` too: hpcjobs ls --jobs" if singles else ""
    if not sweeps:
        echo(f"no sweeps in {listing.root.describe()}" + (f"; {hint}" if hint else ""), err=True)
        return
    from datetime import datetime

    from hpcjobs.schedulers.registry import capabilities_of

    now = time.time()
    table = new_table("sweep", "site", "created", "points", "states", "as of", box=None,
                      title=f"sweeps in {listing.root.path}")
    for s in sweeps:
        created = datetime.fromtimestamp(s.created_at).strftime("%Y-%m-%d %H:%M")
        summary = ", ".join(f"{k} {v}" for k, v in sorted(s.counts.items(), key=lambda kv: -kv[1]))
        age = _age(now - s.as_of)
        unpolled = poll and not s.polled and not capabilities_of(s.scheduler).runs_here
        as_of = "now" if s.polled else f"{age} ago" + (" (not polled)" if unpolled else "")
        table.add_row(s.sweep_id, s.site, created, str(sum(s.counts.values())), summary, as_of)
    console(stderr=False).print(table)
    if hint:
        echo(hint, err=True)


def _ls_jobs(root: str | None, poll: bool, as_json: bool) -> None:
    """``ls --jobs``: the single jobs, their live ones polled in one batched call per scheduler."""
    from hpcjobs.sweep.singles_read import list_singles

    base, rows = list_singles(root, poll=poll)
    if as_json:
        echo_json([{**r.job.as_dict(), "as_of": r.as_of, "polled": r.polled, "poll_error": r.poll_error}
                   for r in rows])
        return
    if not rows:
        echo(f"no jobs of `hpcjobs submit` in {base}", err=True)
        return
    from datetime import datetime

    from rich.markup import escape

    now = time.time()
    table = new_table("job", "name", "site", "submitted", "state", "exit", "as of", "stdout", box=None,
                      title=f"jobs in {base}")
    for r in rows:
        j = r.job
        when = datetime.fromtimestamp(j.submitted_at or j.created_at).strftime("%Y-%m-%d %H:%M")
        as_of = "now" if r.polled else f"{_age(now - r.as_of)} ago" + (" (not polled)" if poll else "")
        table.add_row(j.job_id or "-", j.name, j.site, when, f"[{STATE_STYLE.get(j.state, 'white')}]{j.state}[/]",
                      "" if j.exit_code is None or j.state not in TERMINAL_STATES else str(j.exit_code), as_of,
                      escape(str(j.stdout or "")))
    out = console(stderr=False)
    if not out.is_terminal:
        out.width = 100_000
    out.print(table)


def _age(seconds: float) -> str:
    """``42 s``, ``3 min``, ``5 h``, ``2 d``."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size} {unit}"
    return f"{s} s"


@click.command("sweep-run-local", hidden=True)
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
@click.option("--workers", type=count_range(1))
@handle_errors
def sweep_run_local(folder: str, workers: int | None) -> None:
    """Run a local sweep's pending points (what `hpcjobs sweep --detach` starts in the background)."""
    from pathlib import Path

    from hpcjobs.sweep.api import prepared_from_ledger
    from hpcjobs.sweep.ledger.store import Ledger
    from hpcjobs.sweep.local import run_local

    prepared = prepared_from_ledger(Path(folder))
    with Ledger.open(prepared.folder) as ledger:
        run_local(prepared, ledger, workers=workers)
