"""Pipelines: a sweep (or a job of ``hpcjobs submit``) that waits for other sweeps through the scheduler.

An upstream is named by ``after:`` in the experiment (files relative to the experiment's file) or by
``--after`` on the command line (``--after REF`` waits for success, ``--after any:REF`` for any ending;
files relative to the current folder), and by what the ledger recorded for the sweep before (so running
the command again, or ``hpcjobs resubmit``, keeps them). Each reference is resolved to its ledger
(:func:`find_upstream`: an experiment file through its sweep id, :mod:`hpcjobs.sweep.identity`, else the
newest sweep or job planned from that file; a sweep id or name, or a job of ``hpcjobs submit``, through
:func:`hpcjobs.sweep.find.find_sweep`; a bare scheduler job id as itself), the upstream's state is
polled once (one batched status call), and the jobs still running become the submission's dependency
(:class:`hpcjobs.schedulers.base.JobDependency`: ``sbatch --dependency=afterok:ID:ID``, ``qsub -W
depend=afterok:ID``; an array id covers all its tasks). An upstream that has ended already is decided
here: with ``when: ok`` a failed upstream refuses the submission (the downstream could never run), a
successful one needs no dependency.

A Slurm job whose ``afterok`` upstream failed stays ``PENDING`` with the reason
``DependencyNeverSatisfied`` (unless the cluster sets ``kill_invalid_depend``, when Slurm cancels it
itself). :func:`cancel_blocked` finds such jobs of a sweep in one ``squeue`` call, cancels them in one
``scancel`` call and records their points ``CANCELLED`` with the state text
``upstream failed: DependencyNeverSatisfied``. OpenPBS deletes a job whose dependency cannot be met by
itself (qsub(1B)); its points then read as the status poll finds them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpcjobs import states
from hpcjobs.errors import ConfigError, ConfigProblem, HpcJobsError
from hpcjobs.schedulers.base import JobDependency, JobStatus, SchedulerBackend, job_key_of
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.schedulers.status_table import StatusTable
from hpcjobs.sweep.ledger.store import LEDGER_FILE, Ledger, UpstreamRecord

if TYPE_CHECKING:
    from hpcjobs.config.experiment import Experiment

__all__ = ["BLOCKED_REASON", "CONDITION_TYPE", "PBS_DELETED_STATE_RAW", "ResolvedUpstream", "UpstreamSpec",
           "cancel_blocked", "dependencies", "find_upstream", "parse_after_option", "resolve_upstreams",
           "settle_upstreams", "upstream_specs"]

#: ``after:`` conditions → the scheduler's dependency type (``ok``: afterok, ``any``: afterany).
CONDITION_TYPE: dict[str, str] = {"ok": "ok", "any": "any", "done": "any"}
#: Slurm's pending reason of a job whose dependency can never be satisfied (squeue(1) JOB REASON CODES).
BLOCKED_REASON = "DependencyNeverSatisfied"
#: The state text recorded for points cancelled because their upstream failed.
BLOCKED_STATE_RAW = f"upstream failed: {BLOCKED_REASON}"
#: The state text recorded for points of jobs the PBS server deleted because their dependency failed.
PBS_DELETED_STATE_RAW = "upstream failed: deleted by the PBS server (depend)"
_FILE_SUFFIXES = (".yaml", ".yml", ".json")
#: A scheduler job id given as an upstream: ``123``, ``123.server``, ``123[].server``.
_JOB_ID_RE = re.compile(r"\d+(?:_\d+)?(?:\[\])?(?:\.[A-Za-z0-9_.-]+)?")


@dataclass(frozen=True)
class UpstreamSpec:
    """An upstream as asked for: a reference and a condition.

    Attributes:
        ref: An absolute experiment file path, a sweep id or name, a job id or name (the record's key).
        when: ``ok``, ``any`` or ``done``.
        source: Where it was asked for (``after.0.sweep`` of a file, ``--after``, ``recorded``), for messages.
        file: The experiment file that asked for it, when it did.
        folder: The upstream's ledger folder, when the ledger recorded it.
    """

    ref: str
    when: str
    source: str = "--after"
    file: str | None = None
    folder: str | None = None


def parse_after_option(text: str) -> UpstreamSpec:
    """``--after REF`` (wait for success) or ``--after WHEN:REF`` with WHEN one of ``ok``, ``any``, ``done``.

    Raises:
        ConfigError: An empty reference.
    """
    when, sep, rest = text.partition(":")
    if sep and when in CONDITION_TYPE:
        ref = rest
    else:
        when, ref = "ok", text
    if not ref.strip():
        raise ConfigError(ConfigProblem(f"--after {text!r}: give an experiment file, a sweep id or name, or a job "
                                        "id, optionally after ok:, any: or done:", key="--after"))
    return UpstreamSpec(ref.strip(), when, "--after")


def _looks_like_file(ref: str, base: Path) -> Path | None:
    """``ref`` as an experiment file (absolute), when it names one or ends like one; else ``None`` (an id).

    A reference no file can have (a name over 255 bytes, ``~nosuchuser``) is an id: the lookup says
    that no sweep or job has it.
    """
    try:
        candidate = Path(ref).expanduser()
        path = candidate if candidate.is_absolute() else base / candidate
        if path.is_file() or ref.endswith(_FILE_SUFFIXES):
            return path.resolve()
    except (OSError, RuntimeError, ValueError):  # too long, an unknown ~user, a NUL byte
        return None
    return None


def upstream_specs(after: Sequence[tuple[str, str]], experiment_path: Path | None, cli: Sequence[UpstreamSpec],
                   recorded: Sequence[UpstreamRecord] = (), cwd: Path | None = None) -> list[UpstreamSpec]:
    """Every upstream of a submission: the experiment's ``after:``, ``--after``, then those recorded before.

    Files are made absolute (``after:`` relative to the experiment's folder, ``--after`` to ``cwd``); a
    reference given twice counts once (the first condition wins).
    """
    out: dict[str, UpstreamSpec] = {}
    base = experiment_path.parent if experiment_path is not None else Path.cwd()
    for i, (ref, when) in enumerate(after):
        path = _looks_like_file(ref, base)
        key = str(path) if path else ref
        out.setdefault(key, UpstreamSpec(key, when, f"after.{i}.sweep",
                                          str(experiment_path) if experiment_path else None))
    for spec in cli:
        path = _looks_like_file(spec.ref, cwd or Path.cwd())
        key = str(path) if path else spec.ref
        out.setdefault(key, UpstreamSpec(key, spec.when, spec.source))
    for rec in recorded:
        out.setdefault(rec.ref, UpstreamSpec(rec.ref, rec.condition, "recorded", folder=rec.folder))
    return list(out.values())


def _problem(spec: UpstreamSpec, message: str) -> ConfigError:
    key = spec.source if spec.source != "recorded" else "after"
    return ConfigError(ConfigProblem(message, file=spec.file, key=key))


def _sweep_of_file(spec: UpstreamSpec, path: Path, root: str | Path | None, site: str | None) -> Path:
    """The sweep (or job of ``hpcjobs submit``) planned from the experiment file ``path``.

    First its sweep id as ``hpcjobs sweep FILE`` makes it (:func:`hpcjobs.sweep.identity.make_sweep_id`) on
    the file's ``site:``, else on ``site`` (the downstream's: an upstream runs where it does); else the newest
    sweep or job whose ledger records that file (one planned with ``--set`` or sweep arguments).
    """
    from hpcjobs.config.loading import load_experiment
    from hpcjobs.sweep.identity import make_sweep_id, sweep_folders, sweep_root
    from hpcjobs.sweep.singles_read import singles_root

    base = sweep_root(root)
    try:
        experiment, _doc = load_experiment(path)
        site_name = experiment.site or site
        folder = base / make_sweep_id(experiment, (), site_name) if site_name else None
        if folder is not None and (folder / LEDGER_FILE).is_file():
            return folder
    except ConfigError:
        pass  # an upstream file that no longer loads: its sweep may still be found by path
    newest: tuple[float, Path] | None = None
    for parent in (base, singles_root(root)):
        for name in sweep_folders(parent):
            try:
                with Ledger.open(parent / name, allow_read_only=True) as ledger:
                    meta = ledger.meta
            except HpcJobsError:
                continue
            if meta.experiment_path == str(path) and (newest is None or meta.created_at > newest[0]):
                newest = (meta.created_at, parent / name)
    if newest is None:
        raise _problem(spec, f"upstream {path} has not been submitted (no sweep or job of it under {base}): submit "
                             f"it first (hpcjobs sweep {path}, or hpcjobs submit {path})")
    return newest[1]


def find_upstream(spec: UpstreamSpec, root: str | Path | None = None, site: str | None = None) -> Path | None:
    """The ledger folder of an upstream, or ``None`` for a bare scheduler job id hpcjobs does not know.

    Raises:
        ConfigError: No such sweep, job or file's sweep (with the hint to submit the upstream first), or an
            ambiguous name.
    """
    from hpcjobs.sweep.find import find_sweep
    from hpcjobs.sweep.identity import holds_ledger

    ref = spec.ref
    for given in (spec.folder, ref):
        if given and holds_ledger(given):
            return Path(given).resolve()
    path = _looks_like_file(ref, Path.cwd())
    if path is not None and Path(ref).is_absolute():
        if not path.is_file():
            raise _problem(spec, f"upstream {ref}: no such file")
        return _sweep_of_file(spec, path, root, site)
    try:
        return find_sweep(ref, root)
    except ConfigError as exc:
        if _JOB_ID_RE.fullmatch(ref):
            return None  # a job hpcjobs did not submit: the scheduler's id as it is
        raise _problem(spec, f"upstream {ref!r} was not found: submit it first, or name a sweep id, a sweep name, "
                             f"an experiment file or a job id ({exc})") from None


@dataclass(frozen=True)
class ResolvedUpstream:
    """An upstream resolved to its ledger and to the scheduler's jobs to wait for.

    Attributes:
        spec: What was asked for.
        sweep_id: The upstream sweep's (or job's) id; ``None`` for a bare scheduler job id.
        folder: Its ledger folder; ``None`` for a bare job id.
        wait_for: The upstream job ids still to wait for (empty when it has ended as required).
    """

    spec: UpstreamSpec
    sweep_id: str | None
    folder: Path | None
    wait_for: tuple[str, ...]

    def record(self) -> UpstreamRecord:
        """The ledger's record of it."""
        return UpstreamRecord(self.spec.ref, self.spec.when, self.sweep_id, str(self.folder) if self.folder else None,
                              self.wait_for)


