"""Docker Swarm services and tasks → the normalised accounting DataFrame (:mod:`hpcjobs.accounting.schema`).

Sources, each JSON as docker prints it (Docker Engine API object shapes, seen on Docker 20.10):

* ``docker inspect <services> <tasks> [<containers>]``: a list mixing services (``Spec.Name``),
  tasks (``ServiceID``, ``Slot``, ``CreatedAt``, ``Status``) and containers (``State``);
* the records hpcjobs saves before it removes a finished service
  (``<sweep folder>/scheduler-records/<service>.json``, :mod:`hpcjobs.sweep.retire`): one object
  ``{"service": ..., "tasks": [...], "containers": [...]}``, or a list of them;
* live (:func:`query_swarm`): the services labelled ``hpcjobs.tag`` (``docker service ls``), their
  tasks (``docker service ps -q``), one ``docker inspect`` of both, one of the containers this node has.

One row per task slot (a sweep point), from the task that ran the script (the first of the slot
that started it, as :func:`hpcjobs.schedulers.swarm.formats.job_statuses` decides): ``submit_time`` and
``eligible_time`` are the slot's first task's ``CreatedAt``; ``start_time``/``end_time`` the
container's ``State.StartedAt``/``FinishedAt`` where the container's record is there (else the end
is the task's last status time), so ``wait`` is pending → running; a container with
``State.OOMKilled`` is OUT_OF_MEMORY; ``cpus``/``req_mem_bytes``/``gpus`` are the service's
reservations; ``time_limit`` its ``hpcjobs.walltime`` label. Slots of a cancelled service that never
started are one row with their range (``array_task_spec``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

import hpcjobs.schedulers  # noqa: F401  (before the PBS row helpers: see hpcjobs.accounting.report_source)
from hpcjobs import process
from hpcjobs import states as st
from hpcjobs.accounting.sources.pbs import rows_to_frame
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.swarm import formats as fmt
from hpcjobs.states import parse_job_tag
from hpcjobs.units import is_ascii_digits

#: Folder of a sweep where hpcjobs saves the records of the services it removed.
RECORDS_DIR = "scheduler-records"


def _time(text: object) -> datetime | None:
    """An RFC 3339 time with nanoseconds (``2026-12-04T15:11:10.811279811Z``); ``None`` for the zero time."""
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    head, _, frac = text.rstrip("Z").partition(".")
    try:
        base = datetime.fromisoformat(head + "+00:00")
    except ValueError:
        return None
    digits = "".join(c for c in frac if is_ascii_digits(c))[:6]
    return base.replace(microsecond=int(digits.ljust(6, "0"))) if digits else base


def split_objects(objects: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]],
                                                                 list[Mapping[str, Any]]]:
    """``(services, tasks, containers)`` among ``docker inspect`` objects and hpcjobs' saved records."""
    services: list[Mapping[str, Any]] = []
    tasks: list[Mapping[str, Any]] = []
    containers: list[Mapping[str, Any]] = []
    for obj in objects:
        if "tasks" in obj and "service" in obj:  # a saved record
            if isinstance(obj.get("service"), dict):
                services.append(obj["service"])
            tasks += [t for t in obj.get("tasks") or [] if isinstance(t, dict)]
            containers += [c for c in obj.get("containers") or [] if isinstance(c, dict)]
        elif "ServiceID" in obj:
            tasks.append(obj)
        elif "State" in obj and "Config" in obj:
            containers.append(obj)
        elif isinstance(obj.get("Spec"), dict) and "Name" in obj["Spec"]:
            services.append(obj)
    return services, tasks, containers


def _task(task: Mapping[str, Any], service: str) -> fmt.Task:
    status = task.get("Status") or {}
    image = str(((task.get("Spec") or {}).get("ContainerSpec") or {}).get("Image", "")).split("@", 1)[0]
    return fmt.Task(service=service, slot=int(task.get("Slot") or 0), state=str(status.get("State", "")).capitalize(),
                    desired=str(task.get("DesiredState", "")).capitalize(), error=str(status.get("Err", "")),
                    image=image, task_id=str(task.get("ID", "")))


