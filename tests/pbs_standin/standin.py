"""Entry points of the PBS stand-in: ``qsub``, ``qstat``, ``qdel``, ``qrls``, ``qrerun``.

Each ``main_*`` returns the exit status and writes to stdout/stderr exactly like the real
command of the selected flavour (``$PBS_STANDIN_FLAVOR``). See README.md in this folder.
"""

from __future__ import annotations

import getpass
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import standin_acct as acct
import standin_format as fmt
import standin_run as runner
import standin_state as st
import standin_submit as submit

PBSE_UNKJOBID = 15001
PBSE_HISTJOBID = 15139


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- qsub


def main_qsub(argv: list[str]) -> int:
    """qsub: validate, store the job, start its runner, print the id."""
    try:
        root = st.home()
        config = st.load_config(root)
        stdin_text = None if submit.parse_args(argv)[1] else sys.stdin.read()
        with st.locked(root):
            seq_path = root / "seq"
            seq = (int(seq_path.read_text()) if seq_path.exists() else 0) + 1
            record = submit.build_record(argv, stdin_text, config, seq)
            st.write_atomic(seq_path, f"{seq}\n")
            (root / "spool" / f"{seq}.SC").write_text(record.pop("script_text"))
            st.save(root, record)
            if record["array"]:
                _save_subjobs(root, record)
            acct.queued(root, record)
        runner.spawn(root, seq)
    except st.StandinError as exc:
        _err(exc.message)
        return exc.status
    if "z" not in dict(submit.parse_args(argv)[0]):
        _out(record["id"] + "\n")
    return 0


def _save_subjobs(root: Path, parent: dict[str, Any]) -> None:
    torque = parent["flavor"] == "torque"
    for index in parent["array"]["indices"]:
        sub = {k: v for k, v in parent.items() if k != "array"}
        sub.update(
            {
                "index": index,
                "kind": "subjob",
                "id": st.job_id(parent["seq"], str(index)),
                "array": None,
                "array_id": parent["id"],
                "name": f"{parent['name']}-{index}" if torque else parent["name"],
                "hold_types": "n",
                "depend_list": [],
                "depend": None,
                "state": "Q",
                "substate": 10,
                "etime": parent["ctime"],
            }
        )
        for key in ("output_path", "error_path"):
            path = sub[key]
            if torque:
                sub[key] = f"{path}-{index}"
            elif "^array_index^" in path:
                sub[key] = path.replace("^array_index^", str(index))
            else:
                sub[key] = f"{path}.{index}" if not path.endswith(f".{index}") else path
        st.save(root, sub)


# --------------------------------------------------------------------------- views


def _array_counts(subs: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"Queued": 0, "Running": 0, "Exiting": 0, "Expired": 0}
    for sub in subs:
        key = {"Q": "Queued", "H": "Queued", "R": "Running", "E": "Exiting"}.get(sub["state"], "Expired")
        counts[key] += 1
    return counts