def _wait_list(spec: UpstreamSpec, ledger: Ledger, scheduler: str) -> tuple[str, ...]:
    """The upstream's job ids still to wait for; refuse when the downstream could never run."""
    sweep_id = ledger.meta.sweep_id
    by_job: dict[str | None, dict[str, int]] = {}
    for view in ledger.jobs_by_state():
        by_job.setdefault(view.job_id, {})[view.state] = view.n
    unsubmitted = sum(by_job.pop(None, {}).values())
    if unsubmitted:
        raise _problem(spec, f"upstream {sweep_id} has {unsubmitted} point(s) not submitted yet: submit it first "
                             f"(run its hpcjobs sweep command again), then this one")
    wait: list[str] = []
    failed: dict[str, int] = {}
    for job_id, counts in by_job.items():
        assert job_id is not None
        if any(s not in states.TERMINAL_STATES for s in counts):
            wait.append(job_id)
            continue
        for state, n in counts.items():
            if state != states.COMPLETED:
                failed[state] = failed.get(state, 0) + n
    if failed and CONDITION_TYPE[spec.when] == "ok":
        what = ", ".join(f"{n} {s}" for s, n in sorted(failed.items()))
        raise _problem(spec, f"upstream {sweep_id} has ended without success ({what}): with when: ok this would "
                             f"never run. Resubmit the upstream first (hpcjobs resubmit {sweep_id}), or wait for "
                             "any ending (when: any, --after any:REF)")
    if wait and not capabilities_of(scheduler).dependencies:
        raise _problem(spec, f"upstream {sweep_id} has not ended, and the {scheduler} site cannot wait for it: "
                             "run this when it has ended")
    return tuple(wait)


