"""Single jobs (``hpcjobs submit``) recorded like one-point sweeps: submitted exactly once, found by job id.

**The request.** A single submission is identified by what it *means*, as a sweep is: the validated
experiment with its ``--set`` overrides (comments, key order and formatting do not count), the site,
and the folder it is submitted from (its working directory). Its id is ``<name>-<8 hex>``
(:func:`request_id`; the hash differs from the id a sweep of the same file would get). Running the
same ``hpcjobs submit`` again is the same request: it submits nothing and answers with the job
already recorded (and its state). A changed value, another ``--set`` or another folder is another
request and is submitted. ``--new`` submits another job of the same request
(``<id>-2``, ``-3``, ...); ``hpcjobs resubmit JOB_ID`` runs a finished one again as a new attempt.

**The ledger.** Each request has the ledger of a sweep of one point in
``<sweep root>/jobs/<request id>/`` (:class:`hpcjobs.sweep.ledger.store.Ledger`; ``meta.extra["kind"]`` is
``job``), so the exactly-once protocol, status polling, cancelling, lost-answer recovery and strays
are the sweep's own code: the point is planned with a fresh token in the job's tag
(``hpcjobs:<request id>:0:<token>``) *before* the scheduler is called; an ambiguous answer (a
timeout, a transient error, an id printed with a non-zero exit, output that is not an id) is looked
up by that token for up to ``$HPCJOBS_SUBMIT_LOOKUP_S`` seconds
(:func:`hpcjobs.sweep.lookup.await_tokens`); a run killed in between, or whose lookup could not
reach the scheduler, is settled by the next run before anything is submitted
(:meth:`hpcjobs.sweep.submitter.SweepSubmitter.resolve_unresolved` and ``cancel_strays``). Unlike a
sweep's chunks, the job is a plain job (no array) rendered as ``hpcjobs render`` shows it, its script
is ``<output_dir>/scripts/<name>.<token>.sh`` and its logs are the files its directives name.
Transient errors are retried with the sweep's backoff; a timeout or an unreadable answer whose token
the scheduler does not hold is reported (exit 1), and running the command again submits it.

**Job ids.** ``status``, ``logs``, ``cancel`` and ``resubmit`` take a single job's id: an index
maps it to its ledger (:mod:`hpcjobs.sweep.singles_read`, which also reads and lists the jobs).
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs import states, transport
from hpcjobs.errors import (
    CommandError,
    CommandTimeout,
    ConfigError,
    ConfigProblem,
    HpcJobsError,
    LedgerError,
    SchedulerOutputError,
    SubmitError,
)
from hpcjobs.schedulers.base import JobDependency, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient, client_for
from hpcjobs.schedulers.registry import capabilities_of
from hpcjobs.states import JobTag, new_token
from hpcjobs.submit import Submission, default_log_files
from hpcjobs.sweep.identity import IDENTITY_SCHEME, experiment_digest, sweep_folders
from hpcjobs.sweep.ledger.store import LEDGER_FILE, Ledger, SweepMeta
from hpcjobs.sweep.lookup import await_tokens
from hpcjobs.sweep.remote import recorded_places
from hpcjobs.sweep.singles_read import KIND, SingleJob, index_job, single_job_of, singles_root
from hpcjobs.transport import RemotePlaces

if TYPE_CHECKING:
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.render.script import RenderedScript
    from hpcjobs.sweep.prepare import PreparedSweep

log = logging.getLogger("hpcjobs.sweep")

# ----------------------------------------------------------------------------------------- the request


def request_id(experiment: Experiment, site: str, submit_dir: str | Path) -> str:
    """``<name>-<8 hex>`` of what a single submission means: the validated experiment, the site, and
    the folder it runs in (relative paths of its command and ``output_dir`` are relative to it).

    The hash includes a marker, so a single job never gets the id of a sweep of the same file.
    """
    payload = json.dumps(["job", experiment_digest(experiment), site, str(submit_dir)], separators=(",", ":"))
    return f"{experiment.name}-{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:8]}"


@dataclass(frozen=True)
class SingleRequest:
    """A checked, rendered single job and where its ledger goes (nothing written yet).

    Attributes:
        request_id: ``<name>-<8 hex>`` (``-2``... for ``--new``).
        folder: Its ledger folder.
        experiment_path: The experiment file.
        experiment: The validated experiment (``--set`` applied).
        site: The site config.
        rendered: The job and its script text.
        submit_dir: The job's working directory.
        how: What the ledger records to prepare it again (overrides, ``--site``, submit folder).
        remote: Where it goes on the login node its site names (``remote:``), or ``None`` (here).
    """

    request_id: str
    folder: Path
    experiment_path: Path
    experiment: Experiment
    site: SiteConfig
    rendered: RenderedScript
    submit_dir: Path
    how: dict[str, Any] = field(default_factory=dict)
    remote: RemotePlaces | None = None

    @property
    def name(self) -> str:
        """The job name."""
        return self.rendered.job.name

    def script_path(self, token: str) -> Path:
        """``<submit dir>/<output_dir>/scripts/<name>.<token>.sh``."""
        return self.submit_dir / self.rendered.job.output_dir / "scripts" / f"{self.name}.{token}.sh"

    def prepared(self, point: Any) -> PreparedSweep:
        """The request as a one-point sweep, for the sweep submitter's recovery methods."""
        from hpcjobs.sweep.prepare import PreparedSweep

        return PreparedSweep(self.request_id, self.folder, self.experiment_path, "", self.experiment, self.site,
                             self.rendered.job, (point,), self.submit_dir, remote=self.remote)


