"""Kubernetes: Job names, ``batch/v1`` Job manifests, and ``kubectl get jobs,pods -o json``. Pure functions.

A chunk of a sweep (N points) is submitted in one ``kubectl create -f``, in one of two forms:

* **one Job per point** (any server): a ``v1`` List of N Jobs ``<chunk>-<i>`` of one pod each
  (``backoffLimit: 0``), whose pod carries its index in the label ``hpcjobs/index`` and the variable
  ``HPCJOBS_K8S_INDEX``;
* **one Indexed Job** (``completionMode: Indexed``, ``backoffLimitPerIndex: 0``; Kubernetes 1.29 and
  later, where a failed index does not fail the others): N completions, the index in the pod
  annotation ``batch.kubernetes.io/job-completion-index`` and the variable ``JOB_COMPLETION_INDEX``.

Every Job and pod is labelled ``hpcjobs/chunk=<chunk>`` (one selector finds a sweep's objects:
``kubectl get jobs,pods -l 'hpcjobs/chunk in (...)' -o json``, one call per poll) and
``hpcjobs/name=<experiment>``, and annotated ``hpcjobs/tag=<tag>`` (a lost submission is found by
its tag). The job id hpcjobs records is ``<namespace>/<chunk>``.

States (``batch/v1`` JobStatus conditions, pod phases and container states, kubernetes.io API
reference): a Job condition ``Complete`` is COMPLETED; ``Failed`` is TIMEOUT for reason
``DeadlineExceeded`` (the wall time, ``activeDeadlineSeconds``), OUT_OF_MEMORY when the container
was ``OOMKilled``, else FAILED (``BackoffLimitExceeded``); a pod ``Running`` is RUNNING, else
PENDING; a Job hpcjobs cancelled (annotation ``hpcjobs/cancelled``, parallelism 0) that had not
finished is CANCELLED.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.containers import distributed_status
from hpcjobs.states import JobTag
from hpcjobs.units import is_ascii_digits

CHUNK_LABEL = "hpcjobs/chunk"
INDEX_LABEL = "hpcjobs/index"
NAME_LABEL = "hpcjobs/name"
TAG_ANNOTATION = "hpcjobs/tag"
CANCELLED_ANNOTATION = "hpcjobs/cancelled"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
MAX_NAME = 63
_HASH_RE = re.compile(r"(?P<name>.+)-(?P<hash>[0-9a-f]{8})")
_PREFIX_MAX = 12


def experiment_of(sweep_id: str) -> tuple[str, str | None]:
    """``(experiment name, sweep hash)`` of a sweep id ``<name>-<8 hex>``; a single job's id has no hash."""
    m = _HASH_RE.fullmatch(sweep_id)
    return (m["name"], m["hash"]) if m else (sweep_id, None)


