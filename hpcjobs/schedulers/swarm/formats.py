"""Docker Swarm: service names, ``docker service ps``/``ls`` JSON lines, task states. Pure functions.

hpcjobs runs a job (a sweep chunk) as one ``replicated-job`` service whose N tasks are the array
tasks. What the parsers rely on, from the docker CLI and swarmkit sources and seen on Docker 20.10:

* ``docker service ps --no-trunc --format '{{json .}}' S...`` prints one JSON object per task with
  ``ID``, ``Name``, ``Image``, ``Node``, ``DesiredState``, ``CurrentState`` ("Complete 3 seconds ago"),
  ``Error`` (quoted: ``"task: non-zero exit (7)"``) and ``Ports`` (docker/cli
  ``cli/command/task/formatter.go``). ``Name`` is ``<service name>.<slot>``, or
  ``<service name>.<node id>`` for slot 0 (``cli/command/task/print.go``: a slot of 0 means "no
  slot"); the tasks of one slot are listed together, newest first (same file: sorted by name, then
  by creation time, most recent first). Services it does not know are named on stderr
  (``no such service: S``) with exit status 1, after the tasks of the others.
* A replicated job's slots are ``0..N-1``, one task per slot at a time
  (swarmkit ``manager/orchestrator/jobs/replicated/reconciler.go``), and a slot whose task failed
  gets a new task until one completes (the same reconciler fills every slot with neither a running
  nor a completed task). The Swarm template lets only the first task of a slot run the job; a
  later task of the slot finds its claim and exits 0. So the first task of a slot that started the
  script says how the point ended.
* Swarm has no time limit: the script stops itself at the job's wall time and exits 124 (as GNU
  ``timeout`` does), read as TIMEOUT. ``docker service ps`` does not say that a task was killed for
  its memory limit (``task: non-zero exit (137)``, FAILED); the container's ``docker inspect``
  (``State.OOMKilled``) does, which the accounting reader uses (:mod:`hpcjobs.accounting.sources.swarm`).
* ``docker service ls --format '{{json .}}'`` prints ``ID`` (12 characters), ``Name``, ``Mode``,
  ``Replicas`` ("1/2 (3/6 completed)"), ``Image``, ``Ports`` (``cli/command/service/formatter.go``).

The job id hpcjobs records is the service *name*, which it chooses: ``<experiment>-<sweep hash>-
<chunk>-<tasks>-<token>`` (:func:`service_name`), so the tag of a lost submission can be read back
from ``docker service ls`` and the number of tasks from every ``docker service ps`` line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.containers import distributed_status
from hpcjobs.states import JobTag
from hpcjobs.units import is_ascii_digits

#: Image of the placeholder task that marks a cancelled job (never pulled: it can never be placed).
CANCELLED_IMAGE = "hpcjobs/cancelled:placeholder"
#: Placement constraint no node satisfies: keeps the placeholder pending for ever.
NEVER_PLACED = "node.labels.hpcjobs-cancelled==true"
#: Swarm service names: at most 63 characters, ``[A-Za-z0-9]`` at both ends, ``-``/``_`` inside.
MAX_SERVICE_NAME = 63
_SERVICE_NAME_RE = re.compile(r"[A-Za-z0-9](?:[-_]*[A-Za-z0-9]+)*")
_PREFIX_MAX = 20
_HASH_RE = re.compile(r"(?P<name>.+)-(?P<hash>[0-9a-f]{8})")
_EXIT_RE = re.compile(r"non-zero exit \((\d+)\)")

#: The exit status of a task the script stopped at its wall time (``templates/swarm.sh.j2``, as GNU timeout).
WALLTIME_EXIT = 124
#: Task states (swarmkit api TaskState, as the CLI prints them) before the container runs.
WAITING = frozenset({"New", "Allocated", "Pending", "Assigned", "Accepted", "Preparing", "Ready", "Starting"})
#: Desired states of a task Swarm is stopping or has removed.
STOPPING = frozenset({"Shutdown", "Remove"})


@dataclass(frozen=True)
class ServiceName:
    """What an hpcjobs service name says: its tag and how many tasks the job has."""

    tag: JobTag
    tasks: int


def experiment_of(sweep_id: str) -> tuple[str, str | None]:
    """``(experiment name, sweep hash)`` of a sweep id ``<name>-<8 hex>``; a single job's id has no hash."""
    m = _HASH_RE.fullmatch(sweep_id)
    return (m["name"], m["hash"]) if m else (sweep_id, None)


