"""Runner of the PBS stand-in: one detached process per submitted job or array.

It waits for holds and dependencies, starts the script (or the subjobs, at most
``max_run_subjobs`` at a time) with bash in the PBS environment, enforces walltime
(SIGTERM to the job's process group, SIGKILL after ``kill_delay``), delivers the
output files, and records the end (job record + accounting). Run as
``python3 standin_run.py <seq>`` with ``PBS_STANDIN_HOME`` set.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import standin_acct as acct
import standin_state as st

POLL = 0.05  # while processes run (exit, walltime, qdel checks)
IDLE_POLL = 0.2  # while waiting for a hold or a dependency


def spawn(root: Path, seq: int) -> int:
    """Start the detached runner for job ``seq``; return its pid."""
    log = open(root / "server_logs" / f"runner-{seq}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(seq)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        close_fds=True,
    )
    log.close()
    st.write_atomic(root / "server_logs" / f"runner-{seq}.pid", str(proc.pid))
    return proc.pid


def _units(root: Path, parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [parent] if parent["kind"] == "job" else st.subjobs(root, parent)


def _target(root: Path, dep: dict[str, Any]) -> dict[str, Any] | None:
    if dep["array"]:
        return st.load(root, dep["seq"], int(dep["array"]))
    return st.load(root, dep["seq"])


def dependency_verdict(root: Path, rec: dict[str, Any]) -> str | None:
    """Return ``ok`` when all dependencies hold, ``fail:<id>`` if one cannot, None to wait."""
    for dep in rec.get("depend_list") or []:
        target = _target(root, dep)
        if target is None:
            return f"fail:{st.job_id(dep['seq'], dep['array'])}"
        done, status = target.get("done", False), target.get("exit_status")
        kind = dep["type"]
        if kind == "after" and (target.get("run_count", 0) > 0 or done):
            continue
        if not done:
            return None
        good = status == 0 and not target.get("deleted")
        if kind == "afterany" or (kind == "afterok" and good) or (kind == "afternotok" and not good):
            continue
        return f"fail:{target['id']}"
    return "ok"


def finish_record(rec: dict[str, Any], status: int | None, substate: int, suffix: str | None) -> None:
    """Mark a record finished (F / C; subjobs X until the array ends)."""
    now = time.time()
    torque = rec["flavor"] == "torque"
    rec["done"] = True
    rec["state"] = "C" if torque else ("X" if rec["kind"] == "subjob" else "F")
    rec["substate"] = 59 if torque else substate
    rec["exit_status"] = status
    rec["mtime"] = now
    if rec.get("stime"):
        rec["obittime"] = now
    rec["history_timestamp"] = int(now)
    rec["comp_time"] = now
    if suffix and rec.get("comment"):
        rec["comment"] = f"{rec['comment']} and {suffix}"


def _exec_layout(rec: dict[str, Any], host: str) -> tuple[str, str, list[str]]:
    """exec_host, exec_vnode and PBS_NODEFILE lines for the record's chunks."""
    hosts, vnodes, nodefile = [], [], []
    slot = 0
    for chunk in rec["chunks"]:
        ncpus = int(chunk["res"].get("ncpus", 1))
        for _ in range(chunk["count"]):
            if rec["flavor"] == "torque":
                hosts.append(f"{host}/0-{ncpus - 1}" if ncpus > 1 else f"{host}/0")
                nodefile.extend([host] * ncpus)
            else:
                hosts.append(f"{host}/{slot}" + (f"*{ncpus}" if ncpus > 1 else ""))
                vnode = f"{host}:ncpus={ncpus}"
                if "mem" in chunk["res"]:
                    vnode += f":mem={-(-st.size_bytes(st.normalise_size(chunk['res']['mem'])) // 1024)}kb"
                if "ngpus" in chunk["res"]:
                    vnode += f":ngpus={chunk['res']['ngpus']}"
                vnodes.append(f"({vnode})")
                nodefile.extend([host] * int(chunk["res"].get("mpiprocs", 1)))
            slot += 1
    return "+".join(hosts), "+".join(vnodes), nodefile