def label_value(text: str) -> str:
    """``text`` as a label value: at most 63 of ``[A-Za-z0-9_.-]``, alphanumeric at both ends."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:MAX_NAME]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def chunk_name(tag: JobTag, tasks: int, indexed: bool = False, *, nodes: int = 1) -> str:
    """The chunk's name: ``<experiment>-<sweep hash or x>-<chunk>-<tasks>[n][i]-<token>``, lower case.

    ``i`` after the number of points marks the Indexed form (one Job named after the chunk); ``n``
    marks a distributed job of ``nodes`` pods (one point; ``tasks`` is then ``nodes``). Short
    enough that ``<chunk>-<index>`` (a Job of the one-Job-per-point form) is a valid name.

    Raises:
        ValueError: The chunk and task numbers are too long to fit.
    """
    name, digest = experiment_of(tag.sweep_id)
    prefix = re.sub(r"[^a-z0-9]+", "-", name.lower())[:_PREFIX_MAX].strip("-") or "job"
    count = f"{nodes}n" if nodes > 1 else str(tasks)
    text = f"{prefix}-{digest or 'x'}-{tag.chunk}-{count}{'i' if indexed else ''}-{tag.token}"
    if len(text) + 1 + len(str(max(tasks - 1, 0))) > MAX_NAME:
        raise ValueError(f"cannot name the Jobs of {tag.render()} in {MAX_NAME} characters")
    return text


#: The first server version whose Indexed Jobs have a per-index retry limit (``backoffLimitPerIndex``, beta
#: and on by default in 1.29): before it, a failed index would be run again or fail the other indices.
INDEXED_SINCE = (1, 29)


def parse_server_version(stdout: str) -> tuple[int, int] | None:
    """``(major, minor)`` of ``serverVersion`` in ``kubectl version -o json`` (``None``: no server answered).

    The minor version may carry a suffix (``"28+"`` on some managed clusters), which is ignored.
    """
    try:
        data = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        return None
    server = data.get("serverVersion") if isinstance(data, dict) else None
    if not isinstance(server, dict):
        return None
    major = re.match(r"\d+", str(server.get("major", "")))
    minor = re.match(r"\d+", str(server.get("minor", "")))
    return (int(major.group()), int(minor.group())) if major and minor else None


def indexed_for(version: tuple[int, int] | None) -> bool:
    """Whether a server of ``version`` gets the Indexed form (unknown: no)."""
    return version is not None and version >= INDEXED_SINCE


def tasks_in_name(chunk: str) -> tuple[int, bool] | None:
    """The number of points written in a chunk name, and whether it is one Indexed Job."""
    parts = chunk.rsplit("-", 4)
    if len(parts) != 5:
        return None
    m = re.fullmatch(r"(\d+)n?(i?)", parts[3])
    return (int(m.group(1)), bool(m.group(2))) if m else None


def nodes_in_name(chunk: str) -> int:
    """The pods of a distributed job (``<nodes>n`` in its chunk name), 1 for any other chunk."""
    parts = chunk.rsplit("-", 4)
    m = re.fullmatch(r"(\d+)ni?", parts[3]) if len(parts) == 5 else None
    return int(m.group(1)) if m else 1


def job_names(chunk: str) -> list[str]:
    """The Jobs of a chunk: itself (Indexed form), or ``<chunk>-0`` .. ``<chunk>-<N-1>``."""
    info = tasks_in_name(chunk)
    if info is None:
        return [chunk]
    tasks, indexed = info
    return [chunk] if indexed else [f"{chunk}-{i}" for i in range(tasks)]


def split_job_id(job_id: str) -> tuple[str, str]:
    """``(namespace, chunk)`` of a job id ``<namespace>/<chunk>``."""
    namespace, sep, chunk = job_id.partition("/")
    return (namespace, chunk) if sep else ("default", job_id)


def manifest(pod_spec: Mapping[str, Any], *, chunk: str, namespace: str, tag: str, experiment: str, tasks: int,
             parallel: int, deadline_s: int | None, indexed: bool, nodes: int = 1) -> dict[str, Any]:
    """The object ``kubectl create -f`` takes for a chunk: a List of Jobs, or one Indexed Job.

    Args:
        pod_spec: The pod spec of every pod (one container named ``job``), without the index.
        chunk: The chunk's name (:func:`chunk_name`).
        tasks: Points in the chunk; ``parallel``: at most this many pods at once (the Indexed form only).
        deadline_s: The wall time (``activeDeadlineSeconds`` of each Job), or ``None``.
        indexed: One Indexed Job rather than one Job per point.
        nodes: A distributed job's pods (``tasks`` is then the same): they run together
            (parallelism N), a failed pod fails the job, and each pod gets its IP as ``HPCJOBS_POD_IP``.
    """
    if nodes > 1:
        pod_spec = _with_env(pod_spec, {})
        pod_spec["containers"][0]["env"].insert(0, {"name": "HPCJOBS_POD_IP",
                                                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    labels = {CHUNK_LABEL: chunk, NAME_LABEL: label_value(experiment)}
    meta = {"namespace": namespace, "labels": labels, "annotations": {TAG_ANNOTATION: tag}}

    def job(name: str, spec: dict[str, Any], pod: dict[str, Any], pod_labels: dict[str, str]) -> dict[str, Any]:
        if deadline_s is not None:
            spec["activeDeadlineSeconds"] = deadline_s
        spec["template"] = {"metadata": {"labels": pod_labels}, "spec": pod}
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, **meta, "labels": pod_labels}, "spec": spec}

    if indexed:
        spec: dict[str, Any] = {"completionMode": "Indexed", "completions": tasks, "parallelism": min(parallel, tasks),
                                "backoffLimitPerIndex": 0, "backoffLimit": tasks}
        if nodes > 1:  # all ranks at once; one failed pod fails the job
            spec = {"completionMode": "Indexed", "completions": tasks, "parallelism": tasks, "backoffLimit": 0}
        return job(chunk, spec, _with_env(pod_spec, {"HPCJOBS_K8S_JOB": chunk}), dict(labels))
    items = []
    for i in range(tasks):
        pod_labels = {**labels, INDEX_LABEL: str(i)}
        pod = _with_env(pod_spec, {"HPCJOBS_K8S_INDEX": str(i), "HPCJOBS_K8S_JOB": chunk})
        items.append(job(f"{chunk}-{i}", {"backoffLimit": 0, "completions": 1, "parallelism": 1}, pod, pod_labels))
    # `parallel` is not enforced in this form (a 1.20 server has no suspended Jobs): the scheduler starts
    # the pods as the nodes' capacity allows, by their resource requests
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _with_env(pod_spec: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``pod_spec`` whose container has ``env`` first in its environment."""
    pod: dict[str, Any] = json.loads(json.dumps(pod_spec))
    container = pod["containers"][0]
    container["env"] = [{"name": k, "value": v} for k, v in env.items()] + list(container.get("env", []))
    return pod


