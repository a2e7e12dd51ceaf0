"""From an experiment file to a prepared sweep: expanded points, the resolved job, the sweep's folder.

A sweep's id is derived from what the sweep means (the validated experiment with its ``--set``
overrides, the sweep arguments, the site; see :mod:`hpcjobs.sweep.identity`), so running the same
command again finds the same sweep and continues it instead of starting another.

Layout of a sweep folder (``<root>/<sweep_id>/``, on a filesystem the compute nodes see)::

    ledger.sqlite             the ledger (hpcjobs.sweep.ledger.store)
    lock                      the submitter lock
    chunks/<n>.ids            point ids of chunk n, one per line: array index i is line i+1
    chunks/<n>.env            the parameters of every index of chunk n (a bash ``case``, sourced by the task)
    scripts/<n>.<token>.sh    the array script of each submission attempt
    points/<point_id>/        each point's run folder, made by its task: params.json, stdout.log and
                              stderr.log (hpcjobs.sweep.logs), and whatever the job writes to ``$HPCJOBS_RUN_DIR``
    results-spec.json         the experiment's ``results:`` sources (hpcjobs.config.results)

Nothing is written per point at submission time (two small files per chunk instead): on a
login node's shared filesystem, thousands of fsynced files would take minutes.

The points are not held: :attr:`PreparedSweep.points` is a :class:`hpcjobs.sweep.points.stream.SweepPoints`
that expands them again whenever they are read (the ledger's rows, the chunk files), so a sweep of a
million points costs the memory of one chunk.

:func:`render_packed` is ``hpcjobs render`` of a packed experiment: the array script of its first chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.loading import load_experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.sweep import env_names
from hpcjobs.config.yamlio import YamlDocument, read_text_file
from hpcjobs.errors import ConfigError
from hpcjobs.output import atomic_write_text
from hpcjobs.render.script import RenderedScript, load_site_for, load_template, render_job
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.resolve import ResolvedJob, resolve
from hpcjobs.schedulers.base import ArraySpec
from hpcjobs.schedulers.registry import get_backend, job_env_of
from hpcjobs.sweep.chunk_files import env_file_text, write_chunk_files
from hpcjobs.sweep.chunks import Chunk
from hpcjobs.sweep.identity import DEFAULT_SWEEP_ROOT, make_sweep_id, sweep_root  # noqa: F401 (re-exported)
from hpcjobs.sweep.logs import run_folder_lines
from hpcjobs.sweep.pack import active_pack, chunk_pack_plan, packed_array_job
from hpcjobs.sweep.points.point import Point, point_env_lines
from hpcjobs.sweep.points.shapes import JobShape, job_shapes
from hpcjobs.sweep.points.stream import sweep_points
from hpcjobs.transport import RemotePlaces


@dataclass(frozen=True)
class PreparedSweep:
    """Everything needed to submit (or resume) a sweep.

    Attributes:
        sweep_id: ``<name>-<8 hex>``, stable for the same experiment, overrides and site.
        folder: The sweep's folder.
        experiment_path: The experiment file.
        experiment_text: Its text as read (hashed into the ledger to detect changes).
        experiment: The validated experiment (``--set`` applied).
        site: The site config.
        job: The job of the experiment as written, resolved and checked against the site's limits
            (the job of every point when the sweep varies no key of the experiment).
        points: The expanded points, in order: a :class:`hpcjobs.sweep.points.stream.SweepPoints` (expanded
            again on each read) or any sequence of points.
        submit_dir: Where jobs are submitted from (their working directory; relative output paths
            and relative paths in the command are relative to it).
        shapes: The jobs the points run as, when parameters set keys of the experiment
            (``resources.cpus_per_task``...; :mod:`hpcjobs.sweep.points.shapes`): one array per shape.
        shape_of: Each point id's index in ``shapes``.
        remote: Where the sweep lives on a login node reached over SSH (a site's ``remote:``): jobs
            read its copy there and are submitted from its workdir (``None``: here).
    """

    sweep_id: str
    folder: Path
    experiment_path: Path
    experiment_text: str
    experiment: Experiment
    site: SiteConfig
    job: ResolvedJob
    points: Sequence[Point]
    submit_dir: Path
    shapes: tuple[JobShape, ...] = ()
    shape_of: Mapping[str, int] = field(default_factory=dict)
    remote: RemotePlaces | None = None

    @property
    def job_folder(self) -> str:
        """The sweep folder as its jobs see it (the login node's copy, when remote)."""
        return self.remote.folder if self.remote is not None else str(self.folder)

    @property
    def job_submit_dir(self) -> str:
        """The folder jobs are submitted from, as the scheduler sees it."""
        return self.remote.workdir if self.remote is not None else str(self.submit_dir)


def prepare_sweep(
    path: str | Path,
    *,
    site: str | None = None,
    overrides: Sequence[str] = (),
    sweep_args: Sequence[str] = (),
    root: str | Path | None = None,
    submit_dir: str | Path | None = None,
    ask_scheduler: bool = False,
    refresh_site: bool = False,
    template_dirs: tuple[str, ...] = (),
) -> PreparedSweep:
    """Load, check and expand a sweep; nothing is written.

    Args:
        path: The experiment file.
        site: Site override (name or file).
        overrides: ``--set KEY=VALUE`` overrides of the experiment.
        sweep_args: Hydra-style sweep arguments (``lr=0.1,0.01``), combined with the file's sweep.
        root: Folder of sweep folders.
        submit_dir: Working directory of the jobs (default: the current directory).
        ask_scheduler: Site detection may ask a live scheduler (set when the sweep is submitted).
        refresh_site: Discover this machine's cluster again even when a discovered site is cached.
        template_dirs: Extra template folders the site's checks render with (``hpcjobs render``'s).

    Raises:
        ConfigError: Bad experiment, sweep or site (one ``site validate`` refuses), or a request the site
            cannot satisfy.
    """
    experiment_path = Path(path).resolve()
    experiment, doc = load_experiment(experiment_path, overrides)
    text = read_text_file(experiment_path)  # bounded, regular files only (as load_experiment read it)
    site_config, site_file = load_site_for(experiment, site, ask_scheduler=ask_scheduler, refresh_site=refresh_site,
                                           template_dirs=template_dirs)
    points = sweep_points(experiment.sweep, sweep_args, doc=doc, source_text=text)
    points.check()  # every point once (a filter failing on one fails here); a plain grid needs no pass
    job = resolve(experiment, site_config, doc=doc, site_file=site_file)
    load_template(job, template=experiment.template, doc=doc)  # missing, not UTF-8: said before anything is written
    shapes, shape_of = job_shapes(experiment, doc, site_config, site_file, job, points)
    sweep_id = make_sweep_id(experiment, sweep_args, site_config.name)
    where = Path(submit_dir or Path.cwd()).resolve()
    check_output_dirs({s.job.output_dir for s in shapes} or {job.output_dir}, where, doc)
    return PreparedSweep(sweep_id, sweep_root(root) / sweep_id, experiment_path, text, experiment,
                         site_config, job, points, where, shapes, shape_of)


def check_output_dirs(output_dirs: Iterable[str], submit_dir: Path, doc: YamlDocument | None = None) -> None:
    """Refuse, before anything is written, an ``output_dir`` that cannot be a folder (nothing is made).

    ``--set output_dir=/dev/null``, a path through a regular file, a name over 255 bytes: each is said at
    the experiment's ``output_dir`` key (or ``--set``) instead of failing once the sweep folder exists.

    Raises:
        ConfigError: One of them (relative to ``submit_dir``) is, or goes through, something that is not a
            folder, or is too long for the file system.
        FileSystemError: One cannot be looked up (permission denied).
    """
    from hpcjobs.safe_files import user_folder

    for output_dir in sorted(output_dirs):
        try:
            user_folder(submit_dir / output_dir, what="output_dir", create=False)
        except ConfigError as exc:
            if doc is None:
                raise
            raise ConfigError([doc.problem(("output_dir",), p.message, expected=p.expected)
                               for p in exc.problems]) from None


def chunk_env_text(prepared: PreparedSweep, point_ids: Sequence[str]) -> str:
    """The ``chunks/<n>.env`` file: a bash ``case`` on the array index exporting that point's parameters.

    Each arm is built from :func:`hpcjobs.sweep.points.point.point_env_lines`, whose lines are single
    lines of printable ASCII (values encoded by :func:`hpcjobs.render.shellvalue.shell_word`):
    any value, line breaks and ``#`` included, arrives as exactly its bytes
    (:func:`hpcjobs.sweep.chunk_files.env_file_text`).

    Raises:
        ConfigError: A value that cannot reach a job (NUL).
    """
    wanted = set(point_ids)
    by_id = {p.point_id: p for p in prepared.points if p.point_id in wanted}
    return env_file_text(prepared.sweep_id, (point_env_lines(by_id[pid]) for pid in point_ids))


def write_chunk_file(prepared: PreparedSweep, chunk: int, point_ids: Sequence[str]) -> Path:
    """Write ``chunks/<chunk>.ids`` (array index i on line i+1) and ``chunks/<chunk>.env``.

    Several chunks at once: :func:`hpcjobs.sweep.chunk_files.write_chunk_files` (one pass over the points).
    """
    write_chunk_files(prepared, [Chunk(chunk, tuple(point_ids))])
    return prepared.folder / "chunks" / f"{chunk}.ids"


def array_job_for_chunk(prepared: PreparedSweep, chunk: int, size: int, throttle: int | None,
                        job: ResolvedJob | None = None) -> ResolvedJob:
    """The resolved job of one chunk: an array of ``size`` tasks whose task reads its point by index.

    ``job`` is the shape of the chunk's points (:func:`hpcjobs.sweep.points.shapes.chunk_job`; default
    ``prepared.job``).

    The preamble (added before the experiment's own setup lines) sources ``chunks/<chunk>.env``,
    which exports the parameters of this array index, then makes the point's run folder with its
    ``params.json``: one script serves every point, and a parameter value never becomes shell code.
    """
    base = with_tracking(with_parameters_passed(job or prepared.job, prepared.points), prepared)
    if active_pack(prepared) is not None:  # several points per task
        return packed_array_job(prepared, chunk, size, throttle, base, _chunk_logs(prepared, chunk, base))
    index_var = job_env_of(prepared.site.scheduler).array_index_var
    folder = shell_word(prepared.job_folder)
    preamble = (
        f"export HPCJOBS_SWEEP_ID={shell_word(prepared.sweep_id)} HPCJOBS_SWEEP_DIR={folder}",
        f"export HPCJOBS_CHUNK={chunk} HPCJOBS_ARRAY_INDEX=\"${{{index_var}:?not an array task}}\"",
        "# shellcheck source=/dev/null",
        f'source "$HPCJOBS_SWEEP_DIR/chunks/{chunk}.env"',
        *run_folder_lines(),
    )
    return replace(base, setup=preamble + base.setup, array=ArraySpec(0, size - 1, throttle=throttle),
                   extra_directives=base.extra_directives + _chunk_logs(prepared, chunk, base))


def with_parameters_passed(job: ResolvedJob, points: Sequence[Point]) -> ResolvedJob:
    """``job`` whose container (if any) also passes the sweep's parameter variables.

    A chunk's task exports its point's parameters when it runs (``chunks/<n>.env``); a runtime that
    passes only the variables it is told of (Podman's ``--env NAME``, Apptainer's ``--cleanenv``
    with an ``env:`` list) must be told their names, which the experiment's own job cannot know.
    """
    if job.container is None:
        return job
    env = getattr(points, "env", None)  # SweepPoints: every name the sweep can produce, mapped once
    names = (tuple(env.values()) if isinstance(env, Mapping)
             else tuple(env_names(dict.fromkeys(k for p in points for k in p.params)).values()))
    added = tuple(n for n in names if n not in job.container.job_env)
    if not added:
        return job
    return replace(job, container=replace(job.container, job_env=job.container.job_env + added))


def with_tracking(job: ResolvedJob, prepared: PreparedSweep) -> ResolvedJob:
    """``job`` whose points join their tracker runs (the experiment's ``tracking:``) after its ``setup:`` lines.

    The lines go at the end of ``setup``, which every point runs once (a packed task runs it per point),
    so the tracker's ``python3`` is the experiment's environment's. A container that passes only the
    variables it is told of is told the trackers' (:data:`hpcjobs.sweep.tracking.TRACKER_ENV`).
    """
    tracking = prepared.experiment.tracking
    if tracking is None:
        return job
    from hpcjobs.sweep.tracking import TRACKER_ENV, tracking_lines

    lines = tracking_lines(tracking, prepared.sweep_id, prepared.experiment.name,
                           job_env_of(prepared.site.scheduler).job_id_var)
    container = job.container
    if container is not None:
        added = tuple(n for n in TRACKER_ENV if n not in container.job_env)
        container = replace(container, job_env=container.job_env + added)
    return replace(job, setup=job.setup + lines, container=container)


def _chunk_logs(prepared: PreparedSweep, chunk: int, job: ResolvedJob) -> tuple[str, ...]:
    """The directives that keep the chunk's log files apart from other chunks' (PBS Pro's ``-o``/``-e``:
    :meth:`~hpcjobs.schedulers.base.BaseBackend.chunk_log_directives`)."""
    return get_backend(prepared.site.scheduler).chunk_log_directives(job.output_dir, prepared.sweep_id, chunk,
                                                                     job.extra_directives)


def chunk_script_text(prepared: PreparedSweep, chunk: int, size: int, throttle: int | None, token: str,
                      job: ResolvedJob | None = None) -> str:
    """The array script of one submission attempt of chunk ``chunk`` (``size`` points; packed when the
    experiment says ``pack:``, see :mod:`hpcjobs.sweep.pack`)."""
    array_job = array_job_for_chunk(prepared, chunk, size, throttle, job)
    plan = chunk_pack_plan(prepared, chunk, token, array_job)
    return render_job(array_job, template=prepared.experiment.template, pack=plan).text


def render_chunk_script(prepared: PreparedSweep, chunk: int, size: int, throttle: int | None, token: str,
                        job: ResolvedJob | None = None) -> Path:
    """Render and write ``scripts/<chunk>.<token>.sh`` for one submission attempt (``job``: the chunk's shape)."""
    text = chunk_script_text(prepared, chunk, size, throttle, token, job)
    return atomic_write_text(prepared.folder / "scripts" / f"{chunk}.{token}.sh", text, mode=0o700,
                             below=prepared.folder)


def render_packed(path: str | Path, *, site: str | None = None, overrides: Sequence[str] = (),
                  template_dirs: tuple[str, ...] = (), root: str | Path | None = None) -> RenderedScript | None:
    """The packed array script of the first chunk of a packed experiment's sweep (``hpcjobs render``).

    Returns ``None`` when the experiment has no ``pack:`` (or its site runs points unpacked): render it
    as a single job. Nothing is written and the scheduler is not asked. ``root``: the folder of sweep
    folders (default: where ``hpcjobs sweep`` would put it).

    Raises:
        ConfigError: Anything wrong with the experiment, its sweep or the site.
    """
    experiment, doc = load_experiment(path, overrides)
    if experiment.pack is None:
        return None
    prepared = prepare_sweep(path, site=site, overrides=overrides, root=root, template_dirs=template_dirs)
    if active_pack(prepared) is None:
        return None
    size = len(prepared.points)
    job = array_job_for_chunk(prepared, 0, size, prepared.site.limits.array_throttle)
    plan = chunk_pack_plan(prepared, 0, "0" * 16, job)
    return render_job(job, template=experiment.template, template_dirs=template_dirs, pack=plan, doc=doc)
