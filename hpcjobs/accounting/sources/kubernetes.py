"""Kubernetes Jobs and pods → the normalised accounting DataFrame (:mod:`hpcjobs.accounting.schema`).

Source: ``kubectl get jobs,pods -o json`` (a ``v1`` List) of hpcjobs' Jobs, saved
(:func:`read_kubectl_json`) or asked live (:func:`query_kubernetes`: one call, every namespace, the
objects labelled ``hpcjobs/chunk``). One row per point (pod index) of each chunk, as the status poll
sees it (:func:`hpcjobs.schedulers.kubernetes.formats.job_statuses`: Complete, BackoffLimitExceeded,
DeadlineExceeded → TIMEOUT, OOMKilled → OUT_OF_MEMORY), with the times of the Job and its pod
(``batch/v1`` JobStatus and ``v1`` PodStatus, kubernetes.io API reference):

* ``submit_time``: the Job's (one Job per point) or the pod's ``creationTimestamp``;
  ``eligible_time``: the pod's creation (it can be scheduled from then on);
* ``start_time``: when the container started (``state.running/terminated.startedAt``), so
  ``wait`` is pending → running, image pull included; ``end_time``: the container's
  ``finishedAt``, else the time of the Job's Complete/Failed condition (a pod deleted at its
  deadline);
* ``cpus``/``req_mem_bytes``/``gpus``: the container's resource requests (limits for GPUs);
  ``time_limit``: ``activeDeadlineSeconds``; ``partition``: the namespace; ``node_list``: the node;
* restarts of the container (``restartCount``) are noted in ``state_raw`` (``... (2 restarts)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

import hpcjobs.schedulers  # noqa: F401  (before the PBS row helpers: see hpcjobs.accounting.report_source)
from hpcjobs import process
from hpcjobs.accounting.sources.pbs import rows_to_frame
from hpcjobs.errors import ConfigError, ConfigProblem, SchedulerOutputError
from hpcjobs.schedulers.kubernetes import formats as fmt
from hpcjobs.states import parse_job_tag
from hpcjobs.units import is_ascii_digits

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40, "m": 1e-3}


def quantity(text: object) -> float | None:
    """A Kubernetes quantity (``500m``, ``2``, ``128Mi``, ``1G``) as a number; ``None`` if not one."""
    m = _QUANTITY.match(str(text).strip()) if text is not None else None
    if not m or m.group(2) not in _UNITS:
        return None
    try:
        return float(m.group(1)) * _UNITS[m.group(2)]
    except ValueError:
        return None


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _container_times(pod: Mapping[str, Any]) -> tuple[datetime | None, datetime | None, int]:
    """``(started, finished, restarts)`` of the pod's first container."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        run = state.get("running") or state.get("terminated") or {}
        last = (status.get("lastState") or {}).get("terminated") or {}
        started = _time(last.get("startedAt")) or _time(run.get("startedAt"))
        finished = _time((state.get("terminated") or {}).get("finishedAt"))
        return started, finished, int(status.get("restartCount") or 0)
    return None, None, 0


