"""Running a backend's commands: submit, one batched status call per poll, cancel, limits, wait.

Every call goes through :func:`hpcjobs.process.run_command` (looked up at call
time, so tests can replace the seam) with a timeout; a failure raises
:class:`~hpcjobs.errors.CommandError` carrying argv, exit code, stdout and stderr.
"""

from __future__ import annotations

import getpass
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpcjobs import process
from hpcjobs.errors import CommandError, HpcJobsError, printable, reading_output_of
from hpcjobs.schedulers.base import ClusterLimits, JobStatus, SchedulerBackend, SubmitOptions, UnsupportedCommand
from hpcjobs.states import TERMINAL_STATES

if TYPE_CHECKING:
    from hpcjobs.schedulers.status_table import StatusTable

log = logging.getLogger("hpcjobs.schedulers")

SUBMIT_TIMEOUT_S = 60.0
QUERY_TIMEOUT_S = 120.0
#: Bytes of a status answer kept: one line per job, array task and step of a large sweep.
STATUS_MAX_STDOUT = 256 * 1024 * 1024


@dataclass
class PollSchedule:
    """Exponential backoff between status polls: ``initial`` growing by ``factor`` up to ``maximum`` seconds."""

    initial: float = 1.0
    factor: float = 1.5
    maximum: float = 60.0

    def delays(self) -> Iterable[float]:
        """The successive waits."""
        delay = self.initial
        while True:
            yield delay
            delay = min(delay * self.factor, self.maximum)