def service_name(tag: JobTag, tasks: int, *, nodes: int = 1) -> str:
    """The service name of a submission: ``<experiment>-<sweep hash or x>-<chunk>-<tasks>-<token>``.

    A distributed job of ``nodes`` > 1 tasks (one point) writes ``<nodes>n`` for the tasks.

    The experiment part is cosmetic (cut to 20 characters, other characters than letters, digits
    and ``-`` replaced); the rest is what :func:`parse_service_name` reads back, with the experiment
    name from elsewhere (a label).
    """
    name, digest = experiment_of(tag.sweep_id)
    prefix = re.sub(r"[^A-Za-z0-9]+", "-", name)[:_PREFIX_MAX].strip("-") or "job"
    count = f"{nodes}n" if nodes > 1 else str(tasks)
    text = f"{prefix}-{digest or 'x'}-{tag.chunk}-{count}-{tag.token}"
    if len(text) > MAX_SERVICE_NAME or not _SERVICE_NAME_RE.fullmatch(text):
        raise ValueError(f"cannot name a Swarm service for {tag.render()} ({text!r})")
    return text


def parse_service_name(text: str, experiment: str) -> ServiceName | None:
    """The tag and task count of an hpcjobs service name, given the experiment's name; ``None`` if not one."""
    parts = text.rsplit("-", 4)
    if len(parts) != 5:
        return None
    _prefix, digest, chunk, tasks, token = parts
    if re.fullmatch(r"\d+n", tasks):  # a distributed job: one point
        tasks = "1"
    if not (is_ascii_digits(chunk) and is_ascii_digits(tasks) and re.fullmatch(r"[0-9a-f]{8,32}", token)):
        return None
    if digest == "x":
        sweep = experiment
    elif re.fullmatch(r"[0-9a-f]{8}", digest):
        sweep = f"{experiment}-{digest}"
    else:
        return None
    return ServiceName(JobTag(sweep, int(chunk), token), int(tasks))


def tasks_in_name(text: str) -> int | None:
    """The task count written in an hpcjobs service name (``None`` for another name)."""
    parts = text.rsplit("-", 4)
    if len(parts) == 5 and re.fullmatch(r"\d+n", parts[3]):
        return 1
    return int(parts[3]) if len(parts) == 5 and is_ascii_digits(parts[3]) else None


def nodes_in_name(text: str) -> int:
    """The tasks of a distributed job (``<nodes>n`` in its service name), 1 for any other service."""
    parts = text.rsplit("-", 4)
    m = re.fullmatch(r"(\d+)n", parts[3]) if len(parts) == 5 else None
    return int(m.group(1)) if m else 1


@dataclass(frozen=True)
class Task:
    """One line of ``docker service ps --format '{{json .}}'``."""

    service: str
    slot: int
    state: str
    desired: str
    error: str
    image: str
    task_id: str

    @property
    def exit_code(self) -> int | None:
        """The exit status in ``task: non-zero exit (N)``; 0 for a completed task."""
        if self.state == "Complete":
            return 0
        m = _EXIT_RE.search(self.error)
        return int(m.group(1)) if m else None

    @property
    def started_script(self) -> bool:
        """Whether the container ran (the script started): running, complete, or failed with an exit status."""
        return self.state in ("Running", "Complete") or (self.state == "Failed" and self.exit_code is not None)


def _task(obj: object) -> Task:
    if not isinstance(obj, dict) or not isinstance(obj.get("Name"), str):
        raise SchedulerOutputError(f"not a docker service ps record: {str(obj)[:200]}")
    name: str = obj["Name"]
    service, _, suffix = name.lstrip(" \\_").rpartition(".")
    if not service:
        raise SchedulerOutputError(f"task name {name!r} is not <service>.<slot>")
    # Slot 0 is printed as the node id (empty while the task is not assigned): anything but digits.
    slot = int(suffix) if is_ascii_digits(suffix) else 0
    current = str(obj.get("CurrentState", "")).split(" ", 1)[0]
    error = str(obj.get("Error", "")).strip()
    if len(error) >= 2 and error[0] == error[-1] == '"':
        error = error[1:-1]
    return Task(service, slot, current, str(obj.get("DesiredState", "")), error, str(obj.get("Image", "")),
                str(obj.get("ID", "")))


