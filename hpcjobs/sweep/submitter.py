"""Submitting a sweep exactly once: chunked job arrays, retries, lost answers, resumption.

The protocol (the ledger's module documentation explains why it is crash-safe)::

    for each chunk of pending points:
        token = new_token()                          # in the job's comment: hpcjobs:<sweep>:<chunk>:<token>
        write chunks/<n>.ids and scripts/<n>.<token>.sh   (atomically)
        ledger.plan_chunk(ids, n, token=token)       # committed BEFORE the scheduler call
        sbatch ...                                   # the only step outside the ledger
        ledger.mark_submitted(token, job_id)

A refused submission (``mark_failed``) returns its points to the pending pool. A submission whose
answer was lost (a timeout, a transient error, a crash) is looked up by its token in the
scheduler before anything is submitted again; only a token the scheduler does not know is
retried, under a new token. A late arrival of an attempt given up for lost is cancelled when it
turns up (:meth:`SweepSubmitter.cancel_strays`).
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hpcjobs.errors import CommandError, CommandTimeout, HpcJobsError, SubmitError
from hpcjobs.render.script import render_job
from hpcjobs.schedulers.base import ClusterLimits, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.states import JobTag, parse_job_tag
from hpcjobs.sweep.chunks import Chunk, chunk_capacity, is_queue_full, is_transient, plan_chunks, room_in_queue
from hpcjobs.sweep.ledger import SUB_FAILED, Ledger, SweepMeta, experiment_sha256, new_token
from hpcjobs.sweep.prepare import (
    PreparedSweep,
    array_job_for_chunk,
    render_chunk_script,
    write_chunk_file,
)

log = logging.getLogger("hpcjobs.sweep")


@dataclass
class RetryPolicy:
    """Exponential backoff for transient scheduler errors."""

    attempts: int = 6
    initial: float = 2.0
    factor: float = 2.0
    maximum: float = 120.0

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
    dry_run_commands: list[list[str]] = field(default_factory=list)
    dry_run_script: str | None = None


#: Called as ``progress(points_submitted, points_pending_at_start)``.
Progress = Callable[[int, int], None]


def open_ledger(prepared: PreparedSweep, *, force: bool = False, how: Mapping[str, object] | None = None) -> Ledger:
    """Create (or reopen, if the same sweep was planned before) the sweep's ledger.

    ``how`` records how the sweep was asked for (overrides, sweep arguments, site), so that
    ``hpcjobs resubmit`` and a detached local runner can prepare it again from the ledger alone.
    """
    meta = SweepMeta(
        sweep_id=prepared.sweep_id,
        experiment_path=str(prepared.experiment_path),
        experiment_sha256=experiment_sha256(prepared.experiment_text),
        site=prepared.site.name,
        scheduler=prepared.site.scheduler,
        extra={"name": prepared.experiment.name, **(how or {})},
    )
    return Ledger.create(prepared.folder, meta, prepared.points, force=force)


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
    """

    def __init__(self, prepared: PreparedSweep, ledger: Ledger, client: SchedulerClient, *,
                 throttle: int | None = None, retry: RetryPolicy | None = None,
                 progress: Progress | None = None, sleep: Callable[[float], None] = time.sleep,
                 user: str | None = None) -> None:
        self.prepared = prepared
        self.ledger = ledger
        self.client = client
        self.throttle = throttle if throttle is not None else prepared.site.limits.array_throttle
        self.retry = retry or RetryPolicy()
        self.progress = progress
        self.sleep = sleep
        self.user = user or getpass.getuser()

    # ------------------------------------------------------------------------------ entry point

    def submit(self, *, dry_run: bool = False) -> SubmitReport:
        """Resolve what a previous run left open, then submit every pending point.

        Raises:
            LedgerError: Another process is submitting this sweep.
            SubmitError: The scheduler refused a chunk for a reason retrying will not fix, or
                transient errors outlasted the retry policy (what was submitted stays recorded).
        """
        report = SubmitReport(self.prepared.sweep_id, len(self.prepared.points))
        with self.ledger.lock():
            if not dry_run:
                report.recovered = self.resolve_unresolved()
            pending = [p.point_id for p in self.ledger.pending_points()]
            limits = self._limits()
            capacity = chunk_capacity(limits.max_array_size if limits else None,
                                      self.prepared.site.limits.max_array_size)
            user_limit = (self.prepared.site.limits.max_submitted_jobs
                          or (limits.max_submit_jobs if limits else None))
            first = self._next_chunk_number()
            if not dry_run:
                (self.prepared.submit_dir / self.prepared.job.output_dir).mkdir(parents=True, exist_ok=True)
            for chunk in plan_chunks(pending, capacity, first):
                if dry_run:
                    report.dry_run_commands.append(self._argv(chunk, "0" * 16))
                    if report.dry_run_script is None:
                        job = array_job_for_chunk(self.prepared, chunk.number, chunk.size, self.throttle)
                        report.dry_run_script = render_job(job, template=self.prepared.experiment.template).text
                    continue
                self._wait_for_room(chunk.size, user_limit)
                job_id = self._submit_chunk(chunk)
                report.chunks_submitted += 1
                report.points_submitted += chunk.size
                report.job_ids.append(job_id)
                if self.progress:
                    self.progress(report.points_submitted, len(pending))
        return report

    # ------------------------------------------------------------------------------ one chunk

    def _argv(self, chunk: Chunk, token: str) -> list[str]:
        script = self.prepared.folder / "scripts" / f"{chunk.number}.{token}.sh"
        return self.client.backend.submit_argv(script, self._options(chunk, token))

    def _options(self, chunk: Chunk, token: str) -> SubmitOptions:
        return SubmitOptions(comment=JobTag(self.prepared.sweep_id, chunk.number, token).render())

    def _submit_chunk(self, chunk: Chunk) -> str:
        for attempt in range(1, self.retry.attempts + 1):
            token = new_token()
            write_chunk_file(self.prepared, chunk.number, chunk.point_ids)
            script = render_chunk_script(self.prepared, chunk.number, chunk.size, self.throttle, token)
            argv = self.client.backend.submit_argv(script, self._options(chunk, token))
            self.ledger.plan_chunk(chunk.point_ids, chunk.number, token=token, argv=argv)
            try:
                job_id = self.client.submit(script, self._options(chunk, token), cwd=self.prepared.submit_dir)
            except CommandTimeout as exc:
                self.ledger.mark_unknown(token, exc.stderr or "timed out")
                found = self._resolve_token(token)
                if found:
                    return found
                log.warning("submission of chunk %d timed out and is not in the queue; retrying", chunk.number)
            except CommandError as exc:
                if not is_transient(exc.stderr):
                    self.ledger.mark_failed(token, exc.stderr)
                    raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id} was refused:\n"
                                      f"{exc}") from exc
                self.ledger.mark_unknown(token, exc.stderr)
                found = self._resolve_token(token)
                if found:
                    return found
                if is_queue_full(exc.stderr):
                    log.info("queue full; waiting before chunk %d", chunk.number)
                log.warning("transient error on chunk %d (%s); retrying", chunk.number, exc.stderr.strip())
            else:
                self.ledger.mark_submitted(token, job_id)
                return job_id
            self.sleep(self.retry.delay(attempt))
        raise SubmitError(f"chunk {chunk.number} of sweep {self.prepared.sweep_id} could not be submitted after "
                          f"{self.retry.attempts} attempts; run the same command again to resume")

    # ------------------------------------------------------------------------------ lost answers

    def _tagged_jobs(self) -> dict[str, list[str]]:
        """Token → job ids carrying it, for this sweep's jobs the scheduler knows (live and finished)."""
        backend = self.client.backend
        query = getattr(backend, "tag_query_argvs", None)
        if query is None:
            return {}
        found: dict[str, list[str]] = {}
        for argv in query(self.prepared.experiment.name, self.user):
            result = self.client.run(argv, check=False)
            for job_id, comment in backend.parse_tag_query(result.stdout):  # type: ignore[attr-defined]
                tag = parse_job_tag(comment)
                if tag and tag.sweep_id == self.prepared.sweep_id and job_id not in found.setdefault(tag.token, []):
                    found[tag.token].append(job_id)
        return found

    def _resolve_token(self, token: str) -> str | None:
        """After a lost answer: the job id if the scheduler has the submission, else mark it failed."""
        jobs = self._tagged_jobs().get(token)
        if jobs:
            self.ledger.mark_submitted(token, min(jobs, key=_numeric))
            return min(jobs, key=_numeric)
        self.ledger.mark_failed(token, "not found in the scheduler after a lost answer")
        return None

    def resolve_unresolved(self) -> int:
        """Settle submissions a crash or a lost answer left open: found → submitted, else failed.

        Returns:
            How many were found in the scheduler.
        """
        open_subs = self.ledger.unresolved_submissions()
        if not open_subs:
            return 0
        tagged = self._tagged_jobs()
        found = 0
        for sub in open_subs:
            jobs = tagged.get(sub.token)
            if jobs:
                self.ledger.mark_submitted(sub.token, min(jobs, key=_numeric))
                found += 1
            else:
                self.ledger.mark_failed(sub.token, "not found in the scheduler when resuming")
        return found

    def cancel_strays(self) -> list[str]:
        """Cancel jobs of attempts the ledger gave up as lost that reached the scheduler after all.

        Returns:
            The job ids cancelled.
        """
        failed = {s.token for s in self.ledger.submissions(SUB_FAILED)}
        submitted = {s.job_id for s in self.ledger.submissions() if s.job_id}
        strays = [j for token, jobs in self._tagged_jobs().items() if token in failed for j in jobs
                  if j not in submitted]
        if strays:
            self.client.cancel(strays)
        return strays

    # ------------------------------------------------------------------------------ limits

    def _limits(self) -> ClusterLimits | None:
        """What the scheduler reports (array size, submit limit), or ``None`` when it cannot say.

        Limits are advice for chunking: when the query fails (a server that does not answer
        ``qstat -B``, a cluster that hides its configuration), the site config's limits and the
        defaults apply, and a chunk too large is refused by the scheduler with a clear error.
        """
        if getattr(self.client.backend, "config_argv", None) is None:
            return None
        try:
            return self.client.limits(self.user)
        except HpcJobsError as exc:
            log.warning("could not read the scheduler's limits (%s); using the site config's", exc)
            return None

    def _queued(self) -> int | None:
        argv_of = getattr(self.client.backend, "queued_argv", None)
        if argv_of is None:
            return None
        try:
            result = self.client.run(argv_of(self.user), check=False)
        except HpcJobsError:
            return None
        return int(self.client.backend.parse_queued(result.stdout))  # type: ignore[attr-defined]

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
        used = [s.chunk for s in self.ledger.submissions()]
        return max(used) + 1 if used else 0


