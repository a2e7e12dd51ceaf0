"""Hand-checked tests of the pandas-free Torque parsers (hpcjobs.schedulers.pbs.torque).

Real samples in tests/data/torque (sources in tests/data/SOURCES.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.pbs import formats as pbs
from hpcjobs.schedulers.pbs import torque

DATA = Path(__file__).resolve().parents[1] / "data" / "torque"
XML = DATA / "fyrd_torque-stanford_qstat-x.xml"
TEXT = DATA / "aiida_torque-ichec_qstat-f_unexpected-newlines.txt"


def test_module_does_not_import_pandas() -> None:
    code = "import sys, hpcjobs.schedulers.pbs.torque; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- qstat -x XML


def test_qstat_xml_real_fixture() -> None:
    jobs = torque.parse_qstat_xml(XML.read_text())
    assert list(jobs) == ["665199.superserver.stanford.edu", "667999.superserver.stanford.edu",
                          "673174.superserver.stanford.edu", "673175[].superserver.stanford.edu",
                          "673175[19].fruster.stanford.edu", "673175[20].fruster.stanford.edu"]
    run = jobs["665199.superserver.stanford.edu"]
    assert run["resources_used"] == {"cput": "00:15:23", "energy_used": "0", "mem": "17592kb",
                                     "vmem": "89780kb", "walltime": "335:34:49"}
    assert run["Resource_List"] == {"mem": "4gb", "nice": "-5", "nodect": "1", "nodes": "1:ppn=1"}
    assert (run["ctime"], run["start_time"], run["exit_status"], run["start_count"]) == (
        "1479339279", "1479339665", "-3", "2")
    parent = jobs["673175[].superserver.stanford.edu"]
    assert (parent["job_array_request"], parent["submit_args"]) == ("1-20", "-t 1-20 t.sh")
    sub = jobs["673175[19].fruster.stanford.edu"]
    assert (sub["Job_Name"], sub["job_array_id"], sub["Variable_List"]["PBS_ARRAYID"]) == ("t.sh-19", "19", "19")
    assert sub["Variable_List"]["PBS_O_SERVER"] == "fruster.stanford.edu"
    assert sub["total_runtime"] == "0.642600"


def test_qstat_xml_status() -> None:
    got = [(s.job_id, s.state, s.state_raw, s.array_job_id, s.array_task_id, s.exit_code, s.name)
           for s in torque.parse_torque_xml_status(XML.read_text())]
    assert got == [
        # running after a restart: exit_status -3 (RETRY) is history, the state is R
        ("665199.superserver.stanford.edu", st.RUNNING, "R", None, None, None, "int_tmux"),
        ("667999.superserver.stanford.edu", st.PENDING, "Q", None, None, None, "map_It3_Ir4"),
        ("673174.superserver.stanford.edu", st.COMPLETED, "C", None, None, 0, "STDIN"),
        # a completed array parent has no exit_status: its outcome is its subjobs'
        ("673175[].superserver.stanford.edu", st.UNKNOWN, "C", "673175[].superserver.stanford.edu", None, None,
         "t.sh"),
        ("673175[19].fruster.stanford.edu", st.COMPLETED, "C", "673175[].fruster.stanford.edu", 19, 0, "t.sh-19"),
        ("673175[20].fruster.stanford.edu", st.COMPLETED, "C", "673175[].fruster.stanford.edu", 20, 0, "t.sh-20"),
    ]
    # the subjobs' server suffix differs from the parent's; matching by number still pairs them
    assert pbs.same_job("673175[].superserver.stanford.edu", "673175[].fruster.stanford.edu")


def test_qstat_xml_declaration_and_several_documents() -> None:
    body = XML.read_text()
    with_decl = '<?xml version="1.0"?>\n' + body
    assert torque.parse_qstat_xml(with_decl) == torque.parse_qstat_xml(body)
    first, _, rest = body.partition("</Job>")
    two_docs = first + "</Job></Data>\n" + '<?xml version="1.0"?>\n<Data>' + rest
    assert list(torque.parse_qstat_xml(two_docs)) == list(torque.parse_qstat_xml(body))
    assert torque.parse_qstat_xml("") == {}
    assert torque.parse_qstat_xml('<?xml version="1.0"?>\n<Data></Data>\n') == {}
    with pytest.raises(SchedulerOutputError):
        torque.parse_qstat_xml("<Data><Job><Job_Id>1.s</Job_Id></Data>")


def test_pbs_arrayid_fills_task_index_when_id_has_none() -> None:
    status = torque.torque_job_status("99.srv", {"job_state": "R", "Variable_List": {"PBS_ARRAYID": "4"}})
    assert status.array_task_id == 4


def test_status_argv() -> None:
    assert torque.torque_status_argv(["45.master23", "673175[].srv"]) == [
        "qstat", "-f", "-x", "-t", "--", "45.master23", "673175[].srv"]
    with pytest.raises(ValueError):
        torque.torque_status_argv([])


# --------------------------------------------------------------------------- qstat -f text


def test_qstat_full_real_torque_fixture() -> None:
    jobs = pbs.parse_qstat_full(TEXT.read_text())
    assert list(jobs) == ["549159", "555716", "556491", "546437", "547637", "547683", "549004", "549005",
                          "549008", "543984"]
    assert jobs["549159"]["Error_Path"] == "host.domain:/some/path/to/sth/ASSP-1R-p/more/down/the/path/ASSP-1R.e549159"
    assert jobs["555716"]["Walltime"] == {"Remaining": "101627"}
    assert jobs["555716"]["resources_used"]["cput"] == "500:13:39"
    assert jobs["546437"]["exit_status"] == "271"
    # a value followed by an empty continuation line (547637) and a one-character one
    assert jobs["547637"]["Error_Path"] == "server.domain:/path/to/error/file"
    assert jobs["547637"]["Output_Path"] == "server.domain:/path/to/output/file7"
    hint = jobs["543984"]["sched_hint"]  # raw newlines: unindented lines join with '\n'
    assert hint.startswith("Post job file processing error; job 543984 on host r2i7n17\n\nUnable to copy file "
                           "543984.OU to /some/path/on/the/cluster/MHDsomething_Mp=318.,NVF=1e5,tau=0.10,")
    assert hint.splitlines()[3:6] == ["*** error from copy", "/bin/cp: cannot stat `543984.OU': No such file or "
                                      "directory", "*** end error output"]
    assert hint.endswith("xyz.e543984, error 1\n*** error from copy\n/bin/cp: cannot stat `543984.ER': "
                         "No such file or directory\n*** end error output")
    assert hint.count("\n") == 10
    assert jobs["543984"]["etime"] == "Wed Jun 17 09:16:05 2015"  # the block continues after the raw lines
    assert jobs["543984"]["submit_args"] == ("args_XX.extxyz -l nodes=32:ppn=24,walltime=71:59:59 -v RESUME=true,"
                                             "SMP=24,NND=32,NOPFS=false -d /some/path/ /some/other/path/NIx/que/"
                                             "runN.sth")
    # fixture quirk: the anonymised exec_host lost a '+' at one line break ("...r2i2n5/0-23" / "r2i1n3/..."),
    # so joining with no separator (the rule) yields 31 hosts for nodect 32
    hosts = pbs.parse_exec_host(jobs["543984"]["exec_host"])
    assert len(hosts) == 31 and jobs["543984"]["Resource_List"]["nodect"] == "32"


def test_torque_text_status() -> None:
    got = {s.job_id: (s.state, s.state_raw, s.exit_code, s.exit_signal)
           for s in torque.parse_torque_text_status(TEXT.read_text())}
    assert got == {
        "549159": (st.HELD, "H", None, None),
        "555716": (st.RUNNING, "R", None, None),
        "556491": (st.RUNNING, "R", None, None),
        # exit_status 271 = SIGTERM; walltime used 06:12:22 of 08:00:00 → deleted, not a time-out
        "546437": (st.CANCELLED, "C", None, 15),
        "547637": (st.PENDING, "Q", None, None),
        "547683": (st.PENDING, "Q", None, None),
        "549004": (st.PENDING, "Q", None, None),
        "549005": (st.PENDING, "Q", None, None),
        "549008": (st.PENDING, "Q", None, None),
        "543984": (st.CANCELLED, "C", None, 15),  # 35:47:31 of 71:59:59
    }


# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("exit_status", "kwargs", "expected"),
    [
        (0, {}, (st.COMPLETED, 0, 0)),
        (2, {}, (st.FAILED, 2, 0)),
        (271, {}, (st.CANCELLED, None, 15)),
        (271, {"walltime_used_s": 3601, "walltime_limit_s": 3600}, (st.TIMEOUT, None, 15)),
        (-8, {}, (st.FAILED, -8, None)),  # CMDFAIL
        (-9, {}, (st.FAILED, -9, None)),  # STDOUTFAIL
        (-10, {}, (st.OUT_OF_MEMORY, -10, None)),  # OVERLIMIT_MEM (PBS Pro: FAILUID)
        (-11, {}, (st.TIMEOUT, -11, None)),  # OVERLIMIT_WT (PBS Pro: RERUN)
        (-12, {}, (st.TIMEOUT, -12, None)),  # OVERLIMIT_CPUT
        (-13, {}, (st.REQUEUED, -13, None)),  # RETRY_CGROUP
        (-3, {}, (st.REQUEUED, -3, None)),
        (-1, {}, (st.FAILED, -1, None)),
    ],
)
def test_derive_torque_final_state(exit_status: int, kwargs: dict, expected: tuple) -> None:
    assert torque.derive_torque_final_state(exit_status, **kwargs) == expected


def test_torque_unknown_job_error() -> None:
    assert pbs.is_unknown_job_error("qstat: Unknown Job Id Error 549159.service1\n")