def parse_json_lines(stdout: str) -> list[dict[str, object]]:
    """The JSON objects of ``--format '{{json .}}'`` output, one per non-empty line.

    Raises:
        SchedulerOutputError: A line is not a JSON object.
    """
    out = []
    for n, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise SchedulerOutputError(f"line {n} is not JSON: {line[:200]!r} ({exc})") from None
        if not isinstance(obj, dict):
            raise SchedulerOutputError(f"line {n} is not a JSON object: {line[:200]!r}")
        out.append(obj)
    return out


def parse_tasks(stdout: str) -> list[Task]:
    """Every task of ``docker service ps --no-trunc --format '{{json .}}'``, in the printed order."""
    return [_task(obj) for obj in parse_json_lines(stdout)]


def _decided(tasks: Sequence[Task]) -> Task:
    """The task that tells how a slot went: the first (oldest) that started the script, else the newest."""
    for task in reversed(tasks):  # printed newest first
        if task.started_script:
            return task
    return tasks[0]


def _status(service: str, slot: int, task: Task, cancelled: bool) -> JobStatus:
    """The normalised record of one slot from its deciding task."""
    raw, code, reason = task.state, task.exit_code, task.error or None
    if task.state == "Complete":
        state = st.COMPLETED
    elif task.state == "Failed" and code == WALLTIME_EXIT:
        state, raw = st.TIMEOUT, "Failed (wall time)"
    elif task.state == "Failed" and code is not None:
        state = st.FAILED
    elif task.state == "Running":
        state = st.CANCELLED if task.desired in STOPPING else st.RUNNING
    elif task.state in ("Shutdown", "Remove", "Orphaned"):
        state = st.CANCELLED
    else:
        # Waiting, or refused before the script ran (Rejected; Failed without an exit status, such as a
        # mount that does not exist): Swarm tries the slot again, so it is not over.
        refused = task.state in ("Rejected", "Failed")  # their desired state is Shutdown: they are over
        stopping = not refused and task.desired in STOPPING
        state = st.CANCELLED if cancelled or stopping else st.PENDING
        if refused:
            raw = f"{task.state} (Swarm retries)"
    if state == st.CANCELLED and task.state not in ("Shutdown", "Remove", "Orphaned"):
        raw = f"{raw} (cancelled)"
    return JobStatus(job_id=f"{service}.{slot}", state=state, state_raw=raw, array_job_id=service,
                     array_task_id=slot, exit_code=code if state in (st.COMPLETED, st.FAILED, st.TIMEOUT) else None,
                     reason=reason, name=service)


def job_statuses(tasks: Iterable[Task]) -> list[JobStatus]:
    """One record per slot that has a task, and, for a cancelled service, one per slot that never ran.

    A service is cancelled when it holds the placeholder task hpcjobs' cancel leaves
    (:data:`CANCELLED_IMAGE`): Swarm then has deleted the tasks that were running, and slots that
    were never started have no task at all. Their number comes from the service name.
    """
    slots: dict[str, dict[int, list[Task]]] = {}
    cancelled: set[str] = set()
    for task in tasks:
        if task.image == CANCELLED_IMAGE:
            cancelled.add(task.service)
            slots.setdefault(task.service, {})
            continue
        slots.setdefault(task.service, {}).setdefault(task.slot, []).append(task)
    out: list[JobStatus] = []
    for service, by_slot in slots.items():
        is_cancelled = service in cancelled
        nodes = nodes_in_name(service)
        if nodes > 1:
            ranks = [_status(service, slot, _decided(group), is_cancelled) for slot, group in sorted(by_slot.items())]
            out.append(distributed_status(service, ranks, nodes, cancelled=is_cancelled))
            continue
        first = len(out)
        total = tasks_in_name(service)
        for slot, group in sorted(by_slot.items()):
            rec = _status(service, slot, _decided(group), is_cancelled)
            if total == 1 and not is_cancelled and _given_up(group):
                said = f": {rec.reason[:300]}" if rec.reason else ""  # the record a ledger keeps: Swarm's why
                rec = JobStatus(rec.job_id, st.FAILED, f"{group[0].state}{said} (Swarm starts no other task)",
                                service, slot, reason=rec.reason, name=service)
            if is_cancelled and rec.state not in st.TERMINAL_STATES:
                rec = JobStatus(rec.job_id, st.CANCELLED, f"{rec.state_raw} (cancelled)", service, slot,
                                reason=rec.reason, name=service)
            out.append(rec)
        if total == 1 and 0 in by_slot:  # a single job (hpcjobs submit) is recorded under the service name
            out.append(_plain(out[first]))
        if is_cancelled and total:
            missing = [i for i in range(total) if i not in by_slot]
            if missing:
                out.append(JobStatus(job_id=service, state=st.CANCELLED, state_raw="cancelled before it started",
                                     array_job_id=service, array_task_spec=_ranges(missing), name=service))
    return out