def _numeric(job_id: str) -> tuple[int, str]:
    digits = "".join(c for c in job_id.split(".")[0] if c.isdigit())
    return (int(digits) if digits else 0, job_id)


def submitted_job_ids(ledger: Ledger) -> list[str]:
    """The scheduler ids of every submission the ledger accepted (array ids for chunks)."""
    return [s.job_id for s in ledger.submissions() if s.job_id and s.state == "submitted"]


def poll_status(ledger: Ledger, client: SchedulerClient, *, active_only: bool = True) -> int:
    """One batched status call for the sweep's jobs, applied to the ledger.

    Returns:
        How many points changed.
    """
    from hpcjobs.states import TERMINAL_STATES

    subs = [s for s in ledger.submissions() if s.job_id and s.state == "submitted"]
    if active_only:
        done_tokens = {p.submission_token for p in ledger.points() if p.state in TERMINAL_STATES}
        live_tokens = {p.submission_token for p in ledger.points() if p.state not in TERMINAL_STATES}
        subs = [s for s in subs if s.token in live_tokens or s.token not in done_tokens]
    ids = [s.job_id for s in subs if s.job_id]
    if not ids:
        return 0
    key = getattr(client.backend, "job_key", None)
    return ledger.record_status(client.status(ids), job_key=key)