def prepare_single(path: str | Path, *, site: str | None = None, overrides: Sequence[str] = (),
                   root: str | Path | None = None, submit_dir: str | Path | None = None,
                   refresh_site: bool = False, new: bool = False, ask_scheduler: bool = True) -> SingleRequest:
    """Load, check and render an experiment as one job and name its request; nothing is written.

    Raises:
        ConfigError: Bad input, or a site without a scheduler (``local``).
    """
    from hpcjobs.config.loading import load_experiment
    from hpcjobs.render.script import load_site_for, render_job
    from hpcjobs.resolve import resolve

    experiment_path = Path(path).resolve()
    experiment, doc = load_experiment(experiment_path, tuple(overrides))
    site_config, site_file = load_site_for(experiment, site, ask_scheduler=ask_scheduler, refresh_site=refresh_site)
    job = resolve(experiment, site_config, doc=doc, site_file=site_file)
    rendered = render_job(job, template=experiment.template, doc=doc)
    if capabilities_of(job.scheduler).runs_here:
        raise ConfigError(ConfigProblem(
            f"site {job.site.name!r} has no scheduler to submit to: run it here with `hpcjobs sweep` (the local "
            "runner), or pass --site with a Slurm or PBS site (`hpcjobs site list`, `hpcjobs site init`)",
            key="site"))
    base = singles_root(root)
    where = Path(submit_dir or Path.cwd()).resolve()
    from hpcjobs.sweep.prepare import check_output_dirs

    check_output_dirs({job.output_dir}, where, doc)
    rid = request_id(experiment, site_config.name, where)
    taken = set(sweep_folders(base)) if new else set()
    if rid in taken:  # --new: the first free <id>-2, -3, ...
        n = 2
        while f"{rid}-{n}" in taken:
            n += 1
        rid = f"{rid}-{n}"
    how = {"kind": KIND, "name": job.name, "identity": IDENTITY_SCHEME, "overrides": list(overrides),
           "site_arg": site, "submit_dir": str(where), "output_dir": job.output_dir,
           "default_logs": default_log_files(rendered)}
    return SingleRequest(rid, base / rid, experiment_path, experiment, site_config, rendered, where, how)


def _one_point() -> Any:
    from hpcjobs.sweep.points.expand import expand

    return expand(None)[0]


def _open_ledger(request: SingleRequest) -> Ledger:
    meta = SweepMeta(request.request_id, str(request.experiment_path), experiment_digest(request.experiment),
                     request.site.name, request.site.scheduler, dict(request.how))
    return Ledger.create(request.folder, meta, [_one_point()])


# ----------------------------------------------------------------------------------------- submitting