def _given_up(group: Sequence[Task]) -> bool:
    """Whether Swarm has put down the one task of a one-task job for good: the newest task was refused
    before the script ran (``Rejected``, or ``Failed`` without an exit status) and is being shut down.

    Docker's replicated-job orchestrator makes a slot's next task when it reconciles the service, on
    events of the service; with ``--restart-condition=none`` nothing comes after the refusal of the only
    task (seen on the testbed: no other task minutes later, for a bind mount that does not exist and
    for Swarm's constraint enforcer's "assigned node no longer meets constraints"). A slot of a job of
    several tasks is given another task on the next event of its service, so it stays pending.
    """
    newest = group[0]  # printed newest first
    return (newest.state in ("Rejected", "Failed") and newest.exit_code is None and newest.desired in STOPPING
            and not any(t.started_script for t in group))


def _plain(rec: JobStatus) -> JobStatus:
    """The record of a one-task job under the job's own id (how the ledger of a single job asks for it)."""
    return JobStatus(job_id=rec.array_job_id or rec.job_id, state=rec.state, state_raw=rec.state_raw,
                     exit_code=rec.exit_code, reason=rec.reason, name=rec.name)


def _ranges(indices: Sequence[int]) -> str:
    """``0-3,7,9-10`` for sorted indices."""
    parts: list[str] = []
    start = prev = indices[0]
    for i in indices[1:]:
        if i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = i
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


#: Task states after which the task's container no longer runs.
FINISHED = frozenset({"Complete", "Failed", "Shutdown", "Rejected", "Orphaned", "Remove"})


def settled_services(tasks: Iterable[Task]) -> dict[str, list[str]]:
    """Services none of whose tasks can still run, with their task ids (a cancelled job's placeholder aside).

    A service with a task that is waiting or running (Swarm's new task in a slot that failed, a task
    still being stopped) is left out: removing it then would leave that task behind
    (https://github.com/moby/moby/issues/42789).
    """
    out: dict[str, list[str]] = {}
    busy: set[str] = set()
    for task in tasks:
        if task.image == CANCELLED_IMAGE:
            out.setdefault(task.service, [])
            continue
        if task.state not in FINISHED:
            busy.add(task.service)
        out.setdefault(task.service, []).append(task.task_id)
    return {name: ids for name, ids in out.items() if name not in busy}


def parse_service_ps(stdout: str) -> list[JobStatus]:
    """Records of ``docker service ps --no-trunc --format '{{json .}}'`` output (:func:`job_statuses`)."""
    return job_statuses(parse_tasks(stdout))


def unknown_services(stderr: str) -> list[str] | None:
    """The services named in ``no such service: S`` lines; ``None`` when stderr says anything else."""
    names = []
    for line in stderr.splitlines():
        line = line.strip()
        if not line:
            continue
        m = re.fullmatch(r"(?:Error(?: response from daemon)?: )?no such service: (\S+)", line)
        if not m:
            return None
        names.append(m.group(1))
    return names


def parse_service_create(stdout: str) -> str:
    """The service id ``docker service create --quiet`` printed.

    Raises:
        SchedulerOutputError: The output is not one id.
    """
    text = stdout.strip()
    if not re.fullmatch(r"[a-z0-9]{25}", text):
        raise SchedulerOutputError(f"expected a service id from docker service create, got {text[:200]!r}")
    return text


def parse_tagged_services(stdout: str) -> list[tuple[str, str]]:
    """``(service name, tag)`` pairs of ``<experiment>\\t{{json .}}`` lines of ``docker service ls``."""
    out: list[tuple[str, str]] = []
    for line in stdout.splitlines():
        experiment, sep, rest = line.partition("\t")
        if not sep or not rest.strip():
            continue
        try:
            obj = json.loads(rest)
        except ValueError:
            continue
        name = obj.get("Name") if isinstance(obj, dict) else None
        if not isinstance(name, str):
            continue
        parsed = parse_service_name(name, experiment)
        if parsed is not None:
            out.append((name, parsed.tag.render()))
    return out