def pbspro_attrs(root: Path, rec: dict[str, Any]) -> list[fmt.Attr]:
    """Attributes of a job in OpenPBS 23 ``qstat -f`` order."""
    a: list[fmt.Attr] = []
    add = lambda name, value, res=None: a.append((name, res, value))  # noqa: E731
    started = bool(rec.get("stime")) and rec["kind"] != "array"
    subjob = rec["kind"] == "subjob"  # real 23.06 subjobs lack Checkpoint, Hold_Types, Submit_arguments
    now = time.time()
    add("Job_Name", rec["name"])
    add("Job_Owner", f"{rec['owner']}@{rec['submit_host']}")
    if started:
        used = rec.get("used") or {}
        wall = used.get("walltime", 0) if rec.get("done") else now - rec["stime"]
        a.append(("resources_used", "cpupercent", "0"))
        for res, value in (
            ("cput", st.hms(used.get("cput", 0))),
            ("mem", f"{used.get('mem_kb', 0)}kb"),
            ("ncpus", rec["resources"].get("ncpus", "1")),
            ("vmem", f"{used.get('mem_kb', 0)}kb"),
            ("walltime", st.hms(wall)),
        ):
            a.append(("resources_used", res, value))
    add("job_state", rec["state"])
    add("queue", rec["queue"])
    add("server", st.server_name())
    if rec.get("account"):
        add("Account_Name", rec["account"])
    if not subjob:
        add("Checkpoint", "u")
    add("ctime", rec["ctime"])
    if rec.get("depend"):
        add("depend", rec["depend"])
    add("Error_Path", rec["error_path"])
    if started:
        add("exec_host", rec["exec_host"])
        add("exec_vnode", rec["exec_vnode"])
    if not subjob:
        add("Hold_Types", rec["hold_types"])
    add("Join_Path", rec["join"])
    add("Keep_Files", rec["keep"])
    add("Mail_Points", rec["mail_points"])
    if rec.get("mail_users"):
        add("Mail_Users", rec["mail_users"])
    add("mtime", rec["mtime"])
    add("Output_Path", rec["output_path"])
    add("Priority", "0")
    add("qtime", rec["qtime"])
    add("Rerunable", "True" if rec["rerunable"] else "False")
    for res, value in sorted(rec["resources"].items()):
        a.append(("Resource_List", res, str(value)))
    if rec.get("stime"):
        add("stime", rec["stime"])
    if rec.get("stime") and rec.get("obittime"):
        add("obittime", rec["obittime"])  # array parents too (real 23.06)
    if started:
        add("session_id", str(rec["session_id"]))
    if rec.get("shell"):
        add("Shell_Path_List", rec["shell"])
    if started:
        add("jobdir", rec["user_home"])
    add("substate", str(rec["substate"]))
    add("Variable_List", ",".join(f"{k}={v.replace(',', chr(92) + ',')}" for k, v in rec["variables"]))
    if rec.get("comment"):
        add("comment", rec["comment"])
    if rec.get("etime"):
        add("etime", rec["etime"])
    if rec.get("run_count"):
        add("run_count", str(rec["run_count"]))
    if rec.get("done") and rec.get("stime"):
        add("Stageout_status", "1")
    if rec.get("done") and rec.get("exit_status") is not None:
        add("Exit_status", str(rec["exit_status"]))
    if not subjob:
        add("Submit_arguments", rec["submit_args"])
    if rec["kind"] == "array":
        subs = st.subjobs(root, rec)
        counts = _array_counts(subs)
        add("array", "True")
        if rec.get("done"):  # a finished array shows all zeros (real 23.06), no trailing space
            counts = dict.fromkeys(counts, 0)
        add("array_state_count", " ".join(f"{k}:{v}" for k, v in counts.items()))
        add("array_indices_submitted", rec["array"]["spec"].split("%")[0])
        remaining = [s["index"] for s in subs if s["state"] in ("Q", "H")]
        add("array_indices_remaining", submit.range_text(remaining))
        if rec["array"].get("throttle"):
            add("max_run_subjobs", str(rec["array"]["throttle"]))
    if rec["kind"] == "subjob":
        add("array_id", rec["array_id"])
        add("array_index", str(rec["index"]))
    if rec.get("done"):
        add("history_timestamp", str(rec["history_timestamp"]))
    add("project", rec["project"])
    add("Submit_Host", rec["submit_host"])
    return a