def submit_single(path: str | Path, *, site: str | None = None, overrides: Sequence[str] = (),
                  submit_dir: str | Path | None = None, refresh_site: bool = False, root: str | Path | None = None,
                  new: bool = False, client: SchedulerClient | None = None, lookup_s: float | None = None,
                  sleep: Callable[[float], None] = time.sleep, user: str | None = None,
                  after: Sequence[str] = (), remote: str | None = None) -> Submission:
    """Submit an experiment as one job, exactly once per request (see the module documentation).

    Args:
        path: The experiment file.
        site: Site override.
        overrides: ``--set`` overrides.
        submit_dir: The job's working directory (default: the current one).
        refresh_site: Discover this machine's cluster again.
        root: Folder of sweep folders.
        new: Submit another job of the same request.
        client: The scheduler client (default: the site's).
        lookup_s: Seconds to look for the job after an ambiguous answer (default:
            ``$HPCJOBS_SUBMIT_LOOKUP_S``, else 60).
        sleep: Injected for tests.
        user: Whose jobs the tag lookups list (default: the current user).
        after: ``--after`` upstreams (``[WHEN:]REF``): with the experiment's ``after:`` and what the ledger
            recorded, the job waits for them (:mod:`hpcjobs.sweep.pipeline`).

    Returns:
        The job: submitted now (``new``), found by its token after an earlier run lost the answer
        (``recovered``), or submitted before by the same request.

    Raises:
        ConfigError: Bad input (nothing written or submitted).
        CommandError: The scheduler refused the job.
        SubmitError: An ambiguous answer could not be settled, or transient errors outlasted the retries.
        LedgerError: Another ``hpcjobs submit`` of the same request holds its lock.
    """
    with transport.scope():  # a site's login node (`remote:`): one SSH connection for the whole call
        request = over_ssh(prepare_single(path, site=site, overrides=overrides, root=root, submit_dir=submit_dir,
                                          refresh_site=refresh_site, new=new), remote)
        if request.experiment.tracking is not None:
            log.warning("%s: tracking: gives sweep points their tracker runs; the one job of `hpcjobs submit` "
                        "gets none (run it as a sweep: hpcjobs sweep)", path)
        return _submit_new(request, client=client, lookup_s=lookup_s, sleep=sleep, user=user, after=after)


def over_ssh(request: SingleRequest, remote_option: str | None = None) -> SingleRequest:
    """``request`` with its places on its site's login node (``remote:``, or ``--remote [USER@]HOST[:PORT]``),
    recorded in its ledger; as it is without one. Inside a :func:`hpcjobs.transport.scope`.
    """
    from hpcjobs.sweep.request import login_node_of

    login = login_node_of(request.site, request.experiment, str(request.experiment_path), None, remote_option)
    if login is None:
        return request
    from hpcjobs.sweep.remote import check_code_sync

    check_code_sync(request.site, request.submit_dir)
    places = transport.places_for(login, request.request_id, request.folder)
    return replace(request, remote=places, how={**request.how, "remote": places.as_dict()})


def _submit_new(request: SingleRequest, *, client: SchedulerClient | None, lookup_s: float | None,
                sleep: Callable[[float], None], user: str | None, after: Sequence[str]) -> Submission:
    c = client or client_for(request.site.scheduler)
    from hpcjobs.sweep.pipeline import parse_after_option

    cli_after = tuple(parse_after_option(a) for a in after)
    upstreams = None
    if not (request.folder / LEDGER_FILE).is_file():  # a new request: a missing upstream stops it unwritten
        upstreams = _upstreams(request, (), c, cli_after)
    with _open_ledger(request) as ledger:
        return _submit_request(request, ledger, c, lookup_s=lookup_s, sleep=sleep, user=user, cli_after=cli_after,
                               upstreams=upstreams)[0]


def _upstreams(request: SingleRequest, recorded: Sequence[Any], client: SchedulerClient,
               cli_after: Sequence[Any]) -> tuple[tuple[JobDependency, ...], list[Any]]:
    """The job's dependencies and their ledger records (:func:`hpcjobs.sweep.pipeline.settle_upstreams`)."""
    from hpcjobs.sweep.pipeline import settle_upstreams

    return settle_upstreams(request.experiment, request.experiment_path, request.site.scheduler,
                            request.folder.parent.parent, recorded, client, cli_after, request.site.name)


