"""The stand-in's OpenPBS output held to output captured from a real OpenPBS 23.06.06 server.

The same kinds of jobs as the capture in ``tests/data/pbs/openpbs-real`` (see its README.md) run
through the stand-in: a simple job, ``exit 3``, a walltime kill, a qdel of a running and of a held
job, an array. Their ``qstat -x -f -F json -t`` documents and accounting records must have the
real ones' keys (in the real order), value types and value formats, so that drift is caught.

The real ``qstat`` ran as root, which also shows the manager-only attributes
(``ATR_DFLAG_MGRD`` in openpbs ``src/lib/Libattr/master_job_attr_def.xml``); the stand-in prints
what a user sees, so those are left out of the comparison.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from pbs_standin.fixture import PbsStandin, wait_for_state

REAL = Path(__file__).resolve().parent.parent / "data" / "pbs" / "openpbs-real"
MANAGER_ONLY = {"euser", "egroup", "hashname", "queue_rank", "queue_type", "run_version", "schedselect"}
#: Present or not depending on timing (a job that ends before its mom reports a session has none).
TIMING = {"session_id"}
CTIME_RE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ 123]\d \d\d:\d\d:\d\d \d{4}$")
HMS_RE = re.compile(r"^\d{2,}:\d\d:\d\d$")
FORMATS: dict[str, re.Pattern[str]] = {
    "ctime": CTIME_RE, "qtime": CTIME_RE, "etime": CTIME_RE, "mtime": CTIME_RE, "stime": CTIME_RE,
    "obittime": CTIME_RE,
    "Job_Owner": re.compile(r"^[^@\s]+@[^@\s]+$"),
    "exec_host": re.compile(r"^[^/\s]+/\d+$"),
    "exec_vnode": re.compile(r"^\([^:()]+:ncpus=\d+\)$"),
    "Output_Path": re.compile(r"^[^:\s]+:/\S+$"),
    "comment": re.compile(r"^Job (run at [A-Z][a-z]{2} [A-Z][a-z]{2} \d\d at \d\d:\d\d on \(.+\)|Array Began at .+)"),
}
USED_FORMATS = {"cput": HMS_RE, "walltime": HMS_RE, "mem": re.compile(r"^\d+kb$"), "vmem": re.compile(r"^\d+kb$")}

WAIT_S = 90.0


def real_jobs() -> dict[str, dict[str, Any]]:
    return json.loads((REAL / "qstat-x-f-t-json.final.json").read_text())["Jobs"]


def real_accounting() -> dict[tuple[str, str], list[str]]:
    """(job id, record type) -> the record's keys in order."""
    out = {}
    for line in (REAL / "accounting-20261203.txt").read_text().splitlines():
        _, kind, job_id, message = line.split(";", 3)
        out[(job_id, kind)] = [tok.split("=", 1)[0] for tok in shlex.split(message)]
    return out


def in_same_order(ours: list[str], theirs: list[str]) -> bool:
    common = [k for k in ours if k in theirs]
    return common == [k for k in theirs if k in ours]


@pytest.fixture
def standin_run(pbs_standin: PbsStandin) -> dict[str, Any]:
    """Run the capture's jobs on the stand-in; return their ids, final JSON and accounting."""
    s = pbs_standin
    s.configure(queues={"workq": {"resources_max": {"walltime": "02:00:00", "ncpus": 2}}}, exec_host="vm")
    ids = {
        "held": s.qsub("-N", "delqueued", "-h", script="#!/bin/bash\ntrue\n"),
        "del": s.qsub("-N", "delme", script="#!/bin/bash\nsleep 60\n"),
        "simple": s.qsub("-N", "simple", script="#!/bin/bash\necho hi\n"),
        "exit3": s.qsub("-N", "exit3", script="#!/bin/bash\nexit 3\n"),
        "wall": s.qsub("-N", "wall", "-l", "walltime=00:00:02", script="#!/bin/bash\nsleep 60\n"),
        "arr": s.qsub("-N", "arr", "-J", "1-3", script="#!/bin/bash\necho idx=$PBS_ARRAY_INDEX\n"),
    }
    wait_for_state(ids["del"], "R", WAIT_S)
    for key in ("held", "del"):
        assert s.run("qdel", ids[key]).returncode == 0
    for job in ids.values():
        wait_for_state(job, "F", WAIT_S)
    raw = s.run("qstat", "-x", "-f", "-F", "json", "-t", *ids.values()).stdout
    lines = s.accounting_lines()
    acct: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        _, kind, job_id, message = line.split(";", 3)
        acct[(job_id, kind)] = [tok.split("=", 1)[0] for tok in shlex.split(message)]
    return {"ids": ids, "doc": json.loads(raw), "acct": acct, "lines": lines}