def torque_attrs(root: Path, rec: dict[str, Any]) -> list[fmt.Attr]:
    """Attributes of a job in Torque 6 ``qstat -f`` order."""
    a: list[fmt.Attr] = []
    add = lambda name, value: a.append((name, None, value))  # noqa: E731
    started = bool(rec.get("stime")) and rec["kind"] != "array"
    now = time.time()
    add("Job_Name", rec["name"])
    add("Job_Owner", f"{rec['owner']}@{rec['submit_host']}")
    if started:
        used = rec.get("used") or {}
        wall = used.get("walltime", 0) if rec.get("done") else now - rec["stime"]
        for res, value in (
            ("cput", st.hms(used.get("cput", 0))),
            ("energy_used", "0"),
            ("mem", f"{used.get('mem_kb', 0)}kb"),
            ("vmem", f"{used.get('mem_kb', 0)}kb"),
            ("walltime", st.hms(wall)),
        ):
            a.append(("resources_used", res, value))
    add("job_state", rec["state"])
    add("queue", rec["queue"])
    add("server", st.server_name())
    if rec.get("account"):
        add("Account_Name", rec["account"])
    add("Checkpoint", "u")
    add("ctime", rec["ctime"])
    if rec.get("depend"):
        add("depend", rec["depend"])
    add("Error_Path", rec["error_path"])
    if started:
        add("exec_host", rec["exec_host"])
    add("Hold_Types", rec["hold_types"])
    add("Join_Path", rec["join"])
    add("Keep_Files", rec["keep"])
    add("Mail_Points", rec["mail_points"])
    if rec.get("mail_users"):
        add("Mail_Users", rec["mail_users"])
    add("mtime", rec["mtime"])
    add("Output_Path", rec["output_path"])
    add("Priority", "0")
    add("qtime", rec["qtime"])
    add("Rerunable", "True" if rec["rerunable"] else "False")
    for res, value in sorted(rec["resources"].items()):
        a.append(("Resource_List", res, str(value)))
    if started:
        add("session_id", str(rec["session_id"]))
    if rec.get("shell"):
        add("Shell_Path_List", rec["shell"])
    add("Variable_List", ",".join(f"{k}={v}" for k, v in rec["variables"]))
    add("euser", rec["owner"])
    add("egroup", acct.group_name())
    add("queue_type", "E")
    if rec.get("etime"):
        add("etime", rec["etime"])
    if rec.get("done") and rec.get("exit_status") is not None:
        add("exit_status", str(rec["exit_status"]))
    add("submit_args", rec["submit_args"])
    if rec["kind"] == "subjob":
        add("job_array_id", str(rec["index"]))
    if rec["kind"] == "array":
        add("job_array_request", rec["array"]["spec"])
    if started:
        add("start_time", rec["stime"])
        if not rec.get("done") and "walltime" in rec["resources"]:
            left = int(st.parse_duration(rec["resources"]["walltime"]) - (now - rec["stime"]))
            a.append(("Walltime", "Remaining" if left >= 0 else "Exceeded", str(left)))
        add("start_count", str(rec["run_count"]))
    add("fault_tolerant", "False")
    if rec.get("done") and started:
        add("comp_time", rec["comp_time"])
    add("job_radix", "0")
    if rec.get("done") and started:
        add("total_runtime", f"{(rec.get('used') or {}).get('walltime', 0):.6f}")
    add("submit_host", rec["submit_host"])
    add("request_version", "1")
    return a


def _visible(root: Path, rec: dict[str, Any], history: bool, expand: bool) -> list[dict[str, Any]]:
    """Records shown for one parent: itself and, with -t, its subjobs."""
    shown = [rec]
    if rec["kind"] == "array" and expand:
        shown += st.subjobs(root, rec)
    return shown


def _finished(rec: dict[str, Any]) -> bool:
    return rec["flavor"] == "pbspro" and rec["state"] in ("F", "M")


# --------------------------------------------------------------------------- qstat


def main_qstat(argv: list[str]) -> int:
    """qstat: default table, -f text, -F json (OpenPBS), -x (history / Torque XML), -t."""
    flavor = st.flavor()
    full = history = expand = one_line = xml = batch = False
    fmt_name = "default"
    operands: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":  # getopt(3): the end of the options, the rest are operands
            operands += argv[i + 1:]
            break
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            for pos, letter in enumerate(letters):
                if letter == "f":
                    full = True
                elif letter == "x":
                    xml, history = (True, False) if flavor == "torque" else (False, True)
                elif letter == "t":
                    expand = True
                elif letter == "w":
                    one_line = True
                elif letter == "E" and flavor == "pbspro":
                    batch = True  # one server request for all ids (see below)
                elif letter == "F" and flavor == "pbspro":
                    value = letters[pos + 1 :] or (argv[i + 1] if i + 1 < len(argv) else "")
                    if not letters[pos + 1 :]:
                        i += 1
                    fmt_name = value.lower()
                    if fmt_name not in ("json", "default"):
                        _err("qstat: unsupported -F format in the PBS stand-in")
                        return 2
                    break
                else:
                    _err(f"qstat: option -{letter} is not modelled by the PBS stand-in")
                    return 2
        else:
            operands.append(arg)
        i += 1
    if fmt_name == "json" and not full:
        _err("qstat: conflicting options.")
        return 2
    root = st.home()
    config = st.load_config(root)
    entries: list[dict[str, Any]] = []
    any_failed = 0
    header = True
    first_operand = True
    found_one = False
    with st.locked(root):
        parents = st.all_parents(root)
        if not operands:
            for rec in parents:
                if _finished(rec) and not history:
                    continue
                entries += _visible(root, rec, history, expand)
        if batch and operands:
            # real 23.06 with -E: every found job in server (sequence) order, unknown ids left
            # out silently and exit 0; only when none is found the first error and its status
            looked = [(op, *_lookup(root, op, history, expand)) for op in operands]
            hits = [found for _op, found, failure in looked if not failure]
            if hits:
                entries = sorted((e for found in hits for e in found), key=lambda r: r["seq"])
                operands = []
            else:
                operands = operands[:1]
        for operand in operands:
            found, failure = _lookup(root, operand, history, expand)
            if failure:
                message, code = failure
                _err(message)
                any_failed = code
                if first_operand:
                    header = False
            elif not (found_one and fmt_name == "json" and config.get("json_first_id_only")):
                entries += found
                found_one = True
            first_operand = False
    return _print_jobs(root, entries, flavor, full, fmt_name, xml, one_line, header, config) or (any_failed & 0xFF)