def _retry_policy(lookup_s: float | None) -> Any:
    from hpcjobs.sweep.submitter import RetryPolicy

    return RetryPolicy() if lookup_s is None else RetryPolicy(lookup_s=lookup_s)


def _submit_request(request: SingleRequest, ledger: Ledger, client: SchedulerClient, *, lookup_s: float | None,
                    sleep: Callable[[float], None], user: str | None,
                    reset: Sequence[str] = (), cli_after: Sequence[Any] = (),
                    upstreams: tuple[tuple[JobDependency, ...], list[Any]] | None = None) -> tuple[Submission, int]:
    """Under the request's lock: settle what an earlier run left open, reset a finished job whose state is
    in ``reset`` (resubmit), then submit the point if it is pending.

    Returns:
        The job, and how many points were reset (0 or 1).
    """
    from hpcjobs.sweep.poll import poll_status
    from hpcjobs.sweep.submitter import SweepSubmitter

    retry = _retry_policy(lookup_s)
    who = user or (request.remote.user if request.remote is not None else getpass.getuser())
    with ledger.lock():
        point = ledger.points()[0]
        helper = SweepSubmitter(request.prepared(point), ledger, client, retry=retry, sleep=sleep, user=who)
        recovered = helper.resolve_unresolved() > 0
        helper.cancel_strays()
        n_reset = 0
        if reset:
            poll_status(ledger, client)  # the current state decides (a failed poll fails the resubmit)
            from hpcjobs.sweep.lookup import still_queued

            chosen = ledger.points(list(reset))
            queued = still_queued(client, chosen)  # finished in accounting, queued again (requeued): left alone
            if queued:
                log.warning("job %s is queued again by the scheduler (requeued): not resubmitted",
                            ", ".join(queued.values()))
            n_reset = ledger.reset_for_resubmit([p.point_id for p in chosen if p.point_id not in queued])
        submitted = False
        if ledger.pending_points():
            deps, records = upstreams or _upstreams(request, ledger.upstreams(), client, cli_after)
            ledger.record_upstreams(records)
            job_id = _submit_once(request, ledger, client, retry=retry, sleep=sleep, user=who, after=deps)
            index_job(request.folder.parent, job_id, request.request_id)
            submitted = True
        elif not recovered:
            _poll_quietly(ledger, client, poll_status)
        job = single_job_of(ledger, request.folder)
    if recovered and job.job_id:
        index_job(request.folder.parent, job.job_id, request.request_id)
    return _as_submission(job, new=submitted, recovered=recovered), n_reset


def _poll_quietly(ledger: Ledger, client: SchedulerClient, poll: Callable[[Ledger, SchedulerClient], int]) -> None:
    """One status call for the job's current state; a scheduler that does not answer changes nothing."""
    try:
        poll(ledger, client)
    except HpcJobsError as exc:
        log.warning("could not ask the scheduler for the job's state: %s", exc)


