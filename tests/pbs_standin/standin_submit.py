"""qsub of the PBS stand-in: options, ``#PBS`` directives, validation, job records."""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
import time
from pathlib import Path
from typing import Any

import standin_state as st

WITH_ARG = set("aAcCeJjklmMNopPqrRStuvWdD")
NO_ARG = set("hIVXzfnx")

# pbs_errno values (src/include/pbs_error.h); the shell sees value & 0xFF.
PBSE_UNKQUE = 15018
PBSE_EXCQRESC = 15036
PBSE_MAXARRAYSIZE = 15107
PBSE_BADATVAL = 15014


def _err(message: str, errno: int) -> st.StandinError:
    """Build a qsub error in the flavour's wording."""
    if st.flavor() == "torque":
        return st.StandinError(f"qsub: submit error ({message})", errno & 0xFF)
    return st.StandinError(f"qsub: {message}", errno & 0xFF)


def parse_args(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Parse qsub's command line getopt-style.

    Args:
        argv: arguments after ``qsub``.

    Returns:
        (ordered list of (option letter, value), remaining operands).

    Raises:
        StandinError: on an unknown option or a missing option argument.
    """
    opts: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1 :]
        if not arg.startswith("-") or arg == "-":
            return opts, argv[i:]
        j = 1
        while j < len(arg):
            letter = arg[j]
            if letter in NO_ARG:
                opts.append((letter, ""))
                j += 1
                continue
            if letter not in WITH_ARG or (st.flavor() == "pbspro" and letter == "t"):
                raise st.StandinError(f"qsub: invalid option -- '{letter}'\n{USAGE}", 2)
            value = arg[j + 1 :]
            if not value:
                i += 1
                if i >= len(argv):
                    raise st.StandinError(f"qsub: option requires an argument -- '{letter}'\n{USAGE}", 2)
                value = argv[i]
            opts.append((letter, value))
            break
        i += 1
    return opts, []


USAGE = (
    "usage: qsub [-a date_time] [-A account_string] [-c interval]\n"
    "\t[-C directive_prefix] [-e path] [-f ] [-h ] [-I [-X]] [-j oe|eo] [-J X-Y[:Z]]\n"
    "\t[-k keep] [-l resource_list] [-m mail_options] [-M user_list]\n"
    "\t[-N jobname] [-o path] [-p priority] [-P project] [-q queue] [-r y|n]\n"
    "\t[-R o|e|oe] [-S path] [-u user_list] [-W otherattributes=value...]\n"
    "\t[-v variable_list] [-V ] [-z] [script | -- command [arg1 ...]]\n"
    "       qsub --version"
)


def directives(script: str, prefix: str = "#PBS") -> list[tuple[str, str]]:
    """Collect the options given in ``#PBS`` lines before the first command.

    Args:
        script: job script text.
        prefix: directive prefix.

    Returns:
        The options, in order.
    """
    result: list[tuple[str, str]] = []
    for number, line in enumerate(script.splitlines()):
        stripped = line.strip()
        if number == 0 and stripped.startswith("#!"):
            continue
        if stripped.startswith(prefix):
            words = shlex.split(stripped[len(prefix) :], comments=True)
            if words:
                result.extend(parse_args(words)[0])
            continue
        if stripped and not stripped.startswith("#"):
            break
    return result


def merge(command_line: list[tuple[str, str]], script_opts: list[tuple[str, str]]) -> dict[str, Any]:
    """Merge options; the command line wins, ``-l`` and ``-v`` merge per key."""
    merged: dict[str, Any] = {"l": {}, "v": [], "W": {}}
    for source in (script_opts, command_line):
        for letter, value in source:
            if letter == "l":
                for item in _split_resources(value):
                    key, _, val = item.partition("=")
                    merged["l"][key.strip()] = val.strip()
            elif letter == "v":
                merged["v"].extend(_split_unescaped(value))
            elif letter == "W":
                key, _, val = value.partition("=")
                merged["W"][key] = val
            else:
                merged[letter] = value
    return merged


def _split_resources(value: str) -> list[str]:
    return [item for item in value.split(",") if item.strip()]


def _split_unescaped(value: str) -> list[str]:
    parts = re.split(r"(?<!\\),", value)
    return [p.replace("\\,", ",") for p in parts if p]


def parse_range(spec: str) -> tuple[list[int], int | None]:
    """Parse ``X-Y[:Z][%N]`` (Torque also ``A,B-C``) into sorted indices and the throttle.

    Raises:
        StandinError: on a malformed range (usage error, exit 2, like qsub's option parser).
    """
    letter = "J" if st.flavor() == "pbspro" else "t"
    bad = st.StandinError(f"qsub: illegal -{letter} value\n{USAGE}", 2)
    body, _, throttle_text = spec.strip().partition("%")
    if (throttle_text and not throttle_text.isdigit()) or ("," in body and letter == "J"):
        raise bad
    indices: set[int] = set()
    for part in body.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not match:
            raise bad
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) else start
        step = int(match.group(3)) if match.group(3) else 1
        if end < start or step < 1:
            raise bad
        indices.update(range(start, end + 1, step))
    return sorted(indices), (int(throttle_text) if throttle_text else None)


def range_text(indices: list[int]) -> str:
    """Compress sorted indices into PBS range text (``1-3,5``; ``2-10:2`` not attempted)."""
    if not indices:
        return "-"
    parts: list[str] = []
    start = prev = indices[0]
    for value in [*indices[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


def _resources(opts: dict[str, Any], queue_conf: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Build Resource_List, chunks and totals from ``-l`` values."""
    req: dict[str, str] = dict(config.get("resources_default", {}))
    req.update(queue_conf.get("resources_default", {}))
    req.update(opts["l"])
    res: dict[str, str] = {}
    chunks: list[dict[str, Any]] = []
    flavor = st.flavor()
    for key in ("walltime", "cput", "mem", "vmem", "pmem"):
        if key not in req:
            continue
        try:
            is_time = key in ("walltime", "cput")
            res[key] = st.hms(st.parse_duration(req[key])) if is_time else st.normalise_size(req[key])
        except ValueError as exc:
            raise _err(f"Illegal attribute or resource value Resource_List.{key}", PBSE_BADATVAL) from exc
    for key, value in req.items():
        if key not in res:
            res[key] = value
    if flavor == "pbspro":
        if "select" in req:
            for part in req["select"].split("+"):
                bits = part.split(":")
                count = int(bits[0]) if bits[0].isdigit() else 1
                kv = dict(b.split("=", 1) for b in bits[(1 if bits[0].isdigit() else 0) :] if "=" in b)
                chunks.append({"count": count, "res": kv})
            res.setdefault("place", "free")
        elif "nodes" in req:
            match = re.match(r"(\d+)(?::ppn=(\d+))?", req["nodes"])
            count, ppn = (int(match.group(1)), int(match.group(2) or 1)) if match else (1, 1)
            chunks.append({"count": count, "res": {"ncpus": str(ppn)}})
            res["select"] = f"{count}:ncpus={ppn}"
            res.setdefault("place", "scatter")
        else:
            chunk = {"ncpus": req.get("ncpus", "1")}
            for key in ("mem", "ngpus", "mpiprocs"):
                if key in req:
                    chunk[key] = req[key]
            chunks.append({"count": 1, "res": chunk})
            res["select"] = "1:" + ":".join(f"{k}={v}" for k, v in chunk.items())
            res.setdefault("place", "free")
        res["ncpus"] = str(sum(c["count"] * int(c["res"].get("ncpus", 1)) for c in chunks))
        res["nodect"] = str(sum(c["count"] for c in chunks))
        gpus = sum(c["count"] * int(c["res"].get("ngpus", 0)) for c in chunks)
        if gpus or "ngpus" in req:
            res["ngpus"] = str(gpus)
        try:
            mems = [(c["count"], st.normalise_size(c["res"]["mem"])) for c in chunks if "mem" in c["res"]]
        except ValueError as exc:
            raise _err("Illegal attribute or resource value Resource_List.select", PBSE_BADATVAL) from exc
        if mems and "mem" not in req:
            res["mem"] = _sum_sizes(mems)
        mpi = sum(c["count"] * int(c["res"].get("mpiprocs", 0)) for c in chunks)
        if mpi:
            res["mpiprocs"] = str(mpi)
    else:
        match = re.match(r"(\d+)(?::ppn=(\d+))?(?::gpus=(\d+))?", req.get("nodes", "1"))
        count, ppn = (int(match.group(1)), int(match.group(2) or 1)) if match else (1, 1)
        chunks.append({"count": count, "res": {"ncpus": str(ppn)}})
        res["nodect"] = str(count)  # Torque always reports nodect (1 without -l nodes)
        if "nodes" not in req and "ncpus" in req:
            chunks[0]["res"]["ncpus"] = req["ncpus"]
    return {"resources": res, "chunks": chunks}


def _sum_sizes(sizes: list[tuple[int, str]]) -> str:
    """Sum ``count x size`` terms in the smallest unit used (``2 x 34359738368b`` -> ``68719476736b``)."""
    units = ["b", "kb", "mb", "gb", "tb", "pb"]
    smallest = min((re.sub(r"^\d+", "", size) for _, size in sizes), key=lambda u: units.index(u) if u in units else 0)
    factor = st.size_bytes(f"1{smallest}") or 1
    return f"{sum(count * st.size_bytes(size) for count, size in sizes) // factor}{smallest}"


def _check_limits(res: dict[str, str], queue_conf: dict[str, Any]) -> None:
    limits = queue_conf.get("resources_max", {})
    if (
        "walltime" in limits
        and "walltime" in res
        and st.parse_duration(res["walltime"]) > st.parse_duration(limits["walltime"])
    ):
        raise _err("Job violates queue and/or server resource limits", PBSE_EXCQRESC)
    if "ncpus" in limits and "ncpus" in res and int(res["ncpus"]) > int(limits["ncpus"]):
        raise _err("Job violates queue and/or server resource limits", PBSE_EXCQRESC)


def _depend(value: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse ``afterok:1.srv:2.srv[,afterany:3]`` into display text and a list."""
    shown, parsed = [], []
    for group in value.split(","):
        kind, *ids = group.split(":")
        full = []
        for operand in ids:
            pid = st.parse_job_id(operand.split("@")[0])
            if pid is None:
                raise _err(f"illegally formed job identifier: {operand}", PBSE_BADATVAL)
            full.append(f"{st.job_id(*pid)}@{st.server_name()}")
            parsed.append({"type": kind, "seq": pid[0], "array": pid[1]})
        shown.append(":".join([kind, *full]))
    return ",".join(shown), parsed


def _output_path(opts: dict[str, Any], key: str, name: str, seq: int, workdir: str, host: str) -> str:
    letter = "o" if key == "o" else "e"
    default_name = f"{name}.{letter}{seq}"
    given = opts.get(key)
    if not given:
        path = os.path.join(workdir, default_name)
    else:
        given = given.split(":", 1)[1] if ":" in given else given
        path = given if os.path.isabs(given) else os.path.join(workdir, given)
        if given.endswith("/") or os.path.isdir(path):
            path = os.path.join(path, default_name)
    return f"{host}:{os.path.normpath(path)}"


def build_record(argv: list[str], stdin_text: str | None, config: dict[str, Any], seq: int) -> dict[str, Any]:
    """Turn a qsub command line into a job record (not yet saved).

    Raises:
        StandinError: for anything real qsub would reject.
    """
    cmd_opts, operands = parse_args(argv)
    if operands and "--" in argv and argv.index("--") == len(argv) - len(operands) - 1:
        script = "#!/bin/bash\n" + shlex.join(operands) + "\n"  # qsub -- executable [args]
        base_name = os.path.basename(operands[0])
    elif operands:
        script_path = Path(operands[0])
        try:
            script = script_path.read_text()
        except OSError as exc:
            raise st.StandinError(f"qsub: script file:: {exc.strerror}", 1) from exc
        base_name = script_path.name
    else:
        script = stdin_text or ""
        base_name = "STDIN"
    prefix = dict(cmd_opts).get("C", os.environ.get("PBS_DPREFIX", "#PBS"))
    opts = merge(cmd_opts, directives(script, prefix))
    flavor = st.flavor()
    queue = opts.get("q", config["default_queue"]).split("@")[0] or config["default_queue"]
    if queue not in config["queues"]:
        msg = "Unknown queue" if flavor == "pbspro" else "Unknown queue MSG=requested queue not found"
        raise _err(msg, PBSE_UNKQUE)
    queue_conf = config["queues"][queue] or {}
    built = _resources(opts, queue_conf, config)
    _check_limits(built["resources"], queue_conf)
    host = socket.gethostname().split(".")[0]
    user = getpass.getuser()
    workdir = os.getcwd()
    name = opts.get("N", base_name)
    array_opt = opts.get("J") if flavor == "pbspro" else opts.get("t")
    array = None
    if array_opt:
        indices, throttle = parse_range(array_opt)
        if len(indices) > int(config["max_array_size"]):
            raise _err("Array job exceeds server or queue size limit", PBSE_MAXARRAYSIZE)
        array = {"spec": array_opt, "indices": indices, "throttle": throttle}
    variables = _variables(opts, queue, host, workdir)
    depend_text, depend_list = _depend(opts["W"]["depend"]) if "depend" in opts["W"] else (None, [])
    now = time.time()
    out = _output_path(opts, "o", name, seq, workdir, host)
    err = _output_path(opts, "e", name, seq, workdir, host)
    if array and flavor == "pbspro":
        out, err = (p + ".^array_index^" if not opts.get(k) else p for p, k in ((out, "o"), (err, "e")))
    held = "h" in opts
    record: dict[str, Any] = {
        "seq": seq,
        "index": None,
        "kind": "array" if array else "job",
        "flavor": flavor,
        "id": st.job_id(seq, "" if array else None),
        "name": name,
        "owner": user,
        "submit_host": host,
        "queue": queue,
        "account": opts.get("A"),
        "project": opts.get("P", "_pbs_project_default"),
        "resources": built["resources"],
        "chunks": built["chunks"],
        "variables": variables,
        "workdir": workdir,
        "user_home": config.get("user_home") or os.environ.get("HOME", workdir),
        "output_path": out,
        "error_path": err,
        "join": opts.get("j", "n"),
        "keep": opts.get("k", "n"),
        "rerunable": opts.get("r", "y") != "n",
        "hold_types": "u" if held else "n",
        "depend": depend_text,
        "depend_list": depend_list,
        "submit_args": " ".join(argv),  # qstat decodes the stored argument list without quoting
        "shell": opts.get("S"),
        "mail_points": opts.get("m", "a"),
        "mail_users": opts.get("M"),
        "ctime": now,
        "qtime": now,
        "mtime": now,
        "etime": None if (held or depend_list) else now,
        "state": "H" if (held or depend_list) else "Q",
        "substate": 20 if held else (22 if depend_list else 10),
        "exit_status": None,
        "run_count": 0,
        "comment": None,
        "array": array,
        "used": None,
    }
    if depend_list and not held:
        record["hold_types"] = "s"
    return record | {"script_text": script}


def _variables(opts: dict[str, Any], queue: str, host: str, workdir: str) -> list[list[str]]:
    env = os.environ
    pairs: list[list[str]] = [["PBS_O_HOME", env.get("HOME", "/")]]
    if "LANG" in env:
        pairs.append(["PBS_O_LANG", env["LANG"]])
    pairs.append(["PBS_O_LOGNAME", env.get("LOGNAME", getpass.getuser())])
    pairs.append(["PBS_O_PATH", env.get("PATH", "")])
    if "MAIL" in env:
        pairs.append(["PBS_O_MAIL", env["MAIL"]])
    if "TZ" in env:
        pairs.append(["PBS_O_TZ", env["TZ"]])
    pairs.append(["PBS_O_SHELL", env.get("SHELL", "/bin/bash")])
    pairs.append(["PBS_O_WORKDIR", workdir])
    pairs.append(["PBS_O_SYSTEM", os.uname().sysname])
    if "V" in opts:
        pairs.extend([k, v] for k, v in env.items() if not k.startswith("PBS_O_") and "\n" not in v)
    for item in opts["v"]:
        key, sep, value = item.partition("=")
        pairs.append([key, value if sep else env.get(key, "")])
    pairs.append(["PBS_O_QUEUE", queue])
    pairs.append(["PBS_O_HOST", host])
    return pairs