def resolve_upstreams(specs: Sequence[UpstreamSpec], *, scheduler: str, root: str | Path | None = None,
                      client: SchedulerClient | None = None, site: str | None = None) -> list[ResolvedUpstream]:
    """Resolve each upstream to its ledger and, after one status poll of it, to the jobs to wait for.

    Args:
        specs: The upstreams (:func:`upstream_specs`).
        scheduler: The downstream's scheduler family (an upstream must use the same one).
        root: Folder of sweep folders.
        client: The scheduler client that polls the upstreams (``None``: the ledgers are read as they are).
        site: The downstream's site name (an upstream file without ``site:`` is looked up on it).

    Raises:
        ConfigError: An upstream not found or not yet submitted, on another scheduler, failed (``ok``), or
            still running while the site cannot wait for it.
    """
    from hpcjobs.sweep.poll import poll_status

    out: list[ResolvedUpstream] = []
    for spec in specs:
        folder = find_upstream(spec, root, site)
        if folder is None:
            if not capabilities_of(scheduler).dependencies:
                raise _problem(spec, f"upstream job {spec.ref}: the {scheduler} site cannot wait for a job")
            out.append(ResolvedUpstream(spec, None, None, (spec.ref,)))
            continue
        with Ledger.open(folder, allow_read_only=True) as ledger:
            meta = ledger.meta
            if meta.scheduler != scheduler:
                raise _problem(spec, f"upstream {meta.sweep_id} ran on {meta.scheduler} (site {meta.site}); this "
                                     f"runs on {scheduler}: a job can only wait for jobs of its own scheduler")
            if client is not None and not capabilities_of(meta.scheduler).runs_here:
                poll_status(ledger, client)
            out.append(ResolvedUpstream(spec, meta.sweep_id, folder, _wait_list(spec, ledger, scheduler)))
    return out