def _submit_once(request: SingleRequest, ledger: Ledger, client: SchedulerClient, *, retry: Any,
                 sleep: Callable[[float], None], user: str, after: tuple[JobDependency, ...] = ()) -> str:
    """Submit the pending point as a plain job: the sweep's protocol for one chunk of one point.

    Raises:
        CommandError: A clear refusal (nothing queued; the script is removed).
        SubmitError: Not queued after an ambiguous answer, transient errors outlasted ``retry``, or
            the queue could not be read to settle an ambiguous answer (the next run looks it up).
    """
    from hpcjobs.containers.pull import pull_images
    from hpcjobs.output import atomic_write_text
    from hpcjobs.safe_files import user_folder
    from hpcjobs.sweep.chunks import is_transient

    (point,) = ledger.pending_points()
    user_folder(request.submit_dir / request.rendered.job.output_dir, what="output_dir")
    job = request.rendered.job
    if job.container is not None:  # containers.pull: submit fetches the image before the job is queued
        pull_images([job.container], job.scheduler)
    last: HpcJobsError | None = None
    for attempt in range(1, retry.attempts + 1):
        token = new_token(ledger.path.parent)
        options = SubmitOptions(comment=JobTag(request.request_id, 0, token).render(), after=after)
        script = atomic_write_text(request.script_path(token), request.rendered.text, mode=0o700,
                                   below=request.submit_dir / request.rendered.job.output_dir)
        argv = client.backend.submit_argv(script, options)
        ledger.plan_chunk([point.point_id], 0, token=token, argv=argv, array=False)  # before the scheduler call
        try:
            job_script, cwd = _staged(request, script)
        except CommandError as exc:  # the submit command never ran: surely not queued, try again
            last = exc
            ledger.mark_failed(token, f"not submitted: the job script did not reach the login node\n{exc}")
            sleep(retry.delay(attempt))
            continue
        try:
            job_id = client.submit(job_script, options, cwd=cwd)
        except (CommandError, SchedulerOutputError) as exc:
            error: HpcJobsError = exc
        else:
            ledger.mark_submitted(token, job_id)
            return job_id
        last = error
        stdout, stderr = getattr(error, "stdout", "") or "", getattr(error, "stderr", "") or ""
        code = getattr(error, "returncode", None)
        transient = is_transient(stderr)
        printed = _printed_id(client, stdout) if code else None
        if isinstance(error, CommandError) and not isinstance(error, CommandTimeout) and code != 0 \
                and not transient and printed is None:
            ledger.mark_failed(token, stderr or str(error))  # refused, or the command could not be started
            script.unlink(missing_ok=True)
            raise error
        why = stderr.strip() or str(error)
        ledger.mark_unknown(token, why + (f"\n(printed job id {printed})" if printed else ""))
        look = await_tokens(client, {token}, request.request_id, request.name, user, seconds=retry.lookup_s,
                            sleep=sleep, initial=retry.lookup_initial)
        if token in look.found:
            return _accept(ledger, client, token, look.found[token], printed)
        last_line = why.splitlines()[-1] if why else "no answer"
        if not look.conclusive:
            raise SubmitError(f"job {request.name} ({request.request_id}): the scheduler's answer was ambiguous "
                              f"({last_line}) and its queue could not be read to tell whether the job was queued; "
                              "run the same command again: it looks the submission up before submitting "
                              "anything") from error
        ledger.mark_failed(token, f"{why}\nnot in the scheduler {look.waited:.0f} s after an ambiguous answer")
        if not transient:
            raise SubmitError(f"job {request.name} ({request.request_id}) was not submitted: the scheduler's answer "
                              f"was ambiguous ({last_line}) and no job carries its token {look.waited:.0f} s later; "
                              "run the same command again to submit it") from error
        log.warning("job %s was not queued after a transient error (%s); retrying", request.name, last_line)
        sleep(max(0.0, retry.delay(attempt) - look.waited))
    raise SubmitError(f"job {request.name} ({request.request_id}) could not be submitted after {retry.attempts} "
                      "attempts; run the same command again") from last


def _staged(request: SingleRequest, script: Path) -> tuple[Path, str | Path]:
    """The script and the folder the scheduler submits from: here, or the login node's copy, sent first."""
    places = request.remote
    if places is None:
        return script, request.submit_dir
    from hpcjobs.sweep.remote import send_code
    from hpcjobs.transport.files import push

    send_code(places, request.site, request.submit_dir, {})  # the site's remote.sync: the code the job runs
    relative = script.relative_to(request.submit_dir)
    push(transport.use(places.login), script.parent, places.in_workdir(relative.parent.as_posix()),
         skip=lambda rel: rel != script.name, sent={}, also_make=[places.in_workdir(request.rendered.job.output_dir)])
    return Path(places.workdir) / relative, places.workdir


def _printed_id(client: SchedulerClient, stdout: str) -> str | None:
    """A job id a failed submit command printed anyway (a hint; the tag decides)."""
    if not stdout.strip():
        return None
    try:
        return str(client.backend.parse_submit(stdout))
    except Exception:
        return None