@dataclass
class SchedulerClient:
    """A backend plus the subprocess seam.

    Attributes:
        backend: Command builders and parsers of one scheduler family.
        env: Extra environment for every command (e.g. ``SLURM_CONF``).
        calls: Count of scheduler commands run, by command name (for benchmarks and tests).
    """

    backend: SchedulerBackend
    env: Mapping[str, str] | None = None
    calls: dict[str, int] = field(default_factory=dict)
    _asked: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    def run(self, argv: Sequence[str], *, timeout: float = QUERY_TIMEOUT_S, check: bool = True,
            cwd: str | Path | None = None, input: str | None = None) -> process.CommandResult:
        """Run one scheduler command through the seam, counting it.

        A backend that chooses its executables (``command_paths``: PBS Pro) turns the bare command
        name into the one it chose, so errors and logs show which ``qsub`` ran.
        """
        self.calls[argv[0]] = self.calls.get(argv[0], 0) + 1
        if self.backend.capabilities.command_paths and argv and "/" not in argv[0]:
            if process.routed():  # over SSH: the login node's own folder of the commands
                folder = self._remote_command_folder()
                argv = [f"{folder}/{argv[0]}" if folder else argv[0], *argv[1:]]
            else:
                env = {**os.environ, **self.env} if self.env else os.environ
                argv = [self.backend.command_path(argv[0], env), *argv[1:]]
        return process.run_command(argv, timeout=timeout, env=self.env, cwd=cwd, check=check, input=input)

    def _remote_command_folder(self) -> str | None:
        """Where the login node keeps the scheduler's commands (asked once per client), or ``None`` (its ``$PATH``)."""
        if "command_folder" not in self._asked:
            probe = self.backend.command_folder_probe()
            found = None
            if probe is not None:
                lines = process.run_command(probe, timeout=QUERY_TIMEOUT_S, check=False).stdout.splitlines()
                found = lines[0].strip() if lines and lines[0].startswith("/") else None
            self._asked["command_folder"] = found
        folder = self._asked["command_folder"]
        return folder if isinstance(folder, str) else None

    def submit(self, script: str | Path, options: SubmitOptions | None = None,
               *, cwd: str | Path | None = None) -> str:
        """Submit ``script`` and return the job id.

        Raises:
            CommandError: The submit command failed (its argv, exit code and stderr are in the error).
            CommandTimeout: It did not answer in time; the job may or may not have been queued.
        """
        options = options or SubmitOptions()
        backend, caps = self.backend, self.backend.capabilities
        # Kubernetes: the Job form follows the server's version
        version = self.server_version() if caps.server_version and backend.needs_server_version(Path(script)) else None
        argv = (backend.submit_argv_in(Path(script), options, Path(cwd) if cwd is not None else Path.cwd(),
                                       server_version=version)
                if caps.submit_in_folder else backend.submit_argv(Path(script), options))
        result = self.run(argv, timeout=SUBMIT_TIMEOUT_S, cwd=cwd)
        with reading_output_of(result.argv, result.stdout, result.returncode):  # Swarm: the id is in the argv
            job_id = backend.parse_submit_for(argv, result.stdout)
        log.info("submitted %s as %s", script, job_id)
        return job_id

    def server_version(self) -> tuple[int, int] | None:
        """The server's ``(major, minor)`` version, asked once per client (``None``: it did not say)."""
        if "server_version" not in self._asked:
            argv = self.backend.server_version_argv()
            try:
                self._asked["server_version"] = self.backend.parse_server_version(
                    self.run(argv, timeout=QUERY_TIMEOUT_S, check=False).stdout)
            except HpcJobsError as exc:
                log.warning("%s did not answer (%s): taking the form every server runs", " ".join(argv), exc)
                self._asked["server_version"] = None
        found = self._asked["server_version"]
        return found if isinstance(found, tuple) else None

    def status(self, job_ids: Sequence[str]) -> list[JobStatus]:
        """The state of every job and array task in ``job_ids``: one batched scheduler call.

        On Slurm a job submitted a moment ago may not be in accounting yet; the ids sacct
        does not know are then asked of ``squeue`` in one more batched call (backends with the
        ``fallback_for_missing`` capability). When accounting is unavailable altogether, ``squeue`` answers
        for all of them. PBS's ``qstat`` knows a job from the moment ``qsub`` returns: an id its
        answer leaves out is unknown, and no second call is made.
        """
        if not job_ids:
            return []
        result = self._status_call(job_ids)
        if result.returncode == 0:
            with reading_output_of(result.argv, result.stdout, result.returncode):
                records = self.backend.parse_status(result.stdout)
            missing = self._missing(job_ids, lambda j: self.covers(records, j), records)
            if missing:
                records += self._fallback_status(missing, check=False)
            return records
        return self._status_after_error(job_ids, result)

    def status_table(self, job_ids: Sequence[str], *,
                     reuse: Callable[[str], StatusTable | None] | None = None) -> StatusTable:
        """What :meth:`status` says, held by column (one call, the same fallbacks).

        A backend with ``columnar_status`` reads its answer without one object per array task
        (a million-task sweep); others are read by ``parse_status`` and grouped.

        Args:
            job_ids: The jobs to ask about.
            reuse: Given the SHA-256 of the scheduler's answer, the table of that same answer when
                it needs no reading (the caller applied it already); ``None`` to read it.
        """
        import hashlib

        from hpcjobs.schedulers.status_table import StatusTable

        if not self.backend.capabilities.columnar_status or not job_ids:
            return StatusTable.from_records(self.status(job_ids))
        result = self._status_call(job_ids)
        if result.returncode != 0:
            return StatusTable.from_records(self._status_after_error(job_ids, result))
        digest = hashlib.sha256(result.stdout.encode("utf-8", "surrogatepass")).hexdigest()
        known = reuse(digest) if reuse is not None and not result.stdout_omitted else None
        if known is not None:
            return known
        with reading_output_of(result.argv, result.stdout, result.returncode):
            table: StatusTable = self.backend.parse_status_table(result.stdout)
        table.digest = None if result.stdout_omitted else digest
        same = None if self.backend.capabilities.job_ids_as_text else self.backend.same_job
        missing = self._missing(job_ids, lambda j: table.covers(j, same), None)
        if missing:
            table.add_records(self._fallback_status(missing, check=False))
            table.digest = None  # more than the answer's text: not to be recognised by it
        return table

    def _status_call(self, job_ids: Sequence[str]) -> process.CommandResult:
        with process.output_limits(STATUS_MAX_STDOUT):
            return self.run(self.backend.status_argv(job_ids), check=False)

    def _missing(self, job_ids: Sequence[str], covered: Callable[[str], bool],
                 records: Sequence[JobStatus] | None) -> list[str]:
        """The ids a status answer left out, when the backend asks again for those (else none)."""
        caps = self.backend.capabilities
        if not (caps.status_fallback and caps.fallback_for_missing):
            return []
        if records is not None and caps.job_ids_as_text:  # one pass, not one per id
            seen = {r.job_id for r in records} | {r.array_job_id for r in records if r.array_job_id is not None}
            return [j for j in job_ids if j not in seen]
        return [j for j in job_ids if not covered(j)]

    def _status_after_error(self, job_ids: Sequence[str], result: process.CommandResult) -> list[JobStatus]:
        """A status call that exited non-zero: what it still says, or the fallback's answer, or the error."""
        backend = self.backend
        if backend.tolerable_status_error(result.stderr):
            with reading_output_of(result.argv, result.stdout, result.returncode):
                return backend.parse_status(result.stdout)  # some ids unknown; the rest are reported
        if backend.capabilities.status_fallback and backend.accounting_unavailable(result.stderr):
            records = self._fallback_status(job_ids, check=True)
            left = self._missing(job_ids, lambda j: self.covers(records, j), records)
            said = result.stderr.strip().splitlines()
            if left and not backend.accounting_disabled(result.stderr):
                # slurmdbd down (not a cluster without accounting): say so on every poll, since the jobs
                # that left the live queue are neither finished nor lost until the history answers
                log.warning("accounting did not answer (%s exited %d: %s): %d of %d job(s) are not in the live "
                            "queue and keep their last known state until it answers", result.argv[0],
                            result.returncode, printable(said[-1] if said else "")[:300], len(left), len(job_ids))
            else:
                log.info("accounting unavailable (%s); using %s", result.stderr.strip(),
                         backend.fallback_status_argv(job_ids)[0])
            return records
        raise CommandError(result.argv, result.returncode, result.stdout, result.stderr)

    def _fallback_status(self, job_ids: Sequence[str], *, check: bool) -> list[JobStatus]:
        with process.output_limits(STATUS_MAX_STDOUT):
            res = self.run(self.backend.fallback_status_argv(job_ids), check=False)
        if res.returncode == 0 or res.stdout.strip() or self.backend.tolerable_status_error(res.stderr):
            with reading_output_of(res.argv, res.stdout, res.returncode):
                return self.backend.parse_fallback_status(res.stdout)
        if check:
            raise CommandError(res.argv, res.returncode, res.stdout, res.stderr)
        return []  # squeue exits 1 when it knows none of the ids

    def queue_status(self, job_ids: Sequence[str]) -> list[JobStatus]:
        """What the live queue says of ``job_ids`` (``squeue``, ``qstat`` without ``-x``), in one call.

        For a backend with a second status command (``status_fallback``) only; others have one source,
        :meth:`status`. A job the queue does not hold is simply absent.

        Raises:
            CommandError: The queue did not answer.
        """
        if not job_ids or not self.backend.capabilities.status_fallback:
            return []
        return self._fallback_status(job_ids, check=True)

    def covers(self, records: Sequence[JobStatus], job_id: str) -> bool:
        """Whether ``records`` say anything about ``job_id`` (a job, an array, or one array task).

        Uses the backend's ``same_job`` (PBS ids may carry a different server suffix).
        """
        same = self.backend.same_job
        return any(same(r.job_id, job_id) or (r.array_job_id is not None and same(r.array_job_id, job_id))
                   for r in records)

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Cancel ``job_ids`` in one call (unknown or finished jobs are not an error on Slurm).

        A backend with ``per_job_cancel`` cancels with one command per job (Swarm: one update per service).
        """
        if not job_ids:
            return
        for argv in self.backend.cancel_argvs(job_ids):
            self.run(argv)

    def limits(self, user: str | None = None) -> ClusterLimits:
        """Limits the scheduler reports (array size, job count, the user's submit limit where known).

        Each query may take ``$HPCJOBS_SCHEDULER_TIMEOUT_S`` (10 s); the answer is cached per user
        and cluster for ``$HPCJOBS_LIMITS_TTL_S`` (:mod:`hpcjobs.schedulers.limits_cache`).

        Raises:
            CommandTimeout: The scheduler did not answer the configuration query in time.
            CommandError: It refused the query.
        """
        from hpcjobs.schedulers import limits_cache

        backend = self.backend
        if not backend.capabilities.cluster_limits:
            return ClusterLimits()
        user = user or getpass.getuser()
        key = self._limits_cache_key(backend.config_argv()[0], user)
        cached = limits_cache.load(key) if key else None
        if cached is not None:
            log.info("scheduler limits from the cache (%s): %s", key, cached)
            return cached
        timeout = limits_cache.query_timeout_s()
        limits = backend.parse_limits(self.run(backend.config_argv(), timeout=timeout).stdout)
        if backend.capabilities.user_limits:
            argv = backend.user_limits_argv(user)
            try:
                res = self.run(argv, check=False, timeout=timeout)
            except HpcJobsError as exc:  # sacctmgr missing or hung: limits stay unknown
                log.warning("could not read MaxSubmitJobs: %s", exc)
            else:
                if res.returncode == 0:
                    qos = self._qos_limits(timeout)
                    limits = replace(limits, max_submit_jobs=backend.parse_user_limits(res.stdout, qos))
                else:
                    log.warning("could not read MaxSubmitJobs: %s exited %s: %s", " ".join(argv), res.returncode,
                                printable(res.stderr.strip())[:500])
        if key:
            limits_cache.store(key, limits)
        return limits

    def _qos_limits(self, timeout: float) -> dict[str, int]:
        """Per-user submit limits of the QOS (``{}`` when the backend has none or they cannot be read)."""
        if not self.backend.capabilities.qos_limits:
            return {}
        argv = self.backend.qos_limits_argv()
        try:
            res = self.run(argv, check=False, timeout=timeout)
        except HpcJobsError as exc:
            log.warning("could not read the QOS submit limits: %s", exc)
            return {}
        if res.returncode != 0:
            log.warning("could not read the QOS submit limits: %s exited %s: %s", " ".join(argv), res.returncode,
                        printable(res.stderr.strip())[:500])
            return {}
        return self.backend.parse_qos_limits(res.stdout)

    def configured_cluster(self) -> str | None:
        """The cluster this client's commands reach, as this machine's configuration files name it, or ``None``.

        No scheduler call: Slurm's ``ClusterName`` (``$SLURM_CLUSTER_NAME``, ``slurm.conf``), else the PBS
        server (``$PBS_SERVER``, ``pbs.conf``); see :mod:`hpcjobs.config.cluster_names`.
        """
        from hpcjobs.config.cluster_names import pbs_server_name, slurm_cluster_name

        env = {**os.environ, **self.env} if self.env else os.environ
        return slurm_cluster_name(env) if self.backend.name == "slurm" else pbs_server_name(env)

    def _limits_cache_key(self, command: str, user: str) -> str | None:
        """Cache key of the limits: family, cluster named by local config files, client executable, user."""
        from hpcjobs.schedulers import limits_cache

        env = {**os.environ, **self.env} if self.env else os.environ
        family = self.backend.name
        cluster = self.configured_cluster()
        try:
            executable = (self.backend.command_path(command, env) if self.backend.capabilities.command_paths
                          else shutil.which(command, path=env.get("PATH")) or command)
        except HpcJobsError:
            return None
        return limits_cache.cache_key(family, cluster, executable, user)

    def cluster_name(self) -> str | None:
        """The scheduler's cluster name (Slurm ClusterName), or ``None`` when it cannot be asked."""
        if not self.backend.capabilities.cluster_limits:
            return None
        try:
            result = self.run(self.backend.config_argv(), timeout=10)
        except HpcJobsError:
            return None
        return self.backend.parse_cluster_name(result.stdout)

    def wait(
        self,
        job_ids: Sequence[str],
        *,
        timeout: float | None = None,
        schedule: PollSchedule | None = None,
        is_done: Callable[[list[JobStatus]], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> list[JobStatus]:
        """Poll (one status call per poll, with backoff) until every job is terminal.

        Args:
            job_ids: Jobs (array ids include their tasks) to wait for.
            timeout: Give up after this many seconds.
            schedule: Delays between polls.
            is_done: Custom completion test on the latest records (default: all terminal,
                none still a collapsed pending range).

        Raises:
            HpcJobsError: The timeout passed first (the message lists the jobs still active).
        """
        schedule = schedule or PollSchedule()
        done = is_done or all_terminal
        deadline = None if timeout is None else clock() + timeout
        for delay in schedule.delays():
            records = self.status(job_ids)
            if all(self.covers(records, j) for j in job_ids) and done(records):
                return records
            if deadline is not None and clock() + delay > deadline:
                active = [f"{r.job_id}={r.state}" for r in records if r.state not in TERMINAL_STATES]
                raise HpcJobsError(f"timed out after {timeout:g} s waiting for jobs: {', '.join(active) or job_ids}")
            sleep(delay)
        raise AssertionError("unreachable")


def all_terminal(records: Sequence[JobStatus]) -> bool:
    """True when every record is in a terminal state and no array range is still collapsed (pending)."""
    return all(r.state in TERMINAL_STATES and r.array_task_spec is None for r in records)



def client_for(scheduler: str) -> SchedulerClient:
    """A client for the backend of scheduler family ``scheduler`` (``slurm``, ``pbspro``, ``torque``...).

    Raises:
        ConfigError: No backend of that name.
        UnsupportedCommand: Its points run here (``runs_here``, the local runner): it has no commands to
            run, and asking for its client is a bug (check ``capabilities.runs_here`` first).
    """
    from hpcjobs.schedulers.registry import get_backend

    backend = get_backend(scheduler)
    if backend.capabilities.runs_here:
        raise UnsupportedCommand(f"{scheduler}: its points run as processes of this machine, with no scheduler "
                                 "commands; it has no scheduler client (ask capabilities.runs_here first)")
    return SchedulerClient(backend)