def dependencies(resolved: Sequence[ResolvedUpstream]) -> tuple[JobDependency, ...]:
    """The submission's dependencies: the jobs to wait for, grouped by the scheduler's condition."""
    groups: dict[str, list[str]] = {}
    for up in resolved:
        ids = groups.setdefault(CONDITION_TYPE[up.spec.when], [])
        ids += [j for j in up.wait_for if j not in ids]
    return tuple(JobDependency(cond, tuple(ids)) for cond, ids in groups.items() if ids)


def cancel_blocked(ledger: Ledger, client: SchedulerClient) -> list[str]:
    """Cancel this sweep's jobs that wait for an upstream that failed; record their points ``CANCELLED``.

    Asked only of a Slurm sweep with recorded upstreams and pending points: one ``squeue`` call (the
    backend's ``fallback_status_argv``, one line per array task with its pending reason) for its live
    jobs, one ``scancel`` for every job whose reason is ``DependencyNeverSatisfied``. The points get the
    state ``CANCELLED`` and the state text ``upstream failed: DependencyNeverSatisfied``; the cancelled
    job ids are noted in the ledger's ``upstreams`` table. On PBS the server has deleted such jobs
    itself: their points, finished (``F``) without an exit status, are recorded the same way
    (:data:`PBS_DELETED_STATE_RAW`), with no scheduler call.

    Returns:
        The job ids cancelled.
    """
    backend = client.backend
    if ledger.read_only or not ledger.upstreams():
        return []
    if backend.capabilities.failed_upstream == "deleted":
        return _deleted_by_server(ledger, backend)
    if backend.capabilities.failed_upstream != "blocked" or not backend.capabilities.status_fallback:
        return []
    if not ledger.summary().get(states.PENDING):
        return []
    ids = [s.job_id for s in ledger.live_submissions() if s.job_id]
    if not ids:
        return []
    try:
        result = client.run(backend.fallback_status_argv(ids), check=False)
        records = backend.parse_fallback_status(result.stdout)
    except HpcJobsError:
        return []  # the next status asks again
    blocked = [r for r in records if r.state == states.PENDING and (r.reason or "").startswith(BLOCKED_REASON)]
    if not blocked:
        return []
    jobs = list(dict.fromkeys(r.array_job_id or r.job_id for r in blocked))
    client.cancel(jobs)
    table = StatusTable.from_records([JobStatus(
        job_id=r.job_id, state=states.CANCELLED, state_raw=BLOCKED_STATE_RAW, array_job_id=r.array_job_id,
        array_task_id=r.array_task_id, array_task_spec=r.array_task_spec, reason=r.reason) for r in blocked])
    ledger.apply_status(table, job_key=job_key_of(backend))
    ledger.record_upstream_cancelled(jobs)
    return jobs


