"""Accounting records of the PBS stand-in (``server_priv/accounting/YYYYMMDD``).

Line format ``MM/DD/YYYY HH:MM:SS;T;id;message`` in local time; field order of OpenPBS
``acct_job()`` (``src/server/accounting.c``) and Torque ``account_jobstr()``.
"""

from __future__ import annotations

import grp
import os
import time
from pathlib import Path
from typing import Any

import standin_state as st


def group_name() -> str:
    """Return the primary group name of the current user."""
    try:
        return grp.getgrgid(os.getgid()).gr_name
    except KeyError:
        return str(os.getgid())


def _quote(value: str) -> str:
    if " " not in value:
        return value
    return f"'{value}'" if '"' in value else f'"{value}"'


def write(root: Path, kind: str, jid: str, message: str, when: float | None = None) -> None:
    """Append one record to the day's accounting file (caller serialises writers)."""
    stamp = time.localtime(when if when is not None else time.time())
    path = root / "server_priv" / "accounting" / time.strftime("%Y%m%d", stamp)
    line = f"{time.strftime('%m/%d/%Y %H:%M:%S', stamp)};{kind};{jid};{message}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _resource_list(rec: dict[str, Any]) -> list[str]:
    return [f"Resource_List.{k}={_quote(str(v))}" for k, v in sorted(rec["resources"].items())]


def job_fields(rec: dict[str, Any], started: bool, *, summary: bool = False) -> str:
    """The acct_job part shared by Q, S, E and R records (OpenPBS) or S/E (Torque).

    ``summary``: an OpenPBS array parent's S/E record (real 23.06: ``start`` but no
    ``exec_host``/``exec_vnode``; ``array_indices`` on Q and S only).
    """
    etime = int(rec["etime"]) if rec.get("etime") else 0
    if rec["flavor"] == "torque":
        fields = [f"user={rec['owner']}", f"group={group_name()}"]
        if rec.get("account"):
            fields.append(f"account={rec['account']}")
        fields += [
            f"jobname={rec['name']}",
            f"queue={rec['queue']}",
            f"ctime={int(rec['ctime'])}",
            f"qtime={int(rec['qtime'])}",
            f"etime={etime}",
        ]
        if started:
            fields += [
                f"start={int(rec['stime'])}",
                f"owner={rec['owner']}@{rec['submit_host']}",
                f"exec_host={rec['exec_host']}",
            ]
        return " ".join(fields + _resource_list(rec))
    fields = [f"user={rec['owner']}", f"group={group_name()}"]
    if rec.get("account"):
        fields.append(f'account="{rec["account"]}"')
    fields.append(f"project={_quote(rec['project'])}")
    fields += [
        f"jobname={rec['name']}",
        f"queue={rec['queue']}",
        f"ctime={int(rec['ctime'])}",
        f"qtime={int(rec['qtime'])}",
        f"etime={etime}",
    ]
    if started:
        fields.append(f"start={int(rec['stime'])}")
    if rec.get("array") and (not started or (summary and rec["state"] != "F")):
        fields.append(f"array_indices={rec['array']['spec'].split('%')[0]}")
    if started and not summary:
        fields += [f"exec_host={rec['exec_host']}", f"exec_vnode={rec['exec_vnode']}"]
    return " ".join(fields + _resource_list(rec))


def queued(root: Path, rec: dict[str, Any]) -> None:
    """Write the Q record."""
    message = f"queue={rec['queue']}" if rec["flavor"] == "torque" else job_fields(rec, started=False)
    write(root, "Q", rec["id"], message, rec["qtime"])


def started(root: Path, rec: dict[str, Any]) -> None:
    """Write the S record."""
    message = job_fields(rec, started=True)
    if rec["flavor"] == "pbspro":
        assigned = []
        if "mem" in rec["resources"]:
            assigned.append(f"resource_assigned.mem={st.size_bytes(rec['resources']['mem']) // 1024}kb")
        assigned.append(f"resource_assigned.ncpus={rec['resources'].get('ncpus', 1)}")
        message += " " + " ".join(assigned)
    write(root, "S", rec["id"], message, rec["stime"])


def ended(root: Path, rec: dict[str, Any], kind: str = "E") -> None:
    """Write the E record (or R for a rerun) with usage and Exit_status."""
    used = rec.get("used") or {}
    cput = used.get("cput", 0)
    mem = f"{used.get('mem_kb', 0)}kb"
    wall = st.hms(used.get("walltime", 0))
    end = int(rec.get("obittime") or time.time())
    if rec["flavor"] == "torque":
        if kind == "R":
            write(root, "R", rec["id"], "", end)
            return
        ncpus = sum(c["count"] * int(c["res"].get("ncpus", 1)) for c in rec["chunks"])
        tail = (
            f"session={rec.get('session_id', 0)} total_execution_slots={ncpus} "
            f"unique_node_count=1 end={end} Exit_status={rec['exit_status']} "
            f"resources_used.cput={int(cput)} resources_used.energy_used=0 "
            f"resources_used.mem={mem} resources_used.vmem={mem} resources_used.walltime={wall}"
        )
        write(root, kind, rec["id"], job_fields(rec, started=True) + " " + tail, end)
        return
    tail = (
        f"session={rec.get('session_id', 0)} end={end} Exit_status={rec['exit_status']} "
        f"resources_used.cpupercent=0 resources_used.cput={st.hms(cput)} resources_used.mem={mem} "
        f"resources_used.ncpus={rec['resources'].get('ncpus', 1)} resources_used.vmem={mem} "
        f"resources_used.walltime={wall} run_count={rec['run_count']}"
    )
    write(root, kind, rec["id"], job_fields(rec, started=True) + " " + tail, end)


def array_started(root: Path, rec: dict[str, Any]) -> None:
    """Write the S record of an OpenPBS array parent when its first subjob starts (real 23.06)."""
    write(root, "S", rec["id"], job_fields(rec, started=True, summary=True), rec["stime"])


def array_ended(root: Path, rec: dict[str, Any]) -> None:
    """Write the E record of a finished array parent: no usage fields, ``session=0`` and
    ``run_count=0`` (real OpenPBS 23.06; Torque's is derived)."""
    end = int(rec.get("obittime") or time.time())
    if rec["flavor"] == "pbspro":
        fields = job_fields(rec, started=bool(rec.get("stime")), summary=True)
        tail = f" session=0 end={end} Exit_status={rec['exit_status']} run_count=0"
        write(root, "E", rec["id"], fields + tail, end)
        return
    write(root, "E", rec["id"], job_fields(rec, started=False) + f" end={end} Exit_status={rec['exit_status']}", end)


def deleted(root: Path, jid: str, requestor: str) -> None:
    """Write the D record of a qdel."""
    write(root, "D", jid, f"requestor={requestor}")
