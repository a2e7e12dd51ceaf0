"""Hand-checked tests of the pandas-free PBS Pro / OpenPBS parsers (hpcjobs.schedulers.pbs.formats).

Real samples: tests/data/pbs (sources in tests/data/SOURCES.md). Files named ``constructed_*``
are hand-made following OpenPBS src/cmds/qstat.c (github.com/openpbs/openpbs); the ``qstat -f`` one was wrapped with
:func:`prt_attr` below, a line-by-line mirror of ``prt_attr`` in OpenPBS/Torque qstat.c that
reproduces the real fixture's breaks (checked in ``test_prt_attr_mirror_matches_real_output``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.pbs import formats as pbs

DATA = Path(__file__).resolve().parents[1] / "data" / "pbs"
QSTAT_F = DATA / "aiida_pbspro-epfl_qstat-f_6jobs_tab-continuation.txt"
JSON_ALL = DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json"
UTC = timezone.utc


def prt_attr(name: str, value: str, linesize: int = 78) -> str:
    """Mirror of qstat.c prt_attr: strtok on ',', wrap with '\\n\\t', break long tokens mid-token."""
    out = [f"    {name} = "]
    start = len(name) + 7
    tokens = [t for t in value.split(",") if t]  # strtok skips empty tokens
    for i, tok in enumerate(tokens):
        if len(tok) + start < linesize:
            out.append(tok)
            start += len(tok)
        else:
            if i:
                out.append("\n\t")
                start = 9
            for ch in tok:
                out.append(ch)
                start += 1
                if start > linesize:
                    start = 8
                    out.append("\n\t")
        if i + 1 < len(tokens):
            out.append(",")
    return "".join(out)


def test_module_does_not_import_pandas() -> None:
    code = "import sys, hpcjobs.schedulers.pbs.formats; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    ("text", "seq", "index", "is_array", "server", "raw"),
    [
        ("1234", 1234, None, False, None, "1234"),
        ("80005196.gadi-pbs", 80005196, None, False, "gadi-pbs", "80005196"),
        ("12860476.meta-pbs.metacentrum.cz", 12860476, None, False, "meta-pbs.metacentrum.cz", "12860476"),
        ("1234[].pbsserver", 1234, None, True, "pbsserver", "1234[]"),
        ("2597100[7].pbsserver", 2597100, 7, False, "pbsserver", "2597100[7]"),
        ("1234[0]", 1234, 0, False, None, "1234[0]"),
        ("123.srv@otherserver", 123, None, False, "srv", "123"),
    ],
)
def test_parse_job_id(text: str, seq: int, index: int | None, is_array: bool, server: str | None,
                      raw: str) -> None:
    jid = pbs.parse_job_id(text)
    assert (jid.sequence, jid.index, jid.is_array, jid.server, jid.raw_id) == (seq, index, is_array, server, raw)


def test_subjob_parent_and_matching_ignore_server_suffix() -> None:
    assert pbs.parse_job_id("2597100[7].pbsserver").parent == "2597100[].pbsserver"
    assert pbs.parse_job_id("1234.srv").parent is None
    # Gadi: qsub printed 80005196.gadi-pbs, the server attribute is gadi-pbs-01.gadi.nci.org.au
    assert pbs.same_job("80005196.gadi-pbs", "80005196.gadi-pbs-01.gadi.nci.org.au")
    assert pbs.same_job("80005196", "80005196.gadi-pbs")
    assert not pbs.same_job("1234[].srv", "1234.srv")
    assert not pbs.same_job("1234[1].srv", "1234[2].srv")
    assert not pbs.same_job("1234.srv", "not-an-id")
    wanted = ["1.pbs", "7[].pbs", "7[3].pbs", "9.pbs"]
    found = ["7[3].pbs.example.org", "1.pbs.example.org", "7[].pbs.example.org"]
    assert pbs.match_job_ids(wanted, found) == {
        "1.pbs": "1.pbs.example.org", "7[].pbs": "7[].pbs.example.org", "7[3].pbs": "7[3].pbs.example.org"}


@pytest.mark.parametrize("bad", ["", "abc", "12a.srv", "1234[1-5:2].srv", "Submitted batch job 5"])
def test_parse_job_id_rejects(bad: str) -> None:
    with pytest.raises(SchedulerOutputError):
        pbs.parse_job_id(bad)


def test_parse_qsub_output() -> None:
    assert pbs.parse_qsub_output("80005196.gadi-pbs\n") == "80005196.gadi-pbs"
    assert pbs.parse_qsub_output("1234[].pbsserver\n") == "1234[].pbsserver"
    assert pbs.parse_qsub_output("45.master23.banette.gent.vsc\n") == "45.master23.banette.gent.vsc"
    with pytest.raises(SchedulerOutputError):
        pbs.parse_qsub_output("qsub: waiting for job 5.srv to start\n")


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30b", 30), ("30", 30), ("0b", 0), ("13378420kb", 13378420 * 1024), ("10gb", 10 * 2**30),
        ("10GB", 10 * 2**30), ("68719476736b", 68719476736), ("2tb", 2 * 2**40), ("1pb", 2**50),
        ("2mw", 2 * 2**20 * 8), ("3w", 24), (4096, 4096), ("", None), ("12.27M", None), (None, None),
    ],
)
def test_parse_size(text: object, expected: int | None) -> None:
    assert pbs.parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4090:56:03", 4090 * 3600 + 56 * 60 + 3), ("72:00:00", 72 * 3600), ("100:00:00", 360000),
        ("00:00:00", 0), ("01:30", 90), ("0", 0), ("3600", 3600), (42, 42), ("", None), ("x", None),
    ],
)
def test_parse_duration(text: object, expected: int | None) -> None:
    assert pbs.parse_duration(text) == expected


def test_parse_pbs_time_ctime_strings_and_epochs() -> None:
    # day padded with a space (C ctime(), as qstat prints it); client local time → UTC via tz
    assert pbs.parse_pbs_time("Tue Oct  4 21:23:20 2022", "UTC") == datetime(2022, 10, 4, 21, 23, 20, tzinfo=UTC)
    assert pbs.parse_pbs_time("Tue Oct  4 21:23:20 2022", "Europe/Zurich") == datetime(
        2022, 10, 4, 19, 23, 20, tzinfo=UTC)  # CEST
    assert pbs.parse_pbs_time("Tue Apr  9 15:01:47 2013", "Europe/Zurich") == datetime(
        2013, 4, 9, 13, 1, 47, tzinfo=UTC)
    assert pbs.parse_pbs_time(1743440355) == datetime(2025, 3, 31, 16, 59, 15, tzinfo=UTC)
    assert pbs.parse_pbs_time("1479339279") == datetime(2016, 11, 16, 23, 34, 39, tzinfo=UTC)
    assert pbs.parse_pbs_time("0") is None  # etime=0 on routing-queue Q records
    assert pbs.parse_pbs_time("garbage") is None


def test_select_and_nodes_specs() -> None:
    assert pbs.parse_select("2:ncpus=8:ngpus=1:mem=16gb") == [
        {"count": 2, "ncpus": "8", "ngpus": "1", "mem": "16gb"}]
    assert pbs.select_totals("2:ncpus=8:ngpus=1:mem=16gb") == {
        "chunks": 2, "ncpus": 16, "ngpus": 2, "mem": 2 * 16 * 2**30}
    # Gadi-style select: bare mem is bytes
    assert pbs.select_totals("2:ncpus=48:mpiprocs=48:mem=34359738368:job_tags=normal:jobfs=104857600") == {
        "chunks": 2, "ncpus": 96, "mpiprocs": 96, "mem": 2 * 34359738368}
    assert pbs.select_totals("1:ncpus=4+2:ncpus=8") == {"chunks": 3, "ncpus": 20}
    assert pbs.select_totals("ncpus=4:mem=10GB") == {"chunks": 1, "ncpus": 4, "mem": 10 * 2**30}
    assert pbs.select_totals("1:ncpus=1:mem=30:ompthreads=1")["mem"] == 30  # NCAR: became mem=30b
    assert pbs.parse_nodes_spec("4:ppn=24") == {"nodes": 4, "cpus": 96, "gpus": 0}
    assert pbs.parse_nodes_spec("4:ppn=24:gpus=2") == {"nodes": 4, "cpus": 96, "gpus": 8}
    assert pbs.parse_nodes_spec("1:ppn=28:gpus=1:default") == {"nodes": 1, "cpus": 28, "gpus": 1}
    assert pbs.parse_nodes_spec("node1:ppn=2+node2:ppn=2") == {"nodes": 2, "cpus": 4, "gpus": 0}
    assert pbs.parse_nodes_spec("1") == {"nodes": 1, "cpus": 1, "gpus": 0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("b141/0*16+b142/0*16+b143/0*16+b144/0*16", {"b141": 16, "b142": 16, "b143": 16, "b144": 16}),
        ("crhtc65/34", {"crhtc65": 1}),
        ("crhtc72/0*5", {"crhtc72": 5}),
        ("node2801.banette.gent.vsc/0-1+node2803.banette.gent.vsc/0-1",
         {"node2801.banette.gent.vsc": 2, "node2803.banette.gent.vsc": 2}),
        ("n404/2+n404/3", {"n404": 2}),
        ("h/0,1", {"h": 2}),
        ("node0703/0-27", {"node0703": 28}),
        ("i02n33/7+i02n33/6", {"i02n33": 2}),
    ],
)
def test_parse_exec_host(text: str, expected: dict[str, int]) -> None:
    assert pbs.parse_exec_host(text) == expected


# --------------------------------------------------------------------------- qstat -f text


def test_prt_attr_mirror_matches_real_output() -> None:
    real = QSTAT_F.read_text()
    assert prt_attr("exec_vnode", "(b141:ncpus=16)+(b142:ncpus=16)+(b143:ncpus=16)+(b144:ncpus=16)") in real
    assert prt_attr("depend", "afterok:69299.mycluster@mycluster.cluster,"
                              "beforeok:69302.mycluster@mycluster.cluster") in real
    assert prt_attr("Output_Path", "mycluster.cluster:/home/usernum1/scratch/cptest/scaletest/"
                                   "PTOscaletest/testjob.out") in real


def test_qstat_full_real_pbspro_fixture() -> None:
    jobs = pbs.parse_qstat_full(QSTAT_F.read_text())
    assert list(jobs) == ["68350.mycluster", "68351.mycluster", "69301.mycluster", "69302.mycluster",
                          "74164.mycluster", "74165.mycluster"]
    j = jobs["69301.mycluster"]
    assert j["Job_Name"] == "Cu-dbp"
    assert j["Error_Path"] == "mycluster.cluster:/scratch/user02/QMMM-CuPhens/dbp/NOSE/RUN7/Cu-dbp.e69301"
    assert j["exec_vnode"] == "(b141:ncpus=16)+(b142:ncpus=16)+(b143:ncpus=16)+(b144:ncpus=16)"
    assert j["depend"] == "afterok:69299.mycluster@mycluster.cluster,beforeok:69302.mycluster@mycluster.cluster"
    assert j["comment"] == ("Job run at Sat Apr 20 at 01:36 on (b141:ncpus=16)+(b142:ncpus=16)"
                            "+(b143:ncpus=16)+(b144:ncpus=16)")
    assert j["resources_used"] == {"cpupercent": "6384", "cput": "4090:56:03", "mem": "13378420kb",
                                   "ncpus": "64", "vmem": "9866188kb", "walltime": "64:26:16"}
    assert j["Resource_List"]["select"] == "4:ncpus=16"
    assert j["Resource_List"]["walltime"] == "72:00:00"
    v = j["Variable_List"]
    assert v["module"] == "() {  eval `/usr/bin/modulecmd bash $*`,}"  # bash function, raw comma kept
    assert v["LESSOPEN"] == "|/usr/bin/lesspipe.sh %s"
    assert v["SSH_CLIENT"] == "128.178.54.94 46714 22"
    assert v["MSM_HOME"] == "/usr/local/MegaRAID Storage Manager"
    assert v["LOADEDMODULES"] == ""
    assert v["MODULEPATH"] == "/etc/modulefiles:/opt/software/modulefiles:/opt/software/cse-software/modulefiles"
    assert v["PATH"] == ("/opt/xcat/bin:/opt/xcat/sbin:/usr/lib64/qt-3.3/bin:/usr/local/bin:/bin:/usr/bin:"
                         "/usr/local/sbin:/usr/sbin:/sbin:/opt/pbs/default/bin:/opt/software/python/3.3.0/bin:"
                         "/opt/software/bin")
    q = jobs["68350.mycluster"]
    assert q["Error_Path"] == "mycluster.cluster:/home/usernum1/scratch/cptest/scaletest/PTOscaletest/testjob.err"
    assert q["Variable_List"]["PBS_O_WORKDIR"] == "/home/usernum1/scratch/cptest/scaletest/PTOscaletest"
    assert q["Submit_arguments"] == "job-PTO64cell-Qnormal.6.15.1.64.4"
    # 74164: the comment is followed by an empty continuation line; the block goes on
    r = jobs["74164.mycluster"]
    assert r["comment"] == "Job run at Mon Apr 22 at 07:17 on (b270:ncpus=16)+(b275:ncpus=16)"
    assert r["etime"] == "Mon Apr 22 07:17:34 2013"
    assert r["project"] == "_pbs_project_default"
    assert r["Variable_List"]["PBS_O_WORKDIR"] == "/scratch/user3/ubiquitin/100gL/starting-from-left/production"


def test_qstat_text_status_real_fixture() -> None:
    got = [(s.job_id, s.state, s.state_raw, s.name) for s in pbs.parse_qstat_text_status(QSTAT_F.read_text())]
    assert got == [
        ("68350.mycluster", st.PENDING, "Q", "cell-Qnormal"), ("68351.mycluster", st.PENDING, "Q", "cell-Qnormal"),
        ("69301.mycluster", st.RUNNING, "R", "Cu-dbp"), ("69302.mycluster", st.HELD, "H", "Cu-dbp"),
        ("74164.mycluster", st.RUNNING, "R", "u-100-l-96.job"), ("74165.mycluster", st.HELD, "H", "u-100-l-97.job"),
    ]
    first = pbs.parse_qstat_text_status(QSTAT_F.read_text())[0]
    assert first.reason == "Not Running: Node is in an ineligible state: offline"
    assert first.comment is None and first.exit_code is None


_TOKEN = hs.text(alphabet="abcXYZ019/:._-=()+[]@*%", min_size=1, max_size=120)


@given(name=hs.sampled_from(["Error_Path", "Variable_List", "exec_host", "Resource_List.select", "comment"]),
       tokens=hs.lists(_TOKEN, min_size=1, max_size=8), linesize=hs.sampled_from([77, 78]),
       spaces=hs.booleans())
def test_wrapping_round_trip(name: str, tokens: list[str], linesize: int, spaces: bool) -> None:
    value = ",".join(tokens)
    text = "Job Id: 1.srv\n" + prt_attr(name, value, linesize) + "\n    queue = workq\n\n"
    if spaces:  # continuation indented with 8 spaces (copied through an editor)
        text = text.replace("\n\t", "\n        ")
    attrs = pbs.parse_qstat_full(text)["1.srv"]
    assert attrs["queue"] == "workq"
    if name == "Variable_List":
        return
    if "." in name:
        top, sub = name.split(".")
        assert attrs[top][sub] == value
    else:
        assert attrs[name] == value


CONSTRUCTED_F = DATA / "constructed_qstat-f_arrays-exit-edge-cases.txt"
CONSTRUCTED_JSON = DATA / "constructed_qstat-F-json_arrays-exit.json"


def test_constructed_text_edge_cases() -> None:
    jobs = pbs.parse_qstat_full(CONSTRUCTED_F.read_text())
    j = jobs["4103.pbs"]  # 8-space continuations and a whitespace-only continuation line
    assert j["Error_Path"] == ("login1.example.org:/home/alice/sweeps/2022-10-14/learning_rate_0.001/"
                               "batch_size_64/seed_7/optimizer_adamw/warmup_500_steps/edge.e4103")
    assert j["Output_Path"] == ("login1.example.org:/home/alice/runs/with/a/very/long/path/that/wraps/twice/"
                                "over/the/seventy-eight/column/limit/edge.o4103")
    assert j["Variable_List"]["LIST"] == "a,b,c"  # escaped commas
    assert j["Variable_List"]["EQ"] == "x=y"  # split on the first '='
    assert j["Resource_List"]["walltime"] == "100:00:00"
    assert jobs["4100[1].pbs"]["comment"] == (
        "Job run at Fri Oct 14 at 09:00 on (n1:ncpus=2:mem=4194304kb) and finished")
    assert jobs["4100[].pbs"]["array_state_count"] == "Queued:0 Running:1 Exiting:0 Expired:2 "


def _summary(statuses: list) -> list[tuple]:
    return [(s.job_id, s.state, s.state_raw, s.array_job_id, s.array_task_id, s.exit_code, s.exit_signal,
             s.comment) for s in statuses]


TAG = "hpcjobs:sw1:0:0123abcd"
EXPECTED_CONSTRUCTED = [
    ("4100[].pbs", st.RUNNING, "B", "4100[].pbs", None, None, None, TAG),
    ("4100[1].pbs", st.COMPLETED, "F", "4100[].pbs", 1, 0, 0, TAG),
    ("4100[2].pbs", st.TIMEOUT, "F", "4100[].pbs", 2, -29, None, TAG),
    ("4101.pbs", st.TIMEOUT, "F", None, None, None, 15, None),  # 271 after walltime 10:01:06 > 10:00:00
]


def test_constructed_status_text_and_json_agree() -> None:
    text = _summary(pbs.parse_qstat_text_status(CONSTRUCTED_F.read_text()))
    js = _summary(pbs.parse_qstat_json_status(CONSTRUCTED_JSON.read_text()))
    assert text[:4] == EXPECTED_CONSTRUCTED
    assert text[4] == ("4103.pbs", st.PENDING, "Q", None, None, None, None, None)
    assert js[:4] == EXPECTED_CONSTRUCTED
    assert js[4] == ("4104.pbs", st.HELD, "H", None, None, None, None, None)
    held = pbs.parse_qstat_json_status(CONSTRUCTED_JSON.read_text())[4]
    assert held.name == "123"  # numeric job name came out as a JSON number


# --------------------------------------------------------------------------- qstat -F json


def test_qstat_json_real_fixture() -> None:
    doc = pbs.parse_qstat_json(JSON_ALL.read_text())
    assert (doc["timestamp"], doc["pbs_version"], doc["pbs_server"]) == (1750369865, "23.06.06", "pbs")
    assert list(doc["Jobs"]) == ["1004.pbs", "1005.pbs", "1006.pbs"]
    j = doc["Jobs"]["1004.pbs"]
    assert j["Exit_status"] == 0 and j["substate"] == 92 and j["Rerunable"] == "True"
    assert j["resources_used"]["mem"] == "5652kb" and j["Resource_List"]["nodes"] == "1:ppn=1"
    got = [(s.job_id, s.state, s.state_raw, s.exit_code, s.name)
           for s in pbs.parse_qstat_json_status(JSON_ALL.read_text())]
    assert got == [("1004.pbs", st.COMPLETED, "F", 0, "hello_pbs"), ("1005.pbs", st.COMPLETED, "F", 0, "hello_pbs"),
                   ("1006.pbs", st.RUNNING, "R", None, "hi_pbs")]
    one = pbs.parse_qstat_json_status((DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-1-x.json").read_text())
    assert [(s.job_id, s.state, s.reason) for s in one] == [
        ("1.pbs", st.RUNNING, "Job run at Thu Jun 19 at 21:27 on (pbs:ncpus=1)")]


def test_qstat_json_without_jobs_key() -> None:
    queues = (DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-Q.json").read_text()  # real, no "Jobs"
    assert pbs.parse_qstat_json(queues)["Jobs"] == {}
    assert pbs.parse_qstat_json_status(queues) == []
    tabs = (DATA / "constructed_qstat-F-json_cjson-tabs_no-jobs.json").read_text()
    doc = pbs.parse_qstat_json(tabs)
    assert doc["timestamp"] == 1745411711 and doc["Jobs"] == {}
    assert pbs.parse_qstat_json_status("") == []


def test_qstat_json_pre2023_invalid_repaired() -> None:
    text = (DATA / "constructed_qstat-F-json_pre2023-invalid.json").read_text()
    with pytest.raises(ValueError):
        json.loads(text)
    job = pbs.parse_qstat_json(text)["Jobs"]["77.oldpbs"]
    assert job["Job_Name"] == "005" and job["Account_Name"] == "123."
    assert job["Variable_List"] == {"PBS_O_HOME": "/home/dave", "LIST": "a,b", "QUOTE": "it's",
                                    "WEIGHT": ".123", "ZERO": "-00"}
    assert job["Priority"] == 0 and job["Resource_List"]["ncpus"] == 1
    [status] = pbs.parse_qstat_json_status(text)
    assert (status.state, status.name) == (st.RUNNING, "005")


def test_qstat_json_unrepairable_raises() -> None:
    with pytest.raises(SchedulerOutputError):
        pbs.parse_qstat_json('{"Jobs": {"1.srv": {"Job_Name": "a" "b"}}')
    with pytest.raises(SchedulerOutputError):
        pbs.parse_qstat_json("[1, 2]")


def test_status_argv() -> None:
    assert pbs.qstat_status_argv(["5.srv", "6[].srv"]) == ["qstat", "-E", "-x", "-f", "-F", "json", "-t", "--",
                                                             "5.srv", "6[].srv"]
    assert pbs.qstat_text_status_argv(["5.srv"]) == ["qstat", "-x", "-f", "-t", "--", "5.srv"]
    with pytest.raises(ValueError):
        pbs.qstat_status_argv([])


# --------------------------------------------------------------------------- states and exit status


@pytest.mark.parametrize(
    ("letter", "expected"),
    [("Q", st.PENDING), ("H", st.HELD), ("W", st.PENDING), ("T", st.PENDING), ("R", st.RUNNING),
     ("S", st.SUSPENDED), ("U", st.SUSPENDED), ("E", st.COMPLETING), ("B", st.RUNNING), ("M", st.UNKNOWN),
     ("Z", st.UNKNOWN)],
)
def test_non_final_letters(letter: str, expected: str) -> None:
    assert pbs.job_state_from_attrs({"job_state": letter, "Exit_status": 0}) == (expected, None, None)


@pytest.mark.parametrize(
    ("exit_status", "kwargs", "expected"),
    [
        (0, {}, (st.COMPLETED, 0, 0)),
        (1, {}, (st.FAILED, 1, 0)),
        (137, {}, (st.FAILED, 137, 0)),  # a command killed by SIGKILL inside the script
        (255, {}, (st.FAILED, 255, 0)),
        (271, {}, (st.CANCELLED, None, 15)),  # qdel
        (271, {"walltime_used_s": 36066, "walltime_limit_s": 36000}, (st.TIMEOUT, None, 15)),  # PBS Pro 2020
        (271, {"walltime_used_s": 600, "walltime_limit_s": 3600}, (st.CANCELLED, None, 15)),
        (271, {"walltime_used_s": 36066, "walltime_limit_s": 36000, "deleted": True}, (st.CANCELLED, None, 15)),
        (271, {"comment": "Job run at ... and exceeded resource walltime"}, (st.TIMEOUT, None, 15)),
        (265, {}, (st.CANCELLED, None, 9)),
        (267, {}, (st.FAILED, None, 11)),  # SIGSEGV of the top shell
        (-29, {"comment": "Job run at Fri Oct 14 at 09:00 on (n1:ncpus=2) and exceeded resource walltime"},
         (st.TIMEOUT, -29, None)),
        (-29, {}, (st.TIMEOUT, -29, None)),
        (-27, {}, (st.OUT_OF_MEMORY, -27, None)),
        (-26, {}, (st.OUT_OF_MEMORY, -26, None)),
        (-28, {}, (st.TIMEOUT, -28, None)),
        (-25, {}, (st.FAILED, -25, None)),
        (-1, {}, (st.FAILED, -1, None)),
        (-3, {}, (st.REQUEUED, -3, None)),
        (-10, {}, (st.FAILED, -10, None)),  # FAILUID (Torque's -10 is a memory kill)
        (-11, {}, (st.REQUEUED, -11, None)),
        (-12, {}, (st.PREEMPTED, -12, None)),
        (-20, {}, (st.REQUEUED, -20, None)),
        (1, {"comment": "Job run at ... and exceeded resource mem"}, (st.OUT_OF_MEMORY, 1, None)),
        (None, {}, (st.UNKNOWN, None, None)),
        (None, {"deleted": True}, (st.CANCELLED, None, None)),
        (143, {"deleted": True}, (st.CANCELLED, 143, 0)),  # OpenPBS 23.06 qdel of a bash script
        (0, {"deleted": True}, (st.CANCELLED, 0, 0)),  # a script that traps SIGTERM and exits 0
        (-29, {"deleted": True}, (st.TIMEOUT, -29, None)),
    ],
)
def test_derive_final_state(exit_status: int | None, kwargs: dict, expected: tuple) -> None:
    assert pbs.derive_final_state(exit_status, **kwargs) == expected


def test_finished_without_exit_status_uses_substate() -> None:
    assert pbs.job_state_from_attrs({"job_state": "F", "substate": 91}) == (st.CANCELLED, None, None)
    assert pbs.job_state_from_attrs({"job_state": "X", "substate": "69"}) == (st.UNKNOWN, None, None)
    # 91 is set only by a delete request (openpbs req_delete.c ji_terminated): a 271 past the limit
    # in substate 91 was qdel'd; the same kill by the server's walltime check is substate 93
    attrs = {"job_state": "F", "substate": 91, "Exit_status": "271",
             "resources_used": {"walltime": "10:01:06"}, "Resource_List": {"walltime": "10:00:00"}}
    assert pbs.job_state_from_attrs(attrs) == (st.CANCELLED, None, 15)
    assert pbs.job_state_from_attrs({**attrs, "substate": 93}) == (st.TIMEOUT, None, 15)
    # Torque's C jobs have no such substate
    assert pbs.job_state_from_attrs({"job_state": "C", "substate": 91, "Exit_status": "143"}) == (
        st.FAILED, 143, 0)


def test_tag_from_name_or_variable_list() -> None:
    assert pbs.find_tag({"Job_Name": "hpcjobs:sw:3:deadbeef"}) == "hpcjobs:sw:3:deadbeef"
    assert pbs.find_tag({"Job_Name": "x", "Variable_List": {"HPCJOBS_TAG": "hpcjobs:a.b:0:0123abcd"}}) == (
        "hpcjobs:a.b:0:0123abcd")
    assert pbs.find_tag({"Job_Name": 123}) is None


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("line", "kind", "job_id"),
    [
        ("qstat: Unknown Job Id 123.srv", pbs.UNKNOWN_JOB, "123.srv"),
        ("qstat: Unknown Job Id 2001.g3\n", pbs.UNKNOWN_JOB, "2001.g3"),
        ("qdel: Unknown Job Id 1234[].server", pbs.UNKNOWN_JOB, "1234[].server"),
        ("qstat: Unknown Job Id Error 549159.service1", pbs.UNKNOWN_JOB, "549159.service1"),  # Torque
        ("qstat: 123.srv Job has finished, use -x or -H to obtain historical job information",
         pbs.JOB_FINISHED, "123.srv"),
        ("qdel: illegally formed job identifier: abc", pbs.BAD_JOB_ID, "abc"),
        ("qsub: Unknown queue", pbs.OTHER_ERROR, None),
        ("qstat: cannot connect to server pbs (errno=111)", pbs.OTHER_ERROR, None),
    ],
)
def test_classify_error_line(line: str, kind: str, job_id: str | None) -> None:
    err = pbs.classify_error_line(line)
    assert (err.kind, err.job_id) == (kind, job_id)


def test_is_unknown_job_error() -> None:
    assert pbs.is_unknown_job_error("qstat: Unknown Job Id 1.srv\nqstat: Unknown Job Id 2.srv\n")
    assert not pbs.is_unknown_job_error("qstat: Unknown Job Id 1.srv\nqstat: cannot connect to server\n")
    assert not pbs.is_unknown_job_error("")
    assert [e.job_id for e in pbs.parse_error_lines("\nqdel: Unknown Job Id 9.s\n\n")] == ["9.s"]


# --------------------------------------------------------------------------- accounting lines


def test_accounting_line_real_ncar() -> None:
    line = (DATA / "ncar-qhist_casper_20250331_testdata").read_text().splitlines()[0]
    rec = pbs.parse_accounting_line(line)
    assert rec is not None
    assert (rec.time, rec.record_type, rec.job_id) == (datetime(2025, 3, 31, 10, 59, 15), "Q", "4215033.casper-pbs")
    assert rec.attrs["account"] == "SCSG0001"  # quotes removed
    assert rec.attrs["etime"] == "0"
    assert rec.attrs["Resource_List.select"] == "1:ncpus=1:mem=30:ompthreads=1"
    assert rec.attrs["Resource_List.mem"] == "30b"
    assert len(rec.attrs) == 16  # 9 job fields + 7 Resource_List
    records = list(pbs.iter_accounting_records((DATA / "ncar-qhist_casper_20250331_testdata").read_text()
                                               .splitlines()))
    assert "".join(r.record_type for r in records) == "QQSQQRSSEEQQSQQSEE"
    rerun = records[5]
    assert (rerun.attrs["Exit_status"], rerun.attrs["run_count"], rerun.attrs["exec_vnode"]) == (
        "-3", "1", "(crhtc65:ncpus=1:mem=1kb)")


def test_accounting_line_quoting_and_free_text() -> None:
    rec = pbs.parse_accounting_line(
        '10/14/2022 11:03:20;E;4203[1].pbs;user=carol account="grp;one two" project="big project" '
        "Resource_List.x='say \"hi\"' jobname=a end=5")
    assert rec is not None and rec.job_id == "4203[1].pbs"
    assert rec.attrs == {"user": "carol", "account": "grp;one two", "project": "big project",
                         "Resource_List.x": 'say "hi"', "jobname": "a", "end": "5"}
    aborted = pbs.parse_accounting_line("10/14/2022 11:05:20;A;4204.pbs;")
    assert aborted is not None and aborted.attrs == {} and aborted.message == ""
    down = pbs.parse_accounting_line("10/14/2022 11:05:20;D;4204.pbs;Job deleted, execution node n1 down")
    assert down is not None and down.message == "Job deleted, execution node n1 down" and down.attrs == {}
    lic = pbs.parse_accounting_line("10/14/2022 11:00:00;L;license;floating license hour:0 day:0 month:0 max:0")
    assert lic is not None and lic.job_id == "license"
    assert pbs.parse_accounting_line("not a record") is None
    assert pbs.parse_accounting_line("13/45/2022 11:00:00;Q;1.srv;queue=a") is None
