"""Submitting a sweep exactly once: chunked job arrays, retries, lost answers, resumption.

The protocol (the ledger's module documentation explains why it is crash-safe)::

    write chunks/<n>.ids and chunks/<n>.env of every chunk of pending points   (atomically, one pass)
    for each chunk:
        token = new_token()                          # in the job's comment: hpcjobs:<sweep>:<chunk>:<token>
        write scripts/<n>.<token>.sh                 (atomically)
        ledger.plan_chunk(ids, n, token=token)       # committed BEFORE the scheduler call
        sbatch ...                                   # the only step outside the ledger
        ledger.mark_submitted(token, job_id)

A refused submission (``mark_failed``) returns its points to the pending pool. An ambiguous
answer (a timeout, a transient error, an id printed with a non-zero exit, output that is not an
id) is followed by polling for the submission's token in the scheduler, with backoff, for up to
:attr:`RetryPolicy.lookup_s` seconds (:mod:`hpcjobs.sweep.lookup`); only a token the scheduler
conclusively does not have is retried, under a new token. Ids printed with exit 0 are checked
against the tags in one query after the run (a wrong id is corrected; an id that does not exist is
marked lost and its points go again). At the start of every run, attempts left open by a crash are
resolved, and late arrivals of attempts given up for lost are adopted while their points are still
pending, else cancelled and recorded as strays (:meth:`SweepSubmitter.cancel_strays`).
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs.containers.pull import PulledImage, pull_images
from hpcjobs.errors import CommandError, CommandTimeout, HpcJobsError, SubmitError, reading_output_of
from hpcjobs.resolve import ResolvedJob
from hpcjobs.safe_files import user_folder
from hpcjobs.schedulers import limits_cache
from hpcjobs.schedulers.base import ClusterLimits, JobDependency, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.states import JobTag, made_for
from hpcjobs.sweep.chunk_files import write_chunk_files
from hpcjobs.sweep.chunks import Chunk, chunk_capacity, is_queue_full, is_transient, plan_chunks, room_in_queue
from hpcjobs.sweep.identity import IDENTITY_SCHEME, experiment_digest, ledger_digest
from hpcjobs.sweep.ledger.store import SUB_FAILED, Ledger, SweepMeta, new_token
from hpcjobs.sweep.lookup import TagLookup, await_tokens, default_lookup_seconds, numeric_job_order
from hpcjobs.sweep.lookup import tagged_jobs as _tagged_jobs_query
from hpcjobs.sweep.pack import active_pack, pack_size, tasks_for
from hpcjobs.sweep.points.shapes import chunk_job, group_by_shape
from hpcjobs.sweep.prepare import PreparedSweep, chunk_script_text, render_chunk_script

log = logging.getLogger("hpcjobs.sweep")


@dataclass
class RetryPolicy:
    """Exponential backoff for transient scheduler errors, and how long to look for a lost submission.

    Attributes:
        attempts: Submissions of one chunk before giving up.
        initial: First wait between attempts (seconds), growing by ``factor`` up to ``maximum``.
        lookup_s: After an ambiguous answer, how long to poll the scheduler for the submission's
            tag before declaring it not submitted (default: ``$HPCJOBS_SUBMIT_LOOKUP_S``, else 60).
        lookup_initial: First wait between those polls (doubling up to 15 s).
    """

    attempts: int = 6
    initial: float = 2.0
    factor: float = 2.0
    maximum: float = 120.0
    lookup_s: float = field(default_factory=default_lookup_seconds)
    lookup_initial: float = 1.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return float(min(self.initial * self.factor ** (attempt - 1), self.maximum))


@dataclass
class SubmitReport:
    """What one run of the submitter did."""

    sweep_id: str
    points: int
    chunks_submitted: int = 0
    points_submitted: int = 0
    recovered: int = 0
    job_ids: list[str] = field(default_factory=list)
    strays_cancelled: list[str] = field(default_factory=list)
    lost: int = 0
    dry_run_commands: list[list[str]] = field(default_factory=list)
    dry_run_script: str | None = None
    #: Images ``containers.pull: submit`` made ready before the first job (fetched now, or reused).
    images: list[PulledImage] = field(default_factory=list)


#: Called as ``progress(points_submitted, points_pending_at_start)``.
Progress = Callable[[int, int], None]


def open_ledger(prepared: PreparedSweep, *, force: bool = False, how: Mapping[str, object] | None = None) -> Ledger:
    """Create (or reopen, if the same sweep was planned before) the sweep's ledger.

    ``how`` records how the sweep was asked for (overrides, sweep arguments, site), so that
    ``hpcjobs resubmit`` and a detached local runner can prepare it again from the ledger alone.
    The change check compares the experiment's meaning (:func:`hpcjobs.sweep.identity.ledger_digest`),
    so editing comments or key order is not a change.
    """
    digest = ledger_digest(prepared)
    scheme = {"identity": IDENTITY_SCHEME} if digest == experiment_digest(prepared.experiment) else {}
    meta = SweepMeta(
        sweep_id=prepared.sweep_id,
        experiment_path=str(prepared.experiment_path),
        experiment_sha256=digest,
        site=prepared.site.name,
        scheduler=prepared.site.scheduler,
        extra={"name": prepared.experiment.name, **scheme, **(how or {}),
               **({"pack": pack.model_dump(exclude_none=True)} if (pack := active_pack(prepared)) else {})},
    )
    return Ledger.create(prepared.folder, meta, prepared.points, force=force)


def stays_here(relative: str) -> bool:
    """Whether a path of a sweep folder stays on this machine when the sweep runs on a login node.

    The ledger and its lock are the source of truth here; run folders (``points/``) are written by the
    jobs there and come back (:func:`hpcjobs.transport.files.pull`); the rest is what jobs read.
    """
    first = relative.split("/", 1)[0]
    return first.startswith("ledger.sqlite") or first in {"lock", "points", "local-runner.log"} or \
        relative.endswith(".tmp")


class SweepSubmitter:
    """Submits a prepared sweep's pending points to a scheduler, exactly once.

    Args:
        prepared: The sweep (:func:`hpcjobs.sweep.prepare.prepare_sweep`).
        ledger: Its open ledger.
        client: The scheduler client.
        throttle: At most this many tasks of one array run at once (``%N``).
        retry: Backoff for transient errors.
        progress: Called after each chunk.
        sleep: Injected for tests.
        user: Whose queue counts against submit limits (default: the current user).
        after: Jobs every chunk waits for (pipelines: :func:`hpcjobs.sweep.pipeline.dependencies`).
        images: The images :func:`pull_sweep_images` made ready already (``None``: fetch them before the
            first chunk).
    """

    def __init__(self, prepared: PreparedSweep, ledger: Ledger, client: SchedulerClient, *,
                 throttle: int | None = None, retry: RetryPolicy | None = None,
                 progress: Progress | None = None, sleep: Callable[[float], None] = time.sleep,
                 user: str | None = None, after: tuple[JobDependency, ...] = (),
                 images: list[PulledImage] | None = None) -> None:
        self.prepared = prepared
        self.images = images
        self.ledger = ledger
        self.client = client
        self.throttle = throttle if throttle is not None else prepared.site.limits.array_throttle
        self.retry = retry or RetryPolicy()
        self.progress = progress
        self.sleep = sleep
        self.user = user or (prepared.remote.user if prepared.remote is not None else getpass.getuser())
        self.after = after
        #: Ids printed with exit 0 in this run, by token, checked against the tags at its end.
        self._printed: dict[str, str] = {}
        #: Files of the sweep folder sent to the login node in this run (path -> size, mtime).
        self._sent: dict[str, tuple[int, int]] = {}
        #: Files of the site's ``remote.sync`` sent to the login node's workdir in this run.
        self._code_sent: dict[str, tuple[int, int]] = {}

    # ------------------------------------------------------------------------------ entry point

    def submit(self, *, dry_run: bool = False) -> SubmitReport:
        """Resolve what a previous run left open, then submit every pending point.

        Raises:
            LedgerError: Another process is submitting this sweep.
            SubmitError: The scheduler refused a chunk for a reason retrying will not fix, transient
                errors outlasted the retry policy, or the scheduler could not be asked whether an
                ambiguous submission was queued (what was submitted stays recorded; run again).
        """
        report = SubmitReport(self.prepared.sweep_id, len(self.prepared.points))
        with self.ledger.lock():
            if not dry_run:
                report.recovered = self.resolve_unresolved()
                report.strays_cancelled = self.cancel_strays()
            limits = self._limits()
            capacity = chunk_capacity(limits.max_array_size if limits else None,
                                      self.prepared.site.limits.max_array_size)
            user_limit = (self.prepared.site.limits.max_submitted_jobs
                          or (limits.max_submit_jobs if limits else None))
            if user_limit:  # a chunk must fit the submit limit by itself: it then trickles in as room frees
                capacity = max(1, min(capacity, user_limit))
            capacity *= pack_size(self.prepared)  # points per chunk: K per array task when packed
            if not dry_run:
                for out_dir in {s.job.output_dir for s in self.prepared.shapes} or {self.prepared.job.output_dir}:
                    user_folder(self.prepared.submit_dir / out_dir, what="output_dir")
                if self.ledger.pending_ids():  # fetched by the caller already, or now
                    report.images = self.images if self.images is not None else pull_sweep_images(self.prepared)
            for _round in range(self.retry.attempts):
                pending = self.ledger.pending_ids()
                chunks = self._plan(pending, capacity)
                if not dry_run:
                    write_chunk_files(self.prepared, chunks)  # one pass over the points for all of them
                for chunk in chunks:
                    if dry_run:
                        report.dry_run_commands.append(self._argv(chunk, "0" * 16))
                        if report.dry_run_script is None:
                            report.dry_run_script = chunk_script_text(self.prepared, chunk.number, chunk.size,
                                                                      self.throttle, "0" * 16, self._job_of(chunk))
                        continue
                    self._wait_for_room(tasks_for(chunk.size, pack_size(self.prepared)), user_limit)
                    job_id = self._submit_chunk(chunk)
                    report.chunks_submitted += 1
                    report.points_submitted += chunk.size
                    report.job_ids.append(job_id)
                    if self.progress:
                        self.progress(report.points_submitted, len(pending))
                if dry_run:
                    break
                lost = self._verify_printed_ids(report)
                if not lost:
                    break
                report.lost += lost
        return report

    # ------------------------------------------------------------------------------ one chunk

    def _plan(self, pending: list[str], capacity: int) -> list[Chunk]:
        """Chunks of the pending points: one array (or more, chunked) per job shape, numbered in order."""
        chunks: list[Chunk] = []
        number = self._next_chunk_number()
        for _shape, ids in group_by_shape(pending, self.prepared.shape_of):
            planned = plan_chunks(ids, capacity, number)
            chunks += planned
            number += len(planned)
        return chunks

    def _job_of(self, chunk: Chunk) -> ResolvedJob:
        return chunk_job(self.prepared.shapes, self.prepared.shape_of, chunk.point_ids, self.prepared.job)

    def _argv(self, chunk: Chunk, token: str) -> list[str]:
        script = self.prepared.folder / "scripts" / f"{chunk.number}.{token}.sh"
        return self.client.backend.submit_argv(script, self._options(chunk, token))

    def _options(self, chunk: Chunk, token: str) -> SubmitOptions:
        return SubmitOptions(comment=JobTag(self.prepared.sweep_id, chunk.number, token).render(), after=self.after)

    def _submit_chunk(self, chunk: Chunk) -> str:
        """Submit one chunk: retry what surely failed, look up what may have been queued."""
        last_error: CommandError | None = None
        for attempt in range(1, self.retry.attempts + 1):
            token = new_token(self.prepared.folder)  # the chunk's .ids and .env files are written (write_chunk_files)
            script = render_chunk_script(self.prepared, chunk.number, chunk.size, self.throttle, token,
                                         self._job_of(chunk))
            argv = self.client.backend.submit_argv(script, self._options(chunk, token))
            self.ledger.plan_chunk(chunk.point_ids, chunk.number, token=token, argv=argv,
                                   pack=pack_size(self.prepared))
            error: CommandError | None = None
            try:
                job_script = self._stage(script)  # over SSH: the login node's copy, sent first
            except CommandError as exc:  # the submit command never ran: surely not queued, try again
                last_error = exc
                self.ledger.mark_failed(token, f"not submitted: the job's files did not reach the login node\n{exc}")
                log.warning("chunk %d: its files did not reach the login node (%s); retrying", chunk.number,
                            exc.reason or exc)
                self.sleep(self.retry.delay(attempt))
                continue
            try:
                job_id = self.client.submit(job_script, self._options(chunk, token), cwd=self.prepared.job_submit_dir)
            except CommandError as exc:  # CommandTimeout included
                error = exc
            except HpcJobsError as exc:  # exit 0 but no job id in the output: did it queue?
                error = CommandError(argv, 0, "", str(exc))
            else:
                self.ledger.mark_submitted(token, job_id)
                self._printed[token] = job_id
                return job_id
            last_error = error
            printed = self._printed_id(error)
            refused = (error.returncode is not None and error.returncode != 0 and not is_transient(error.stderr)
                       and not error.stdout.strip())
            why = error.stderr.strip() or str(error)
            if refused:
                self.ledger.mark_failed(token, error.stderr)
                raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id} was refused:\n"
                                  f"{error}") from error
            self.ledger.mark_unknown(token, why + (f"\n(printed job id {printed})" if printed else ""))
            look = self._await({token})
            if token in look.found:
                return self._accept(token, look.found[token], printed)
            if not look.conclusive:
                raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id}: the scheduler's answer "
                                  f"was ambiguous ({why.splitlines()[-1] if why else 'no answer'}) and its queue "
                                  "could not be read to tell whether the job was queued; run the same command "
                                  "again: it looks the submission up before submitting anything") from error
            self.ledger.mark_failed(token, f"{why}\nnot in the scheduler {look.waited:.0f} s after an ambiguous "
                                           "answer")
            if not is_transient(error.stderr) and not isinstance(error, CommandTimeout) and error.returncode:
                raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id} was refused:\n"
                                  f"{error}") from error
            if is_queue_full(error.stderr):
                log.info("queue full; waiting before chunk %d", chunk.number)
            log.warning("chunk %d was not queued after an ambiguous answer (%s); retrying", chunk.number,
                        why.splitlines()[-1] if why else "no answer")
            self.sleep(max(0.0, self.retry.delay(attempt) - look.waited))
        raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id} could not be submitted after "
                          f"{self.retry.attempts} attempts; run the same command again to resume") from last_error

    def _stage(self, script: Path) -> Path:
        """The script as the scheduler will read it: ``script`` here, or its login node copy, sent first.

        Over SSH, every file of the sweep folder that jobs read and that changed since the last send
        (this script, the chunk files) goes in one session, with the jobs' output folders made there.
        """
        places = self.prepared.remote
        if places is None:
            return script
        from hpcjobs import transport
        from hpcjobs.sweep.remote import send_code
        from hpcjobs.transport.files import push

        send_code(places, self.prepared.site, self.prepared.submit_dir, self._code_sent)  # remote.sync
        session = transport.use(places.login)
        out_dirs = sorted({s.job.output_dir for s in self.prepared.shapes} or {self.prepared.job.output_dir})
        made = [places.in_workdir(d) for d in out_dirs]
        push(session, self.prepared.folder, places.folder, skip=stays_here, sent=self._sent, also_make=made)
        return Path(places.folder) / script.relative_to(self.prepared.folder)

    def _printed_id(self, error: CommandError) -> str | None:
        """A job id a failed submit command printed anyway (kept as a hint; the tag decides)."""
        if not error.stdout.strip():
            return None
        try:
            return str(self.client.backend.parse_submit(error.stdout))
        except Exception:
            return None

    def _accept(self, token: str, jobs: list[str], printed: str | None = None) -> str:
        """Record the job found under ``token`` (the printed id if it is one of them); cancel extra jobs."""
        keep = printed if printed in jobs else jobs[0]
        self.ledger.mark_submitted(token, keep)
        extra = [j for j in jobs if j != keep]
        if extra:
            self._cancel(extra, token, f"a second job with the token of job {keep}")
        return keep

    def _verify_printed_ids(self, report: SubmitReport) -> int:
        """Check the ids printed with exit 0 in this run against the scheduler's tags (one query per poll).

        A wrong id is replaced by the one carrying the token; an id with no job behind it is marked
        lost (its points are pending again). Inconclusive queries change nothing: the status polls
        check the ids again later (:func:`hpcjobs.sweep.lookup.settle_unseen`).

        Returns:
            How many submissions were marked lost.
        """
        printed, self._printed = self._printed, {}
        if not printed:
            return 0
        look = self._await(set(printed))
        lost = 0
        for token, job_id in printed.items():
            jobs = look.found.get(token)
            if jobs:
                if job_id not in jobs:
                    log.warning("the submit command printed job id %s, but the scheduler holds the submission as "
                                "%s", job_id, jobs[0])
                    self.ledger.correct_job_id(token, jobs[0], "the submit command printed a wrong id")
                    if job_id in report.job_ids:  # the first left: several attempts may print the same wrong id
                        report.job_ids[report.job_ids.index(job_id)] = jobs[0]
                extra = [j for j in jobs if j != (job_id if job_id in jobs else jobs[0])]
                if extra:
                    self._cancel(extra, token, "a second job with the token of an accepted submission")
            elif look.conclusive and not self._known(job_id):
                self.ledger.mark_lost(token, "was printed by the submit command, but the scheduler knows no such "
                                             f"job and none with token {token}")
                log.warning("job id %s printed by the submit command does not exist; its points go again", job_id)
                if job_id in report.job_ids:
                    report.job_ids.remove(job_id)
                lost += 1
        return lost

    def _known(self, job_id: str) -> bool:
        """Whether the scheduler reports anything about ``job_id`` (one status call; errors count as known)."""
        try:
            return self.client.covers(self.client.status([job_id]), job_id)
        except HpcJobsError:
            return True

    # ------------------------------------------------------------------------------ lost answers

    def _query(self, *, history: bool = True, backlog: bool = True) -> TagLookup:
        return _tagged_jobs_query(self.client, self.prepared.sweep_id, self.prepared.experiment.name, self.user,
                                  history=history, backlog=backlog)

    def _await(self, tokens: set[str], seconds: float | None = None) -> TagLookup:
        return await_tokens(self.client, tokens, self.prepared.sweep_id, self.prepared.experiment.name, self.user,
                            seconds=self.retry.lookup_s if seconds is None else seconds, sleep=self.sleep,
                            initial=self.retry.lookup_initial)

    def _tagged_jobs(self) -> dict[str, list[str]]:
        """Token → job ids carrying it, for this sweep's jobs the scheduler knows (live and finished)."""
        return self._query().found

    def resolve_unresolved(self) -> int:
        """Settle submissions a crash or a lost answer left open: found → submitted, else failed.

        Attempts made less than :attr:`RetryPolicy.lookup_s` ago are given the rest of that time to
        appear. An attempt is marked failed only when the scheduler's queue answered without it.

        Returns:
            How many were found in the scheduler.

        Raises:
            SubmitError: The scheduler's queue could not be read (nothing is marked failed).
        """
        open_subs = self.ledger.unresolved_submissions()
        if not open_subs:
            return 0
        youngest = max(s.updated_at for s in open_subs)
        look = self._await({s.token for s in open_subs},
                           seconds=max(0.0, min(self.retry.lookup_s, youngest + self.retry.lookup_s - time.time())))
        found = 0
        for sub in open_subs:
            jobs = look.found.get(sub.token)
            if jobs:
                self._accept(sub.token, jobs)
                found += 1
            elif look.conclusive:
                self.ledger.mark_failed(sub.token, "not found in the scheduler when resuming")
        if not look.conclusive and found < len(open_subs):
            raise SubmitError(f"sweep {self.prepared.sweep_id}: {len(open_subs) - found} submission(s) of an earlier "
                              "run are unresolved and the scheduler's queue could not be read to look them up; run "
                              "the same command again later")
        return found

    def cancel_strays(self) -> list[str]:
        """Settle this sweep's jobs the ledger did not accept (one tag query, one cancel call).

        A job whose attempt was given up for lost is adopted when the attempt's points are still
        pending; otherwise, and for a second job carrying an accepted attempt's token, it is
        cancelled and recorded in the ledger (:meth:`hpcjobs.sweep.ledger.store.Ledger.strays`). Jobs
        with a token the ledger never planned are left alone (logged).

        Returns:
            The job ids cancelled.
        """
        subs = {s.token: s for s in self.ledger.submissions(with_points=False)}
        if not subs:  # a new ledger: the sweep must have no job in the scheduler yet
            self._refuse_blind_start()
            return []
        look = self._query()
        if not look.found:
            return []
        done = {s.job_id for s in self.ledger.strays()}
        strays: dict[str, tuple[str, str]] = {}
        for token, jobs in look.found.items():
            sub = subs.get(token)
            fresh = [j for j in jobs if j not in done]
            if sub is None:
                if fresh:
                    log.warning("jobs %s carry sweep %s's tag with token %s, which its ledger never planned; left "
                                "alone", " ".join(fresh), self.prepared.sweep_id, token)
                continue
            if sub.state == SUB_FAILED and fresh and self.ledger.adopt_late_submission(token, fresh[0]):
                log.warning("job %s reached the scheduler after its submission was given up; adopted", fresh[0])
                fresh = fresh[1:]
            elif sub.state == SUB_FAILED:
                for j in fresh:
                    strays[j] = (token, "its submission was given up for lost and its points went again")
                continue
            accepted = self.ledger.submission(token).job_id
            for j in fresh:
                if j != accepted:
                    strays[j] = (token, f"a second job with the token of job {accepted}")
        if not strays:
            return []
        result = self._cancel_all(list(strays))
        for j, (token, reason) in strays.items():
            self.ledger.record_stray(j, token, result, reason)
        return list(strays)

    def _refuse_blind_start(self) -> None:
        """A ledger with no submission yet: make sure the scheduler holds no job of this sweep id.

        The sweep id comes from the experiment, so a ledger deleted (by hand, or by a clean-up
        script) while its jobs are queued gives the same id a fresh ledger: submitting then would run
        every point a second time. One tag query (live queue and history) decides.

        Raises:
            SubmitError: The scheduler holds jobs with this sweep's tag, or it could not be asked.
        """
        look = self._query(backlog=False)  # a busy slurmctld's backlog must not stop every new sweep
        sweep = self.prepared.sweep_id
        here = self.prepared.folder
        elsewhere = sorted({j for t, ids in look.found.items() if not made_for(t, here) for j in ids},
                           key=numeric_job_order)
        if elsewhere:  # the same experiment, planned in another folder: its jobs are that ledger's
            log.info("job(s) %s carry sweep %s's id from another folder; not this ledger's", " ".join(elsewhere[:10]),
                     sweep)
        jobs = sorted({j for t, ids in look.found.items() if made_for(t, here) for j in ids}, key=numeric_job_order)
        if jobs:
            shown = " ".join(jobs[:10]) + (" ..." if len(jobs) > 10 else "")
            raise SubmitError(f"sweep {sweep} has no record of any submission in {self.ledger.path}, but the "
                              f"scheduler holds {len(jobs)} job(s) with its tag: {shown}. Its ledger was deleted "
                              "or replaced while they were queued; submitting now would run their points twice. "
                              "Restore the ledger, or cancel those jobs and run the same command again (or, to run "
                              "every point again beside them, add --new)")
        if not look.conclusive:
            raise SubmitError(f"sweep {sweep} starts with a new ledger, and the scheduler could not be asked "
                              "whether it already holds jobs of this sweep (its queue or its accounting did not "
                              "answer: see the warnings above); nothing was submitted. Run the same command again "
                              "when the scheduler answers")

    def _cancel(self, job_ids: list[str], token: str, reason: str) -> None:
        action = self._cancel_all(job_ids)
        for j in job_ids:
            self.ledger.record_stray(j, token, action, reason)

    def _cancel_all(self, job_ids: list[str]) -> str:
        """Cancel ``job_ids`` in one call; ``cancelled`` or ``cancel failed: ...``."""
        log.warning("cancelling stray job(s) of sweep %s: %s", self.prepared.sweep_id, " ".join(job_ids))
        try:
            result = self.client.run(self.client.backend.cancel_argv(job_ids), check=False)
        except HpcJobsError as exc:
            return f"cancel failed: {exc}"
        return "cancelled" if result.returncode == 0 else f"cancel exited {result.returncode}: {result.stderr.strip()}"

    # ------------------------------------------------------------------------------ limits

    def _limits(self) -> ClusterLimits | None:
        """What the scheduler reports (array size, submit limit), or ``None`` when it cannot say.

        Limits are advice for chunking: when the query fails (a server that does not answer
        ``qstat -B``, a cluster that hides its configuration), the site config's limits and the
        defaults apply, and a chunk too large is refused by the scheduler with a clear error.

        Only the site's own cluster is asked: when the site names its clusters (``detect.cluster_names``)
        and this machine's configuration names another one, this machine's scheduler would answer for the
        wrong cluster, so the site file's limits apply without a call (a dry run and its submission alike).
        """
        if not self.client.backend.capabilities.cluster_limits:
            return None
        site = self.prepared.site
        here = self.client.configured_cluster()
        named = {n.lower() for n in site.detect.cluster_names}
        if named and (not here or here.lower() not in named):
            # the site names its clusters: only a machine whose configuration names one of them speaks for it
            # (a login node of another cluster, or scheduler clients with no configuration, may not)
            log.info("site %s is cluster %s, this machine's scheduler is %s: the site file's limits apply",
                     site.name, ", ".join(site.detect.cluster_names), here or "not named by its configuration")
            return None
        try:
            return self.client.limits(self.user)
        except CommandTimeout as exc:
            log.warning("the scheduler did not answer `%s` in %g s; using the site file's limits",
                        " ".join(exc.argv), limits_cache.query_timeout_s())
            return None
        except HpcJobsError as exc:
            log.warning("could not read the scheduler's limits (%s); using the site config's", exc)
            return None

    def _queued(self) -> int | None:
        backend = self.client.backend
        if not backend.capabilities.queued_count:
            return None
        try:
            result = self.client.run(backend.queued_argv(self.user), check=False)
        except HpcJobsError:
            return None
        with reading_output_of(result.argv, result.stdout, result.returncode):
            return int(backend.parse_queued(result.stdout))

    def _wait_for_room(self, size: int, limit: int | None) -> None:
        """Trickle: when a submit limit is known, wait until the chunk fits in the user's queue."""
        if limit is None:
            return
        if size > limit:
            raise SubmitError(f"a chunk of {size} tasks can never fit the submit limit of {limit}: "
                              "lower the site's limits.max_array_size")
        delay = self.retry.initial
        while True:
            queued = self._queued()
            room = room_in_queue(limit, queued or 0)
            if queued is None or (room is not None and room >= size):
                return
            log.info("queue full (%d of %d); waiting %.0f s", queued, limit, delay)
            self.sleep(delay)
            delay = min(delay * self.retry.factor, self.retry.maximum)

    def _next_chunk_number(self) -> int:
        used = self.ledger.max_chunk()
        return 0 if used is None else used + 1


def pull_sweep_images(prepared: PreparedSweep) -> list[PulledImage]:
    """``containers.pull: submit``: fetch the jobs' images on the submitting machine (before any job is queued).

    Raises:
        ContainerPullError: An image could not be fetched.
    """
    jobs = [s.job for s in prepared.shapes] or [prepared.job]
    containers = [j.container for j in jobs if j.container is not None]
    if not any(c.pull_from for c in containers):
        return []
    return pull_images(containers, prepared.job.scheduler)


def submitted_job_ids(ledger: Ledger) -> list[str]:
    """The scheduler ids of every submission the ledger accepted (array ids for chunks)."""
    return [s.job_id for s in ledger.submissions(with_points=False) if s.job_id and s.state == "submitted"]