def _environment(root: Path, rec: dict[str, Any], nodefile: Path, tmpdir: Path) -> dict[str, str]:
    variables = dict(rec["variables"])
    env = {k: v for k, v in os.environ.items() if k in ("TZ", "LANG", "LC_ALL", "TERM")}
    env.update(
        {
            "HOME": rec["user_home"],
            "USER": rec["owner"],
            "LOGNAME": rec["owner"],
            "SHELL": rec.get("shell") or "/bin/bash",
            "PATH": variables.get("PBS_O_PATH", os.defpath),
        }
    )
    env.update({k: v for k, v in variables.items()})
    first = rec["chunks"][0]["res"]
    ncpus = str(first.get("ncpus", 1))
    env.update(
        {
            "PBS_JOBID": rec["id"],
            "PBS_JOBNAME": rec["name"],
            "PBS_QUEUE": rec["queue"],
            "PBS_ENVIRONMENT": "PBS_BATCH",
            "PBS_NODEFILE": str(nodefile),
            "PBS_JOBDIR": rec["user_home"],
            "PBS_TASKNUM": "1",
            "PBS_NODENUM": "0",
            "PBS_MOMPORT": "15003",
            "TMPDIR": str(tmpdir),
        }
    )
    if rec["flavor"] == "pbspro":
        env.update({"ENVIRONMENT": "BATCH", "NCPUS": ncpus, "OMP_NUM_THREADS": str(first.get("ompthreads", ncpus))})
        if rec["kind"] == "subjob":
            env.update({"PBS_ARRAY_INDEX": str(rec["index"]), "PBS_ARRAY_ID": rec["array_id"]})
    else:
        nodes = sum(c["count"] for c in rec["chunks"])
        env.update(
            {
                "PBS_NUM_NODES": str(nodes),
                "PBS_NUM_PPN": ncpus,
                "PBS_NP": str(nodes * int(ncpus)),
                "PBS_SERVER": st.server_name(),
                "PBS_VNODENUM": "0",
                "PBS_O_SERVER": st.server_name(),
            }
        )
        if "walltime" in rec["resources"]:
            env["PBS_WALLTIME"] = str(st.parse_duration(rec["resources"]["walltime"]))
        if rec["kind"] == "subjob":
            env["PBS_ARRAYID"] = str(rec["index"])
    return env