def _condition_time(job: Mapping[str, Any] | None) -> datetime | None:
    for cond in (job or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return _time(cond.get("lastTransitionTime"))
    return _time((job or {}).get("status", {}).get("completionTime"))


def _resources(pod_spec: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """``(cpus, memory bytes, gpus)`` a pod asks for (its first container)."""
    containers = pod_spec.get("containers") or [{}]
    res = containers[0].get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    cpu = quantity(requests.get("cpu", limits.get("cpu")))
    mem = quantity(requests.get("memory", limits.get("memory")))
    gpus = sum(int(quantity(v) or 0) for k, v in limits.items() if "gpu" in k.lower())
    return (math.ceil(cpu) if cpu else None, int(mem) if mem else None, gpus or None)


def _meta(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    value = obj.get("metadata", {}).get(key) or {}
    return value if isinstance(value, dict) else {}


def kubernetes_rows(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Row dicts (one per point) of ``kubectl get jobs,pods -o json`` items."""
    jobs: dict[tuple[str, str, int | None], Mapping[str, Any]] = {}
    pods: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for obj in items:
        chunk = _meta(obj, "labels").get(fmt.CHUNK_LABEL)
        if not chunk:
            continue
        namespace = str(obj.get("metadata", {}).get("namespace", "default"))
        text = (_meta(obj, "labels").get(fmt.INDEX_LABEL)
                or _meta(obj, "annotations").get(fmt.COMPLETION_INDEX_ANNOTATION))
        index = int(text) if text is not None and is_ascii_digits(str(text)) else None
        if obj.get("kind") == "Job":
            jobs[(namespace, chunk, index)] = obj
        elif obj.get("kind") == "Pod" and index is not None:
            pods.setdefault((namespace, chunk, index), []).append(obj)
    rows = []
    for rec in fmt.job_statuses(items):
        if rec.array_task_id is None or rec.array_job_id is None:
            continue  # the copy of a single job's record under its own id
        namespace, chunk = fmt.split_job_id(rec.array_job_id)
        index = rec.array_task_id
        job = jobs.get((namespace, chunk, index)) or jobs.get((namespace, chunk, None))
        group = sorted(pods.get((namespace, chunk, index), []),
                       key=lambda p: str(p.get("metadata", {}).get("creationTimestamp", "")))
        pod = group[0] if group else None
        started, finished, restarts = _container_times(pod) if pod else (None, None, 0)
        submit = _time((job or pod or {}).get("metadata", {}).get("creationTimestamp"))
        eligible = _time(pod.get("metadata", {}).get("creationTimestamp")) if pod else None
        end = finished or (_condition_time(job) if rec.state not in ("PENDING", "RUNNING") else None)
        template = (job or {}).get("spec", {}).get("template", {}).get("spec") or (pod or {}).get("spec") or {}
        cpus, mem, gpus = _resources(template)
        deadline = (job or {}).get("spec", {}).get("activeDeadlineSeconds")
        tag_text = _meta(job or pod or {}, "annotations").get(fmt.TAG_ANNOTATION)
        tag = parse_job_tag(tag_text)
        raw = rec.state_raw + (f" ({restarts} restarts)" if restarts else "")
        start_ref = eligible or submit
        rows.append({
            "scheduler": "kubernetes", "job_id": rec.job_id, "job_id_raw": rec.job_id,
            "array_job_id": rec.array_job_id, "array_task_id": index, "job_name": chunk,
            "partition": namespace, "state": rec.state, "state_raw": raw, "exit_code": rec.exit_code,
            "submit_time": submit, "eligible_time": eligible, "start_time": started, "end_time": end,
            "wait": (started - start_ref).total_seconds() if started and start_ref else None,
            "elapsed": (end - started).total_seconds() if started and end else None,
            "time_limit": float(deadline) if deadline else None,
            "nodes": 1 if started else None, "cpus": cpus, "gpus": gpus, "req_mem_bytes": mem,
            "node_list": (pod or {}).get("spec", {}).get("nodeName"), "comment": tag_text,
            "sweep_id": tag.sweep_id if tag else None, "chunk": tag.chunk if tag else None,
        })
    return rows


def read_kubectl_json(text: str, file: str = "<text>") -> pd.DataFrame:
    """Saved ``kubectl get jobs,pods -o json`` output → a schema DataFrame.

    Raises:
        ConfigError: Not the JSON List kubectl prints.
    """
    try:
        items = fmt.parse_list(text)
    except SchedulerOutputError as exc:
        raise ConfigError(ConfigProblem(f"not `kubectl get jobs,pods -o json` output: {exc}", file=file)) from None
    return rows_to_frame(kubernetes_rows(items))


def is_kubectl_list(doc: object) -> bool:
    """Whether parsed JSON is a ``kubectl get ... -o json`` List holding Jobs or pods."""
    return (isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list)
            and any(isinstance(i, dict) and i.get("kind") in ("Job", "Pod") for i in doc["items"]))


def query_kubernetes(timeout: float = 120.0) -> pd.DataFrame:
    """hpcjobs' Jobs and pods of every namespace the current ``kubectl`` context sees, asked once.

    Raises:
        CommandError: kubectl failed (its argv, exit code and stderr attached).
    """
    argv = ["kubectl", "get", "jobs,pods", "--all-namespaces", "-l", fmt.CHUNK_LABEL, "-o", "json"]
    result = process.run_command(argv, timeout=timeout)
    return read_kubectl_json(result.stdout, "kubectl get jobs,pods")


__all__ = ["is_kubectl_list", "kubernetes_rows", "quantity", "query_kubernetes", "read_kubectl_json"]