PAIRS = {"simple": "4.vm", "exit3": "7.vm", "wall": "8.vm", "del": "3.vm", "held": "9.vm", "arr": "6[].vm"}


def test_qstat_json_like_real(standin_run: dict[str, Any]) -> None:
    real = real_jobs()
    doc = standin_run["doc"]
    real_doc = json.loads((REAL / "qstat-x-f-t-json.final.json").read_text())
    assert [(k, type(v)) for k, v in doc.items()] == [(k, type(v)) for k, v in real_doc.items()]
    ours_by_name = {key: doc["Jobs"][job] for key, job in standin_run["ids"].items()}
    arr = standin_run["ids"]["arr"]
    ours_by_name["subjob"] = doc["Jobs"][arr.replace("[]", "[2]")]
    pairs = {**PAIRS, "subjob": "6[2].vm"}
    for key, real_id in pairs.items():
        ours, theirs = ours_by_name[key], real[real_id]
        want = set(theirs) - MANAGER_ONLY - TIMING
        assert set(ours) - TIMING == want, (key, set(ours) ^ want)
        assert in_same_order(list(ours), list(theirs)), key
        for attr in want:
            assert type(ours[attr]) is type(theirs[attr]), (key, attr, ours[attr], theirs[attr])
            if attr in FORMATS:
                assert FORMATS[attr].match(theirs[attr]), (attr, theirs[attr])
                assert FORMATS[attr].match(ours[attr]), (key, attr, ours[attr])
        for group in ("resources_used", "Resource_List"):
            if group in theirs:
                assert list(ours[group]) == [k for k in theirs[group] if k in ours[group]], (key, group)
                assert {k: type(v) for k, v in ours[group].items()} == {
                    k: type(theirs[group][k]) for k in ours[group] if k in theirs[group]}, (key, group)
        if "resources_used" in theirs:
            assert set(ours["resources_used"]) == set(theirs["resources_used"])
            for res, pattern in USED_FORMATS.items():
                assert pattern.match(ours["resources_used"][res]), (key, res)
        assert (ours["job_state"], ours["substate"]) == (theirs["job_state"], theirs["substate"]), key
        assert ("Exit_status" in ours) is ("Exit_status" in theirs), key
        if key != "del":
            assert ours.get("Exit_status") == theirs.get("Exit_status"), key
        if "comment" in theirs:
            assert ours["comment"].split(" and ")[-1].split(" by ")[0] == (
                theirs["comment"].split(" and ")[-1].split(" by ")[0]), key
    # a qdel'd bash script: 143 when the shell survives its command's SIGTERM, 271 when it dies too
    assert ours_by_name["del"]["Exit_status"] in (143, 271)
    assert ours_by_name["del"]["comment"].endswith(f" and terminated by {ours_by_name['del']['Job_Owner']}")
    assert (ours_by_name["arr"]["array_indices_remaining"], ours_by_name["arr"]["array_state_count"]) == (
        "-", "Queued:0 Running:0 Exiting:0 Expired:0")


def test_accounting_like_real(standin_run: dict[str, Any]) -> None:
    real = real_accounting()
    acct = standin_run["acct"]
    ids = standin_run["ids"]
    pairs = {**PAIRS, "subjob": "6[2].vm"}
    ours_ids = {**ids, "subjob": ids["arr"].replace("[]", "[2]")}
    for key, real_id in pairs.items():
        real_kinds = sorted(kind for (job, kind) in real if job == real_id)
        our_kinds = sorted(kind for (job, kind) in acct if job == ours_ids[key])
        assert our_kinds == real_kinds, (key, our_kinds, real_kinds)
        for kind in real_kinds:
            theirs = real[(real_id, kind)]
            ours = acct[(ours_ids[key], kind)]
            # resource_assigned.mem and Resource_List.* follow the request; compare the fixed keys
            fixed = [k for k in theirs if not k.startswith(("Resource_List.", "resource_assigned."))]
            assert [k for k in ours if not k.startswith(("Resource_List.", "resource_assigned."))] == fixed, (
                key, kind)
    held_d = next(ln for ln in standin_run["lines"] if f";D;{ids['held']};" in ln)
    assert re.search(r";requestor=[^@\s]+@\S+$", held_d)


