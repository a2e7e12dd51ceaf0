"""Removing finished jobs from a scheduler that keeps them until told (Docker Swarm's services).

A Swarm ``replicated-job`` service stays, with its tasks, after every task finished; a sweep of many
chunks would pile them up. Once the ledger has recorded every point of a submission final (so the
status is saved first, never before), :func:`retire_finished` saves what the scheduler knows of the
job (``docker inspect`` of the service, of its tasks and of their containers where this node has
them) in ``<sweep folder>/scheduler-records/<job id>.json``, which the accounting reader uses
(:mod:`hpcjobs.accounting.sources.swarm`), and then removes it. A job one of whose tasks could still run
(Swarm's new task in a slot that failed, a task still being stopped) is left for a later poll.

Backends opt in with the hooks ``retire_argv``, ``settled_services`` and ``inspect_argv``
(:class:`hpcjobs.schedulers.swarm.backend.SwarmBackend`); others are left alone. Nothing here imports pandas.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from pathlib import Path
from typing import Any

from hpcjobs.errors import HpcJobsError, UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.sweep.ledger.store import Ledger

#: The sweep's folder of saved scheduler records, one file per removed job.
RECORDS_DIR = "scheduler-records"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_log = logging.getLogger("hpcjobs.sweep")


def record_path(folder: Path, job_id: str) -> Path:
    """Where the records of ``job_id`` are saved in the sweep folder."""
    return folder / RECORDS_DIR / f"{_SAFE.sub('_', job_id)}.json"


def _json_list(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text) if text.strip() else []
    except ValueError:
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def retire_finished(ledger: Ledger, client: SchedulerClient) -> list[str]:
    """Save the records of, then remove, the jobs whose points the ledger has all recorded final.

    Returns:
        The job ids removed by this call.

    Raises:
        CommandError: A docker command failed for another reason than an unknown object.
    """
    backend = client.backend
    if not backend.capabilities.retire or ledger.read_only:
        return []
    retire, settled, inspect = backend.retire_argv, backend.settled_services, backend.inspect_argv
    folder = ledger.path.parent
    live = {s.job_id for s in ledger.live_submissions()}
    done = sorted({s.job_id for s in ledger.submissions("submitted", with_points=False)
                   if s.job_id and s.job_id not in live and not record_path(folder, s.job_id).exists()})
    if not done:
        return []
    answer = client.run(backend.status_argv(done), check=False)
    ready = settled(answer.stdout)
    gone = [j for j in done if j not in ready and "no such service" in answer.stderr and j in answer.stderr]
    names = [j for j in done if j in ready]
    saved: list[str] = []
    if names:
        objects = _json_list(client.run(inspect([*names, *(t for n in names for t in ready[n])]),
                                        check=False).stdout)
        containers = [str(o["Status"]["ContainerStatus"]["ContainerID"]) for o in objects
                      if (o.get("Status") or {}).get("ContainerStatus", {}).get("ContainerID")]
        found = _json_list(client.run(inspect(containers), check=False).stdout) if containers else []
        for name in names:
            service = next((o for o in objects if (o.get("Spec") or {}).get("Name") == name), None)
            sid = service.get("ID") if service else None
            tasks = [o for o in objects if sid and o.get("ServiceID") == sid]
            ids = {str(t["Status"]["ContainerStatus"].get("ContainerID")) for t in tasks
                   if (t.get("Status") or {}).get("ContainerStatus")}
            record = {"job_id": name, "service": service, "tasks": tasks,
                      "containers": [c for c in found if c.get("Id") in ids]}
            try:
                atomic_write_text(record_path(folder, name), json.dumps(record, indent=1) + "\n", below=folder)
            except (OSError, UnsafePathError) as exc:  # not removed: its records would be lost
                _log.warning("cannot save the records of %s (%s): not removing it", name, exc)
                continue
            saved.append(name)
    for name in gone:  # removed by someone else: nothing to save or remove
        with contextlib.suppress(OSError, UnsafePathError):
            atomic_write_text(record_path(folder, name), json.dumps({"job_id": name, "service": None, "tasks": [],
                                                                     "containers": []}) + "\n", below=folder)
    if saved:
        try:
            client.run(retire(saved), check=True)
        except HpcJobsError as exc:
            _log.warning("could not remove finished jobs %s: %s", ", ".join(saved), exc)
            return []
    return saved


__all__ = ["RECORDS_DIR", "record_path", "retire_finished"]
