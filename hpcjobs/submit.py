"""Submitting one rendered job: write the script, make the output directory, submit with a tag.

The library call behind ``hpcjobs submit``; sweeps build on the same pieces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.errors import CommandError, CommandTimeout, ConfigError, ConfigProblem
from hpcjobs.output import atomic_write_text
from hpcjobs.render.script import RenderedScript, render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.states import JobTag, new_token


@dataclass(frozen=True)
class Submission:
    """A submitted job.

    Attributes:
        job_id: The scheduler's id.
        script: Where the submitted script was written.
        tag: The hpcjobs tag stamped on the job (comment / variable list).
        site: Site name.
        scheduler: Scheduler family.
        stdout: Where the job's stdout goes (the directives hpcjobs writes; ``None`` when a
            directive of the experiment names another file).
        stderr: Where its stderr goes.
    """

    job_id: str
    script: Path
    tag: JobTag
    site: str
    scheduler: str
    stdout: Path | None = None
    stderr: Path | None = None


def client_for(scheduler: str) -> SchedulerClient:
    """A scheduler client for a scheduler family (``slurm``, ``pbspro``, ``torque``)."""
    from hpcjobs.schedulers.registry import get_backend

    return SchedulerClient(get_backend(scheduler))


def submit_rendered(
    rendered: RenderedScript,
    *,
    client: SchedulerClient | None = None,
    submit_dir: str | Path | None = None,
    options: SubmitOptions | None = None,
    tag: JobTag | None = None,
) -> Submission:
    """Write ``rendered`` under its output directory and submit it from ``submit_dir``.

    The job's output directory is created first (Slurm silently drops output for a
    missing directory), the script is written atomically, and the job carries the
    hpcjobs tag so it can be found again even if the caller dies before recording the id.

    Raises:
        ConfigError: The site has no scheduler (``local``); nothing is written.
        CommandError: The scheduler refused the job (argv, exit code and stderr attached).
    """
    job = rendered.job
    if client is None and job.scheduler == "local":
        raise ConfigError(ConfigProblem(
            f"site {job.site.name!r} has no scheduler to submit to: run it here with `hpcjobs sweep` (the local "
            "runner), or pass --site with a Slurm or PBS site (`hpcjobs site list`, `hpcjobs site init`)",
            key="site"))
    base = Path(submit_dir) if submit_dir is not None else Path.cwd()
    out_dir = base / job.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = tag or JobTag(job.name, 0, new_token())
    script = atomic_write_text(out_dir / "scripts" / f"{job.name}.{tag.token}.sh", rendered.text, mode=0o700)
    client = client or client_for(job.scheduler)
    opts = options or SubmitOptions()
    if opts.comment is None:
        from dataclasses import replace

        opts = replace(opts, comment=tag.render())
    try:
        job_id = client.submit(script, opts, cwd=os.fspath(base))
    except CommandTimeout:
        raise  # it may have been queued: keep the script that the job would run
    except CommandError:
        script.unlink(missing_ok=True)  # refused: leave nothing half-done behind
        raise
    out, err = job_log_paths(rendered, job_id, base)
    return Submission(job_id, script, tag, job.site.name, job.scheduler, out, err)


def job_log_paths(rendered: RenderedScript, job_id: str, submit_dir: Path) -> tuple[Path | None, Path | None]:
    """The stdout and stderr files of a single (non-array) job, as the generated directives name them.

    Slurm: ``<output_dir>/<name>-<job id>.out``; PBS Pro and Torque: ``<output_dir>/<name>.out``
    (copied there when the job ends, unless the site writes directly). ``None`` where the
    experiment's own directives choose the files.
    """
    job = rendered.job
    own = " ".join(job.extra_directives)
    if job.array is not None or any(flag in own for flag in ("--output", "--error", "-o ", "-e ")):
        return None, None
    stem = f"{job.name}-{job_id.split('.')[0]}" if job.scheduler == "slurm" else job.name
    base = submit_dir / job.output_dir
    return base / f"{stem}.out", base / f"{stem}.err"


def submit_experiment(
    path: str | Path,
    *,
    site: str | None = None,
    overrides: tuple[str, ...] = (),
    submit_dir: str | Path | None = None,
    refresh_site: bool = False,
) -> Submission:
    """Load, check, render and submit an experiment file as one job.

    ``refresh_site``: discover this machine's cluster again even when a discovered site is cached.

    Raises:
        ConfigError: Bad input (nothing is written or submitted).
        CommandError: The scheduler refused the job.
    """
    rendered = render_experiment(path, site=site, overrides=overrides, ask_scheduler=True,
                                  refresh_site=refresh_site)
    return submit_rendered(rendered, submit_dir=submit_dir)