def _lookup(root: Path, operand: str, history: bool, expand: bool) -> tuple[list[dict[str, Any]], Any]:
    flavor = st.flavor()
    parsed = st.parse_job_id(operand)
    if parsed is None:
        return [], (f"qstat: illegally formed job identifier: {operand}", 1)
    seq, array = parsed
    full_id = st.job_id(seq, array)
    unknown = (
        f"qstat: Unknown Job Id {full_id}" if flavor == "pbspro" else f"qstat: Unknown Job Id Error {full_id}",
        PBSE_UNKJOBID,
    )
    parent = st.load(root, seq)
    if parent is None or (array is None) != (parent["kind"] == "job"):
        return [], unknown
    rec = parent if not array else st.load(root, seq, int(array))
    if rec is None:
        return [], unknown
    if _finished(rec) and not history:
        return [], (
            f"qstat: {full_id} Job has finished, use -x or -H to obtain historical job information",
            PBSE_HISTJOBID,
        )
    return _visible(root, rec, history, expand), None


def _print_jobs(
    root: Path,
    entries: list[dict[str, Any]],
    flavor: str,
    full: bool,
    fmt_name: str,
    xml: bool,
    one_line: bool,
    header: bool,
    config: dict[str, Any],
) -> int:
    build = pbspro_attrs if flavor == "pbspro" else torque_attrs
    if fmt_name == "json":
        jobs = [(rec["id"], build(root, rec)) for rec in entries]
        _out(fmt.render_json(jobs, int(time.time()), config["pbs_version"], st.server_name(), config["json_numbers"]))
    elif xml:
        if entries:
            _out(fmt.render_xml([(rec["id"], build(root, rec)) for rec in entries]))
    elif full:
        _out(fmt.render_full_text([(rec["id"], build(root, rec)) for rec in entries], flavor, one_line))
    elif entries:
        rows = []
        for rec in entries:
            used = rec.get("used") or {}
            timeu = st.hms(used.get("cput", 0)) if rec.get("stime") and rec["kind"] != "array" else "0"
            rows.append(
                {
                    "id": rec["id"],
                    "name": rec["name"],
                    "owner": rec["owner"],
                    "timeu": timeu,
                    "state": rec["state"],
                    "queue": rec["queue"],
                }
            )
        _out(fmt.render_table(rows, flavor, header))
    return 0


# --------------------------------------------------------------------------- qdel / qrls / qrerun


def main_qdel(argv: list[str]) -> int:
    """qdel: kill running jobs (SIGTERM, SIGKILL after kill_delay), remove queued ones."""
    flavor = st.flavor()
    delete_history = "-x" in argv
    operands = [a for a in argv if not a.startswith("-")]
    if not operands:
        _err("usage:\n\tqdel [-W force|suppress_email=X] [-x] job_identifier...\n\tqdel --version")
        return 2
    root = st.home()
    requestor = f"{getpass.getuser()}@{socket.gethostname().split('.')[0]}"
    any_failed = 0
    with st.locked(root):
        for operand in operands:
            code = _delete_one(root, operand, requestor, delete_history, flavor)
            if code:
                any_failed = code
    return any_failed & 0xFF