def settle_upstreams(experiment: Experiment, experiment_path: Path, scheduler: str, root: Path,
                     recorded: Sequence[UpstreamRecord], client: SchedulerClient | None,
                     cli: Sequence[UpstreamSpec] = (), site: str | None = None,
                     ) -> tuple[tuple[JobDependency, ...], list[UpstreamRecord]]:
    """The dependencies of a submission, and the records to keep in its ledger.

    Args:
        experiment: The experiment (its ``after:``).
        experiment_path: Its file (``after:`` files are relative to its folder).
        scheduler: The submission's scheduler family.
        root: The folder of sweep folders.
        recorded: What the submission's ledger recorded before (:meth:`hpcjobs.sweep.ledger.store.Ledger.upstreams`).
        client: Polls the upstreams once each (``None``: read their ledgers as they are, e.g. for a dry run).
        cli: ``--after`` upstreams.
        site: The submission's site name (upstream files are looked up on it).

    Raises:
        ConfigError: As :func:`resolve_upstreams`.
    """
    specs = upstream_specs([(u.sweep, u.when) for u in experiment.after], experiment_path, cli, recorded)
    if not specs:
        return (), []
    resolved = resolve_upstreams(specs, scheduler=scheduler, root=root, client=client, site=site)
    return dependencies(resolved), [r.record() for r in resolved]


def _deleted_by_server(ledger: Ledger, backend: SchedulerBackend) -> list[str]:
    """Points of jobs an OpenPBS server deleted for a dependency that cannot be met: ``CANCELLED``.

    qsub(1B): a job whose dependency cannot be satisfied is deleted by the server. On OpenPBS 23.06 its
    history record is ``F`` (substate 92) with no ``Exit_status``, which reads as ``UNKNOWN``
    (tests/data/pbs/openpbs-23.06_qstat-x-f-F-json_dependency_deleted.json); a job deleted by ``qdel`` has
    substate 91 and is ``CANCELLED`` already. In a sweep with upstreams such a point never ran because an
    upstream failed.
    """
    gone = [p for p in ledger.points(states.UNKNOWN)
            if (p.state_raw or "").strip() in ("F", "X", "C") and p.exit_code is None]
    if not gone:
        return []
    records = [JobStatus(job_id=p.job_id or p.array_job_id or "", state=states.CANCELLED,
                         state_raw=PBS_DELETED_STATE_RAW,
                         array_job_id=p.array_job_id if p.array_index is not None else None,
                         array_task_id=p.array_index) for p in gone]
    ledger.apply_status(StatusTable.from_records(records), job_key=job_key_of(backend))
    jobs = list(dict.fromkeys(p.array_job_id or p.job_id or "" for p in gone))
    ledger.record_upstream_cancelled(jobs)
    return jobs