def swarm_rows(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Row dicts (one per slot) of Swarm services, tasks and containers (see the module docstring)."""
    services, tasks, containers = split_objects(objects)
    by_id = {str(s.get("ID")): s for s in services}
    by_container = {str(c.get("Id")): c for c in containers}
    parsed: list[tuple[fmt.Task, Mapping[str, Any]]] = []
    for task in sorted(tasks, key=lambda t: str(t.get("CreatedAt", "")), reverse=True):  # newest first, as ps
        service = by_id.get(str(task.get("ServiceID")))
        if service is not None:
            parsed.append((_task(task, str(service["Spec"]["Name"])), task))
    raw_of = {t.task_id: raw for t, raw in parsed}
    first_created: dict[tuple[str, int], datetime] = {}
    for t, raw in parsed:
        created = _time(raw.get("CreatedAt"))
        key = (t.service, t.slot)
        if created and (key not in first_created or created < first_created[key]):
            first_created[key] = created
    deciding: dict[tuple[str, int], fmt.Task] = {}
    groups: dict[tuple[str, int], list[fmt.Task]] = {}
    for t, _raw in parsed:
        if t.image != fmt.CANCELLED_IMAGE:
            groups.setdefault((t.service, t.slot), []).append(t)
    for key, group in groups.items():
        deciding[key] = next((t for t in reversed(group) if t.started_script), group[0])
    spec_of = {str(s["Spec"]["Name"]): s for s in services}
    rows = []
    for rec in fmt.job_statuses(t for t, _ in parsed):
        if rec.array_job_id is None:
            continue  # the copy of a single job's record under its own name
        service = spec_of.get(rec.array_job_id, {})
        spec = service.get("Spec") or {}
        labels = spec.get("Labels") or {}
        reserve = ((spec.get("TaskTemplate") or {}).get("Resources") or {}).get("Reservations") or {}
        gpus = sum(int((g.get("DiscreteResourceSpec") or {}).get("Value") or 0)
                   for g in reserve.get("GenericResources") or [] if isinstance(g, dict))
        tag = parse_job_tag(labels.get("hpcjobs.tag"))
        walltime = labels.get("hpcjobs.walltime")
        row: dict[str, Any] = {
            "scheduler": "swarm", "job_id": rec.job_id, "job_id_raw": rec.job_id, "array_job_id": rec.array_job_id,
            "array_task_id": rec.array_task_id, "array_task_spec": rec.array_task_spec,
            "job_name": labels.get("hpcjobs.job-name") or rec.array_job_id, "state": rec.state,
            "state_raw": rec.state_raw, "exit_code": rec.exit_code,
            "time_limit": float(walltime) if walltime and is_ascii_digits(str(walltime)) else None,
            "cpus": math.ceil(reserve["NanoCPUs"] / 1e9) if reserve.get("NanoCPUs") else None,
            "req_mem_bytes": reserve.get("MemoryBytes") or None, "gpus": gpus or None,
            "comment": labels.get("hpcjobs.tag"), "sweep_id": tag.sweep_id if tag else None,
            "chunk": tag.chunk if tag else None, "submit_time": _time(service.get("CreatedAt")),
        }
        chosen = deciding.get((rec.array_job_id, rec.array_task_id)) if rec.array_task_id is not None else None
        if chosen is not None:
            raw = raw_of[chosen.task_id]
            status = raw.get("Status") or {}
            cid = str((status.get("ContainerStatus") or {}).get("ContainerID", ""))
            container = by_container.get(cid) or {}
            state = container.get("State") or {}
            started, finished = _time(state.get("StartedAt")), _time(state.get("FinishedAt"))
            created = first_created.get((chosen.service, chosen.slot))
            end = finished or (_time(status.get("Timestamp")) if rec.state in st.TERMINAL_STATES else None)
            if state.get("OOMKilled") and rec.state == st.FAILED:
                row["state"], row["state_raw"] = st.OUT_OF_MEMORY, f"{rec.state_raw} (OOMKilled)"
            row.update({
                "submit_time": created, "eligible_time": created, "start_time": started, "end_time": end,
                "wait": (started - created).total_seconds() if started and created else None,
                "elapsed": (end - started).total_seconds() if started and end else None,
                "nodes": 1 if started else None, "node_list": raw.get("NodeID"),
            })
        rows.append(row)
    return rows


def _objects(doc: object) -> list[Mapping[str, Any]]:
    items = doc if isinstance(doc, list) else [doc]
    return [o for o in items if isinstance(o, dict)]


def is_swarm_json(doc: object) -> bool:
    """Whether parsed JSON is ``docker inspect`` output of Swarm tasks/services or hpcjobs' saved records."""
    objects = _objects(doc)
    return bool(objects) and all(("tasks" in o and "service" in o) or "ServiceID" in o
                                 or isinstance(o.get("Spec"), dict) or ("State" in o and "Config" in o)
                                 for o in objects)


def read_swarm_json(text: str, file: str = "<text>") -> pd.DataFrame:
    """Saved ``docker inspect`` output or hpcjobs' saved records → a schema DataFrame.

    Raises:
        ConfigError: Not JSON of that kind.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(ConfigProblem(f"not JSON: {exc}", file=file)) from None
    if not is_swarm_json(doc):
        raise ConfigError(ConfigProblem("not `docker inspect` output of Swarm services and tasks, nor hpcjobs' "
                                        "saved records", file=file))
    return rows_to_frame(swarm_rows(_objects(doc)))


def saved_records(folder: str | Path) -> list[Mapping[str, Any]]:
    """The records hpcjobs saved in a sweep folder before removing its finished services."""
    out: list[Mapping[str, Any]] = []
    for path in sorted((Path(folder) / RECORDS_DIR).glob("*.json")):
        try:
            out += _objects(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def query_swarm(sweep_folder: str | Path | None = None, timeout: float = 120.0) -> pd.DataFrame:
    """hpcjobs' services on this Swarm (asked live: 3 or 4 docker calls), with a sweep's saved records.

    Raises:
        CommandError: docker failed (its argv, exit code and stderr attached).
    """
    from hpcjobs.schedulers.swarm.backend import SwarmBackend

    backend = SwarmBackend()  # its grammar checks every name and id docker printed before it goes into an argv
    objects: list[Mapping[str, Any]] = saved_records(sweep_folder) if sweep_folder is not None else []
    listing = ["docker", "service", "ls", "--filter", "label=hpcjobs.tag", "--format", "{{.Name}}"]
    names = backend.check_job_ids(process.run_command(listing, timeout=timeout).stdout.split(),
                                  source="the output of `docker service ls`")
    if names:
        task_ids = backend.check_object_ids(
            process.run_command(["docker", "service", "ps", "--no-trunc", "--quiet", "--", *names], timeout=timeout,
                                check=False).stdout.split(), source="the output of `docker service ps`")
        found = _objects(_loads(process.run_command(backend.inspect_argv([*names, *task_ids]), timeout=timeout,
                                                    check=False).stdout))
        cids = [str(((o.get("Status") or {}).get("ContainerStatus") or {}).get("ContainerID", "")) for o in found
                if "ServiceID" in o]
        cids = backend.check_object_ids([c for c in cids if c], source="the output of `docker inspect`")
        if cids:
            found += _objects(_loads(process.run_command(["docker", "inspect", "--type", "container", "--", *cids],
                                                         timeout=timeout, check=False).stdout))
        objects += found
    return rows_to_frame(swarm_rows(objects))


def _loads(text: str) -> object:
    try:
        return json.loads(text) if text.strip() else []
    except ValueError:
        return []


__all__ = ["RECORDS_DIR", "is_swarm_json", "query_swarm", "read_swarm_json", "saved_records", "split_objects",
           "swarm_rows"]