def test_client_errors_like_real(pbs_standin: PbsStandin) -> None:
    """Exit status and stderr of the clients for unknown, finished and refused requests."""
    blocks = {}
    for block in (REAL / "command-errors.txt").read_text().split("### ")[1:]:
        head, rest = block.split("\n", 1)
        rc, rest = rest.split("\n", 1)
        stdout, stderr = rest.removeprefix("--- stdout\n").split("--- stderr\n", 1)
        blocks[head] = (int(rc.removeprefix("rc=")), stdout, stderr)
    s = pbs_standin
    s.configure(queues={"workq": {"resources_max": {"walltime": "02:00:00", "ncpus": 2}}}, max_array_size=20)
    done = s.qsub(script="#!/bin/bash\ntrue\n")
    wait_for_state(done, "F", WAIT_S)
    server = done.split(".", 1)[1]

    def ours(cmd: str) -> tuple[int, str, str]:
        argv = shlex.split(cmd.replace("13.vm", done).replace(".vm", f".{server}"))
        result = s.run(*argv)
        return result.returncode, result.stdout, result.stderr

    def theirs(cmd: str) -> tuple[int, str, str]:
        rc, stdout, stderr = blocks[cmd]
        return rc, stdout, stderr.replace("13.vm", done).replace(".vm", f".{server}")

    for cmd in ("qstat -x -f 99999.vm", "qstat 99999.vm", "qstat 13.vm", "qdel 99999.vm", "qdel 13.vm",
                "qdel abc", "qrls 99999.vm", "qsub -q nosuch -- /bin/true",
                "qsub -l walltime=03:00:00 -- /bin/true", "qsub -l select=1:ncpus=4 -- /bin/true",
                "qsub -J 1-25 -- /bin/true", "qsub -J 1-x -- /bin/true", "qsub -l walltime=abc -- /bin/true"):
        assert ours(cmd) == theirs(cmd), cmd
    for cmd in ("qstat -f -F json 99999.vm", "qstat -x -f -F json -t 99999[].vm", "qstat -f -F json 13.vm"):
        rc, stdout, stderr = ours(cmd)
        real_rc, real_stdout, real_stderr = theirs(cmd)
        assert (rc, stderr) == (real_rc, real_stderr), cmd
        assert list(json.loads(stdout)) == list(json.loads(real_stdout)) == ["timestamp", "pbs_version", "pbs_server"]


def test_json_of_several_ids_can_show_only_the_first(pbs_standin: PbsStandin) -> None:
    """The real cJSON-era server answers ``qstat -x -f -F json A B C`` with A only (the text form
    lists all three); the stand-in does the same when ``json_first_id_only`` is set."""
    pbs_standin.configure(json_first_id_only=True)
    jobs = [pbs_standin.qsub(script="#!/bin/bash\ntrue\n") for _ in range(2)]
    for job in jobs:
        wait_for_state(job, "F", WAIT_S)
    unknown = "99999." + jobs[0].split(".", 1)[1]
    result = pbs_standin.run("qstat", "-x", "-f", "-F", "json", unknown, *jobs)
    assert list(json.loads(result.stdout)["Jobs"]) == [jobs[0]]
    assert (result.returncode, result.stderr) == (153, f"qstat: Unknown Job Id {unknown}\n")
    text = pbs_standin.run("qstat", "-x", "-f", *jobs).stdout
    assert re.findall(r"^Job Id: (\S+)", text, re.M) == jobs
    # -E (one request for all ids), as the real server answers it: every known job in server
    # order, unknown ids left out and exit 0; only unknown ids: the error and 153
    batch = pbs_standin.run("qstat", "-E", "-x", "-f", "-F", "json", jobs[1], unknown, jobs[0])
    assert (batch.returncode, batch.stderr, list(json.loads(batch.stdout)["Jobs"])) == (0, "", jobs)
    alone = pbs_standin.run("qstat", "-E", "-x", "-f", "-F", "json", unknown)
    assert (alone.returncode, alone.stderr) == (153, f"qstat: Unknown Job Id {unknown}\n")
    assert "Jobs" not in json.loads(alone.stdout)