def start_unit(root: Path, rec: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Start one job or subjob (caller holds the lock); return the process handle."""
    now = time.time()
    host = config["exec_host"]
    exec_host, exec_vnode, lines = _exec_layout(rec, host)
    spool = root / "spool"
    nodefile = spool / f"{rec['id']}.NF"
    nodefile.write_text("".join(f"{h}\n" for h in lines))
    tmpdir = root / "tmp" / f"pbs.{rec['id']}"
    tmpdir.mkdir(parents=True, exist_ok=True)
    out, err = spool / f"{rec['id']}.OU", spool / f"{rec['id']}.ER"
    join = rec.get("join", "n")
    stdout = open(out, "wb")  # noqa: SIM115
    stderr = stdout if join == "oe" else open(err, "wb")  # noqa: SIM115
    if join == "eo":
        stdout.close()
        stdout = stderr = open(err, "wb")  # noqa: SIM115
    shell = rec.get("shell") or "/bin/bash"
    cwd = rec["user_home"] if os.path.isdir(rec["user_home"]) else "/"
    proc = subprocess.Popen(
        [shell, str(spool / f"{rec['seq']}.SC")],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=_environment(root, rec, nodefile, tmpdir),
        start_new_session=True,
        close_fds=True,
    )
    stdout.close()
    if stderr is not stdout:
        stderr.close()
    rec.update(
        {
            "state": "R",
            "substate": 42,
            "stime": now,
            "mtime": now,
            "session_id": proc.pid,
            "exec_host": exec_host,
            "exec_vnode": exec_vnode,
            "run_count": rec.get("run_count", 0) + 1,
            "comment": f"Job run at {time.strftime('%a %b %d at %H:%M', time.localtime(now))} on {exec_vnode}"
            if rec["flavor"] == "pbspro"
            else None,
            "used": {"cput": 0, "mem_kb": 0, "walltime": 0},
        }
    )
    st.save(root, rec)
    acct.started(root, rec)
    walltime = rec["resources"].get("walltime")
    return {
        "pid": proc.pid,
        "proc": proc,
        "start": now,
        "deadline": now + st.parse_duration(walltime) if walltime else None,
        "term_at": None,
        "reason": None,
        "index": rec.get("index"),
    }


def _deliver(root: Path, rec: dict[str, Any]) -> None:
    spool = root / "spool"
    targets = []
    join = rec.get("join", "n")
    if join != "eo":
        targets.append((spool / f"{rec['id']}.OU", rec["output_path"]))
    if join != "oe":
        targets.append((spool / f"{rec['id']}.ER", rec["error_path"]))
    for source, dest in targets:
        path = dest.split(":", 1)[1] if ":" in dest else dest
        try:
            shutil.move(str(source), path)
        except OSError as exc:
            print(f"cannot deliver {source} to {path}: {exc}", file=sys.stderr)


def _exit_status(rec: dict[str, Any], handle: dict[str, Any], wait_status: int, config: dict[str, Any]) -> int:
    if handle["reason"] == "walltime":
        if rec["flavor"] == "torque":
            return -11
        major, minor = (int(x) for x in config["pbs_version"].split(".")[:2])
        if (major, minor) >= (22, 5):
            return -29
    if os.WIFSIGNALED(wait_status):
        return 256 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def end_unit(root: Path, handle: dict[str, Any], wait_status: int, usage: Any, config: dict[str, Any]) -> None:
    """Record the end of a started job or subjob (caller holds the lock)."""
    seq = int(os.environ.get("PBS_STANDIN_SEQ", "0"))
    rec = st.load(root, seq, handle["index"])
    if rec is None:
        return
    now = time.time()
    rec["used"] = {
        "cput": usage.ru_utime + usage.ru_stime,
        "mem_kb": int(usage.ru_maxrss),
        "walltime": now - handle["start"],
    }
    if rec.get("delete_requested"):
        handle["reason"] = "qdel"
    status = _exit_status(rec, handle, wait_status, config)
    rec["exit_status"] = status
    _deliver(root, rec)
    shutil.rmtree(root / "tmp" / f"pbs.{rec['id']}", ignore_errors=True)
    if rec.get("rerun_requested") and not rec.get("delete_requested"):
        rec["obittime"] = now
        acct.ended(root, rec, kind="R")
        rec.update(
            {
                "state": "Q",
                "substate": 10,
                "rerun_requested": False,
                "exit_status": None,
                "comment": None,
                "mtime": now,
                "obittime": None,
            }
        )
        st.save(root, rec)
        return
    if handle["reason"] == "qdel":
        by = rec.get("terminated_by")
        finish_record(rec, status, 91, f"terminated by {by}" if by and rec["flavor"] == "pbspro" else "terminated")
        rec["deleted"] = True
    elif handle["reason"] == "walltime":
        finish_record(rec, status, 93, "exceeded resource walltime")
    else:
        finish_record(rec, status, 92 if status == 0 else 93, "finished" if status == 0 else "failed")
    acct.ended(root, rec)
    st.save(root, rec)


def finish_array(root: Path, parent: dict[str, Any]) -> None:
    """Close an array parent once every subjob is done (caller holds the lock)."""
    subs = st.subjobs(root, parent)
    if not all(s.get("done") for s in subs):
        return
    statuses = [s.get("exit_status") for s in subs]
    code = 2 if any(s.get("deleted") for s in subs) else (1 if any(x not in (0, None) for x in statuses) else 0)
    substate, suffix = {0: (92, "finished"), 1: (93, "failed")}.get(code, (91, "terminated"))
    finish_record(parent, code, substate, suffix)  # real: "Job Array Began at ... and finished"
    parent["state"] = "C" if parent["flavor"] == "torque" else "F"
    for sub in subs:
        if sub["state"] == "X":
            sub["state"] = "F"
            st.save(root, sub)
    acct.array_ended(root, parent)
    st.save(root, parent)


def _release(root: Path, parent: dict[str, Any]) -> bool:
    """Apply hold / dependency rules; return False when the job was deleted."""
    if parent["state"] != "H" or "u" in parent.get("hold_types", "n"):
        return True
    verdict = dependency_verdict(root, parent)
    if verdict is None:
        return True
    now = time.time()
    if verdict.startswith("fail:"):
        for unit in _units(root, parent):
            if not unit.get("done"):
                finish_record(unit, None, 91, None)
                unit["deleted"] = True
                if unit is not parent:
                    st.save(root, unit)
        parent["state"] = "C" if parent["flavor"] == "torque" else "F"
        parent["comment"] = f"Job deleted as result of dependency on job {verdict[5:]}"
        acct.deleted(root, parent["id"], f"PBS_Server@{st.server_name()}")
        st.save(root, parent)
        return False
    parent.update({"state": "Q", "substate": 10, "hold_types": "n", "etime": now, "mtime": now})
    st.save(root, parent)
    return True


def run(seq: int) -> None:
    """Main loop of the runner for job ``seq``."""
    os.environ["PBS_STANDIN_SEQ"] = str(seq)
    root = st.home()
    config = st.load_config(root)
    kill_delay = float(config["kill_delay"])
    handles: dict[Any, dict[str, Any]] = {}
    while True:
        with st.locked(root):
            parent = st.load(root, seq)
            if parent is None or (parent.get("done") and not handles):
                return
            if not _release(root, parent):
                return
            if parent["kind"] == "array" and not handles and not parent.get("done"):
                finish_array(root, parent)  # e.g. the last queued subjobs were deleted
                parent = st.load(root, seq) or parent
                if parent.get("done"):
                    return
            if parent["state"] in ("Q", "B", "R") and not parent.get("done"):
                units = _units(root, parent)
                limit = (parent.get("array") or {}).get("throttle") or len(units)
                for unit in units:
                    if len(handles) >= limit:
                        break
                    if unit["state"] == "Q" and unit.get("index") not in handles and not unit.get("done"):
                        handles[unit.get("index")] = start_unit(root, unit, config)
                        if parent["kind"] == "array" and parent["state"] == "Q":
                            parent = st.load(root, seq) or parent
                            parent.update(
                                {
                                    "state": "B" if parent["flavor"] == "pbspro" else "R",
                                    "substate": 70,
                                    "stime": time.time(),
                                    "comment": "Job Array Began at "
                                    + time.strftime("%a %b %d at %H:%M", time.localtime()),
                                }
                            )
                            st.save(root, parent)
                            if parent["flavor"] == "pbspro":
                                acct.array_started(root, parent)
            for handle in handles.values():
                unit = st.load(root, seq, handle["index"])
                if unit and (unit.get("delete_requested") or unit.get("rerun_requested")) and not handle["term_at"]:
                    handle["term_at"] = time.time()
                    handle["reason"] = "qdel" if unit.get("delete_requested") else "rerun"
                    _signal(handle["pid"], signal.SIGTERM)
        now = time.time()
        for key, handle in list(handles.items()):
            if handle["deadline"] and now > handle["deadline"] and not handle["term_at"]:
                handle.update({"term_at": now, "reason": "walltime"})
                _signal(handle["pid"], signal.SIGTERM)
            elif handle["term_at"] and now > handle["term_at"] + kill_delay:
                _signal(handle["pid"], signal.SIGKILL)
            pid, status, usage = os.wait4(handle["pid"], os.WNOHANG)
            if pid:
                _signal(handle["pid"], signal.SIGKILL)  # leftovers of the job's process group
                handle["proc"].returncode = status
                if float(config.get("exiting_delay", 0)) > 0:
                    _show_exiting(root, seq, handle["index"], float(config["exiting_delay"]))
                with st.locked(root):
                    end_unit(root, handle, status, usage, config)
                    parent = st.load(root, seq)
                    if parent and parent["kind"] == "array":
                        finish_array(root, parent)
                del handles[key]
        time.sleep(POLL if handles else IDLE_POLL)


def _show_exiting(root: Path, seq: int, index: int | None, delay: float) -> None:
    """Keep a finished job visible in state E (substate 51) for ``delay`` seconds."""
    with st.locked(root):
        rec = st.load(root, seq, index)
        if rec is not None:
            rec.update({"state": "E", "substate": 51, "mtime": time.time()})
            st.save(root, rec)
    time.sleep(delay)


def _signal(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


if __name__ == "__main__":
    run(int(sys.argv[1]))