def _delete_one(root: Path, operand: str, requestor: str, delete_history: bool, flavor: str) -> int:
    parsed = st.parse_job_id(operand)
    if parsed is None:
        _err(f"qdel: illegally formed job identifier: {operand}")
        return 1
    seq, array = parsed
    parent = st.load(root, seq)
    rec = None
    if parent is not None and (array is None) == (parent["kind"] == "job"):
        rec = parent if not array else st.load(root, seq, int(array))
    if rec is None:
        full = st.job_id(seq, array)
        _err(f"qdel: Unknown Job Id {operand}" if flavor == "pbspro" else f"qdel: Unknown Job Id Error {full}")
        return PBSE_UNKJOBID
    if rec.get("done"):
        if delete_history:
            return 0
        if flavor == "pbspro":
            _err(f"qdel: Job has finished {operand}")
            return PBSE_HISTJOBID
        _err(f"qdel: Request invalid for state of job MSG=invalid state for job - COMPLETE {rec['id']}")
        return 15016  # PBSE_BADSTATE (exit status derived)
    if rec["state"] == "E":
        _err(f"qdel: Request invalid for state of job {operand}")
        return 15016  # PBSE_BADSTATE: the job is exiting
    acct.deleted(root, rec["id"], requestor)
    units = st.subjobs(root, rec) if rec["kind"] == "array" else [rec]
    for unit in units:
        _delete_unit(root, unit, requestor)
    if rec["kind"] == "array":
        fresh = st.load(root, seq) or rec
        fresh["delete_requested"] = True
        st.save(root, fresh)
        runner.finish_array(root, fresh)
    return 0


def _delete_unit(root: Path, unit: dict[str, Any], requestor: str) -> None:
    if unit.get("done"):
        return
    if unit["state"] in ("R", "E"):
        unit["delete_requested"] = True
        unit["terminated_by"] = requestor  # real comment: "... and terminated by user@host"
        st.save(root, unit)
        runner._signal(int(unit["session_id"]), 15)
        return
    runner.finish_record(unit, None, 91, None)
    unit["deleted"] = True
    st.save(root, unit)


def main_qrls(argv: list[str]) -> int:
    """qrls: release a user hold (-h at submission)."""
    root = st.home()
    status = 0
    with st.locked(root):
        for operand in (a for a in argv if not a.startswith("-")):
            parsed = st.parse_job_id(operand)
            rec = st.load(root, parsed[0]) if parsed else None
            if rec is None:
                _err(f"qrls: Unknown Job Id {operand}")
                status = PBSE_UNKJOBID & 0xFF
                continue
            rec["hold_types"] = "s" if rec.get("depend_list") else "n"
            if rec["hold_types"] == "n" and rec["state"] == "H":
                rec.update({"state": "Q", "substate": 10, "etime": time.time()})
            st.save(root, rec)
    return status


def main_qrerun(argv: list[str]) -> int:
    """qrerun: kill a running job and requeue it (R accounting record)."""
    root = st.home()
    status = 0
    with st.locked(root):
        for operand in (a for a in argv if not a.startswith("-")):
            parsed = st.parse_job_id(operand)
            rec = st.load(root, parsed[0], int(parsed[1]) if parsed and parsed[1] else None) if parsed else None
            if rec is None:
                _err(f"qrerun: Unknown Job Id {operand}")
                status = PBSE_UNKJOBID & 0xFF
                continue
            if rec["state"] != "R":
                _err(f"qrerun: Request invalid for state of job {operand}")
                status = 15016 & 0xFF
                continue
            rec["rerun_requested"] = True
            st.save(root, rec)
            runner._signal(int(rec["session_id"]), 15)
    return status


COMMANDS = {"qsub": main_qsub, "qstat": main_qstat, "qdel": main_qdel, "qrls": main_qrls, "qrerun": main_qrerun}


def main(command: str) -> None:
    """Dispatch ``command`` with ``sys.argv[1:]`` and exit with its status."""
    try:
        sys.exit(COMMANDS[command](sys.argv[1:]))
    except st.StandinError as exc:
        _err(exc.message)
        sys.exit(exc.status)