# ------------------------------------------------------------------------------ parsing


def parse_list(stdout: str) -> list[dict[str, Any]]:
    """The ``items`` of ``kubectl get ... -o json``.

    Raises:
        SchedulerOutputError: Not a JSON List.
    """
    if not stdout.strip():
        return []
    try:
        data = json.loads(stdout)
    except ValueError as exc:
        raise SchedulerOutputError(f"kubectl printed no JSON: {exc}") from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise SchedulerOutputError("kubectl's JSON has no `items` list")
    return [i for i in items if isinstance(i, dict)]


def _meta(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    value = obj.get("metadata", {}).get(key) or {}
    return value if isinstance(value, dict) else {}


def _index(obj: Mapping[str, Any]) -> int | None:
    text = _meta(obj, "labels").get(INDEX_LABEL) or _meta(obj, "annotations").get(COMPLETION_INDEX_ANNOTATION)
    return int(text) if text is not None and is_ascii_digits(str(text)) else None


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        state = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated")
        if state:
            return dict(state)
    return None


def _condition(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(type, reason)`` of the Job's Complete or Failed condition that is True."""
    for cond in job.get("status", {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"]), str(cond.get("reason", ""))
    return None


def _pod_record(chunk: str, namespace: str, index: int, pods: Sequence[Mapping[str, Any]],
                job: Mapping[str, Any] | None) -> JobStatus:
    """One point from its Job (when it has its own) and its pods (oldest first)."""
    job_id = f"{namespace}/{chunk}"
    task_id = f"{job_id}.{index}"
    term = _terminated(pods[0]) if pods else None
    code = int(term["exitCode"]) if term and term.get("exitCode") is not None else None
    reason = str(term.get("reason", "")) if term else ""
    cond = _condition(job) if job is not None else None
    phase = str(pods[0].get("status", {}).get("phase", "")) if pods else ""
    cancelled = job is not None and _meta(job, "annotations").get(CANCELLED_ANNOTATION) == "true"
    if (cond is not None and cond[0] == "Complete") or (cond is None and phase == "Succeeded"):
        state, raw = st.COMPLETED, "Complete"
    elif (cond is not None and cond[0] == "Failed") or phase == "Failed":
        why = cond[1] if cond else "Failed"
        state = (st.TIMEOUT if why == "DeadlineExceeded" else st.OUT_OF_MEMORY if reason == "OOMKilled"
                 else st.FAILED)
        raw = why if cond else f"pod {phase}"
    elif cancelled:
        state, raw = st.CANCELLED, "cancelled"
    elif phase == "Running":
        state, raw = st.RUNNING, "Running"
    else:
        state, raw = st.PENDING, phase or "no pod yet"
    if state == st.COMPLETED:
        code = 0
    waiting = [str(s["state"]["waiting"].get("reason", "")) for p in pods[:1]
               for s in p.get("status", {}).get("containerStatuses") or [] if s.get("state", {}).get("waiting")]
    why_text = reason or (waiting[0] if waiting else "") or None
    return JobStatus(job_id=task_id, state=state, state_raw=raw, array_job_id=job_id, array_task_id=index,
                     exit_code=code if state not in (st.PENDING, st.RUNNING, st.CANCELLED) else None,
                     reason=why_text, name=chunk)


def job_statuses(items: Iterable[Mapping[str, Any]]) -> list[JobStatus]:
    """One record per point of every chunk found in ``kubectl get jobs,pods -o json`` items."""
    jobs: dict[tuple[str, str], dict[int | None, Mapping[str, Any]]] = {}
    pods: dict[tuple[str, str], dict[int, list[Mapping[str, Any]]]] = {}
    for obj in items:
        chunk = _meta(obj, "labels").get(CHUNK_LABEL)
        if not chunk:
            continue
        key = (str(obj.get("metadata", {}).get("namespace", "default")), chunk)
        if obj.get("kind") == "Job":
            jobs.setdefault(key, {})[_index(obj)] = obj
        elif obj.get("kind") == "Pod":
            index = _index(obj)
            if index is not None:
                pods.setdefault(key, {}).setdefault(index, []).append(obj)
    out: list[JobStatus] = []
    for key in sorted(set(jobs) | set(pods)):
        namespace, chunk = key
        by_index = jobs.get(key, {})
        indexed_job = by_index.get(None)  # the one Job of the Indexed form
        its_pods = pods.get(key, {})
        indices = sorted({i for i in by_index if i is not None} | set(its_pods))
        nodes = nodes_in_name(chunk)
        first = len(out)
        for index in indices:
            group = sorted(its_pods.get(index, []),
                           key=lambda p: str(p.get("metadata", {}).get("creationTimestamp", "")))
            job = by_index.get(index)
            if job is None and indexed_job is not None:
                out.append(_indexed_record(chunk, namespace, index, group, indexed_job))
            else:
                out.append(_pod_record(chunk, namespace, index, group, job))
            info = tasks_in_name(chunk)
            if index == 0 and info is not None and info[0] == 1 and nodes == 1:  # a single job: also under its id
                rec = out[-1]
                out.append(JobStatus(job_id=f"{namespace}/{chunk}", state=rec.state, state_raw=rec.state_raw,
                                     exit_code=rec.exit_code, reason=rec.reason, name=chunk))
        if nodes > 1:  # one point: its ranks' records become the job's one record
            ranks, out[first:] = out[first:], []
            cancelled = any(_meta(j, "annotations").get(CANCELLED_ANNOTATION) == "true" for j in by_index.values())
            out.append(distributed_status(f"{namespace}/{chunk}", ranks, nodes, cancelled=cancelled))
    return out


def _indexed_record(chunk: str, namespace: str, index: int, pods: Sequence[Mapping[str, Any]],
                    job: Mapping[str, Any]) -> JobStatus:
    """A point of an Indexed Job: from its pods, and the Job's deadline or cancellation."""
    rec = _pod_record(chunk, namespace, index, pods, None)
    cond = _condition(job)
    if rec.state in (st.PENDING, st.RUNNING):
        if cond is not None and cond[1] == "DeadlineExceeded":
            return JobStatus(rec.job_id, st.TIMEOUT, "DeadlineExceeded", rec.array_job_id, index, name=chunk)
        if _meta(job, "annotations").get(CANCELLED_ANNOTATION) == "true":
            return JobStatus(rec.job_id, st.CANCELLED, "cancelled", rec.array_job_id, index, name=chunk)
    return rec


def parse_get(stdout: str) -> list[JobStatus]:
    """Records of ``kubectl get jobs,pods -l ... -o json``."""
    return job_statuses(parse_list(stdout))


def parse_created(stdout: str) -> list[str]:
    """The Jobs ``kubectl create -o name`` printed (``job.batch/<name>`` lines).

    Raises:
        SchedulerOutputError: It printed no Job.
    """
    names = [line.split("/", 1)[1] for line in stdout.split() if line.startswith("job.batch/")]
    if not names:
        raise SchedulerOutputError(f"kubectl create printed no Job: {stdout.strip()[:200]!r}")
    return names


def parse_tagged_jobs(stdout: str) -> list[tuple[str, str]]:
    """``(job id, tag)`` of each chunk among ``kubectl get jobs -o json`` items (one pair per chunk)."""
    seen: dict[str, str] = {}
    for obj in parse_list(stdout):
        chunk = _meta(obj, "labels").get(CHUNK_LABEL)
        tag = _meta(obj, "annotations").get(TAG_ANNOTATION)
        if chunk and tag:
            namespace = str(obj.get("metadata", {}).get("namespace", "default"))
            seen.setdefault(f"{namespace}/{chunk}", tag)
    return list(seen.items())
