"""Submitting one rendered job: write the script, make the output directory, submit with a tag.

:func:`submit_rendered` is the bare step (no ledger) that tests and sweeps build on, and
:class:`Submission` what it answers. The library call behind ``hpcjobs submit`` is
:func:`hpcjobs.sweep.singles.submit_single`: it records the job in a ledger of its own, like a
one-point sweep, so that the same request is submitted exactly once and
``status``/``logs``/``cancel``/``resubmit`` take its job id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.errors import CommandError, CommandTimeout, ConfigError, ConfigProblem
from hpcjobs.output import atomic_write_text
from hpcjobs.render.script import RenderedScript
from hpcjobs.safe_files import user_folder
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient, client_for
from hpcjobs.schedulers.registry import capabilities_of, get_backend
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
        request_id: The request's id in the ledger of single jobs (``<name>-<hash>``), when recorded.
        new: Submitted by this call (``False``: the same request was submitted before, or an
            earlier interrupted run's job was found by its token; nothing was submitted again).
        state: The job's state as last known (``SUBMITTED`` right after submission).
        recovered: Found by its token after an earlier run lost the scheduler's answer.
        folder: The request's ledger folder.
    """

    job_id: str
    script: Path
    tag: JobTag
    site: str
    scheduler: str
    stdout: Path | None = None
    stderr: Path | None = None
    request_id: str | None = None
    new: bool = True
    state: str | None = None
    recovered: bool = False
    folder: Path | None = None


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
    if client is None and capabilities_of(job.scheduler).runs_here:
        raise ConfigError(ConfigProblem(
            f"site {job.site.name!r} has no scheduler to submit to: run it here with `hpcjobs sweep` (the local "
            "runner), or pass --site with a Slurm or PBS site (`hpcjobs site list`, `hpcjobs site init`)",
            key="site"))
    base = Path(submit_dir) if submit_dir is not None else Path.cwd()
    out_dir = base / job.output_dir
    user_folder(out_dir, what="output_dir")
    tag = tag or JobTag(job.name, 0, new_token())
    script = atomic_write_text(out_dir / "scripts" / f"{job.name}.{tag.token}.sh", rendered.text, mode=0o700,
                               below=out_dir)
    if job.container is not None:  # containers.pull: submit fetches the image before the job is queued
        from hpcjobs.containers.pull import pull_images

        pull_images([job.container], job.scheduler)
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
    from hpcjobs.sweep.logs import single_job_log_paths

    job = rendered.job
    if not default_log_files(rendered):
        return None, None
    return single_job_log_paths(job.scheduler, job.name, job.output_dir, job_id, submit_dir)


def default_log_files(rendered: RenderedScript) -> bool:
    """Whether the job's stdout and stderr go where hpcjobs's own directives put them (not an array,
    and no ``--output``/``--error``/``-o``/``-e`` directive of the experiment's)."""
    job = rendered.job
    if not get_backend(job.scheduler).run_folders_mounted(job.site):
        return False  # the script's files would stay in the container: the scheduler's log command shows them
    own = " ".join(job.extra_directives)
    return job.array is None and not any(flag in own for flag in ("--output", "--error", "-o ", "-e "))


__all__ = ["Submission", "client_for", "default_log_files", "job_log_paths", "submit_rendered"]