def _accept(ledger: Ledger, client: SchedulerClient, token: str, jobs: list[str], printed: str | None) -> str:
    """Record the job found under ``token`` (the printed id if it is one of them); cancel any second one."""
    keep = printed if printed in jobs else jobs[0]
    ledger.mark_submitted(token, keep)
    extra = [j for j in jobs if j != keep]
    if extra:
        log.warning("cancelling a second job with the token of job %s: %s", keep, " ".join(extra))
        try:
            result = client.run(client.backend.cancel_argv(extra), check=False)
            action = "cancelled" if result.returncode == 0 else f"cancel exited {result.returncode}"
        except HpcJobsError as exc:
            action = f"cancel failed: {exc}"
        for j in extra:
            ledger.record_stray(j, token, action, f"a second job with the token of job {keep}")
    return keep


def _as_submission(job: SingleJob, *, new: bool, recovered: bool) -> Submission:

    if job.job_id is None:  # cancelled before it was ever submitted
        raise SubmitError(f"job {job.name} ({job.request_id}) was cancelled before it was submitted; "
                          "`hpcjobs submit --new` submits it")
    tag = JobTag(job.request_id, 0, job.token or "0" * 16)
    return Submission(job.job_id, job.script or Path(), tag, job.site, job.scheduler, job.stdout, job.stderr,
                      job.request_id, new, job.state, recovered, job.folder)


# ----------------------------------------------------------------------------------------- resubmitting


def resubmit_single(folder: str | Path, *, which: Sequence[str] = tuple(sorted(states.FAILURE_STATES)),
                    overrides: Sequence[str] = (), scale_walltime: float | None = None, force: bool = False,
                    client: SchedulerClient | None = None, lookup_s: float | None = None,
                    sleep: Callable[[float], None] = time.sleep, user: str | None = None) -> tuple[Submission, int]:
    """Submit a finished single job again (a new attempt in its ledger) when its state is in ``which``.

    The request is prepared again from what its ledger recorded (the file, ``--set`` overrides,
    ``--site``, submit folder) plus ``overrides`` and ``scale_walltime`` for this attempt.

    Returns:
        The job (``new`` when an attempt was submitted) and how many points were reset (0 or 1).

    Raises:
        LedgerError: The experiment file's meaning changed since the job was submitted (``force``
            goes on), or the ledger cannot be read.
        ConfigError: No wall time to scale, or bad overrides.
    """
    from hpcjobs.config.loading import load_experiment

    d = Path(folder)
    with Ledger.open(d) as ledger:
        meta = ledger.meta
    how = meta.extra
    recorded = list(how.get("overrides", []))
    extra = list(overrides)

    def again(more: Sequence[str]) -> SingleRequest:
        req = prepare_single(meta.experiment_path, site=how.get("site_arg"), overrides=[*recorded, *more],
                             root=d.parent.parent, submit_dir=how.get("submit_dir"))
        return replace(req, request_id=meta.sweep_id, folder=d, how=dict(how))

    request = again(extra)
    if scale_walltime:
        walltime = request.rendered.job.walltime
        if walltime is None:
            raise ConfigError(ConfigProblem("the job has no wall time to scale; use --set resources.walltime=...",
                                            key="resources.walltime"))
        from hpcjobs.units import format_walltime_slurm

        extra.append(f"resources.walltime={format_walltime_slurm(int(walltime * scale_walltime))}")
        request = again(extra)
    planned = request.experiment if not extra else load_experiment(meta.experiment_path, tuple(recorded))[0]
    if experiment_digest(planned) != meta.experiment_sha256 and not force:
        raise LedgerError(f"{meta.experiment_path} changed since job {meta.sweep_id} was submitted; use --force to "
                          "go on with the new text")
    with transport.scope():  # a job on a login node: where its ledger says, over one SSH connection
        places = recorded_places(meta)
        if places is not None:
            transport.use(places.login)
            request = replace(request, remote=places)
        c = client or client_for(request.site.scheduler)
        with Ledger.open(d) as ledger:
            return _submit_request(request, ledger, c, lookup_s=lookup_s, sleep=sleep, user=user,
                                   reset=tuple(which))


__all__ = ["SingleRequest", "over_ssh", "prepare_single", "request_id", "resubmit_single", "submit_single"]
