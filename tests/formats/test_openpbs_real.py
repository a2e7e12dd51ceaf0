"""hpcjobs' PBS parsers against output captured from a real OpenPBS 23.06.06 server.

The captures (``tests/data/pbs/openpbs-real``, see its README.md) come from one run of simple,
``exit 3``, walltime-killed, qdel'd (running and held) and array jobs. Every test here reads
what the server really printed and pins what hpcjobs makes of it, job by job, against the
capture's own summary (``exit-summary.txt``) and against the other sources of the same jobs
(qstat JSON, qstat text, accounting log): they must all tell the same story.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hpcjobs import states as st
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources import pbs as ap
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.pbs import formats as pbs
from hpcjobs.schedulers.pbs.backend import PbsProBackend

REAL = Path(__file__).resolve().parents[1] / "data" / "pbs" / "openpbs-real"
UTC = "UTC"  # the capture server ran in UTC: accounting "07:40:45" is epoch 1796283645

#: What each job of the capture means: state, exit code, exit signal.
EXPECTED: dict[str, tuple[str, int | None, int | None]] = {
    "2.vm": (st.COMPLETED, 0, 0),  # echo hi
    "3.vm": (st.CANCELLED, 143, 0),  # qdel while running: bash script ends 128+SIGTERM
    "4.vm": (st.COMPLETED, 0, 0),
    "5.vm": (st.COMPLETED, 0, 0),  # select=1:ncpus=1:mem=100mb, walltime=00:01:00
    "6[].vm": (st.COMPLETED, 0, 0),  # array parent -J 1-5
    "6[1].vm": (st.COMPLETED, 0, 0),
    "6[2].vm": (st.COMPLETED, 0, 0),
    "6[3].vm": (st.COMPLETED, 0, 0),
    "6[4].vm": (st.COMPLETED, 0, 0),
    "6[5].vm": (st.COMPLETED, 0, 0),
    "7.vm": (st.FAILED, 3, 0),  # exit 3
    "8.vm": (st.TIMEOUT, -29, None),  # walltime=00:00:10 exceeded: JOB_EXEC_KILL_WALLTIME
    "9.vm": (st.CANCELLED, None, None),  # held (-h), qdel'd before it ran: no Exit_status
}
TOP_JOBS = [j for j in EXPECTED if not re.match(r"6\[\d+\]", j)]


def read(name: str) -> str:
    return (REAL / name).read_text()


def summary() -> dict[str, dict[str, str]]:
    """``exit-summary.txt``: ``<id> <name> state=F substate=92 Exit_status=0 qtime=... ...``."""
    out = {}
    for line in read("exit-summary.txt").splitlines():
        job_id, name, rest = line.split(None, 2)
        fields = dict(re.findall(r"(\w+)=(\S+)", rest))
        out[job_id] = {"name": name, **fields}
    return out


def statuses(text: str, parser: Any) -> dict[str, tuple[Any, ...]]:
    return {s.job_id: (s.state, s.exit_code, s.exit_signal) for s in parser(text)}


# --------------------------------------------------------------------------- qstat -x -f -F json


def test_capture_summary_matches_the_json_it_was_made_from() -> None:
    jobs = pbs.parse_qstat_json(read("qstat-x-f-t-json.final.json"))["Jobs"]
    for job_id, fields in summary().items():
        attrs = jobs[job_id]
        assert (attrs["Job_Name"], attrs["job_state"], str(attrs["substate"])) == (
            fields["name"], fields["state"], fields["substate"])
        assert str(attrs.get("Exit_status")) == fields["Exit_status"]
    assert set(summary()) == set(EXPECTED)


def test_final_json_states_job_by_job() -> None:
    got = statuses(read("qstat-x-f-t-json.final.json"), pbs.parse_qstat_json_status)
    assert got == EXPECTED
    # the same without -t: parents only
    assert statuses(read("qstat-x-f-json.final.json"), pbs.parse_qstat_json_status) == {
        j: EXPECTED[j] for j in TOP_JOBS}


@pytest.mark.parametrize(
    ("job_id", "substate", "exit_status", "comment_end"),
    [
        ("4.vm", 92, 0, "and finished"),
        ("7.vm", 93, 3, "and failed"),
        ("8.vm", 93, -29, "and exceeded resource walltime"),
        ("3.vm", 91, 143, "and terminated by tester@localhost"),
        ("9.vm", 91, None, None),
    ],
)
def test_final_json_raw_values(job_id: str, substate: int, exit_status: int | None, comment_end: str | None) -> None:
    attrs = pbs.parse_qstat_json(read("qstat-x-f-json.final.json"))["Jobs"][job_id]
    assert attrs["substate"] == substate and isinstance(attrs["substate"], int)
    assert attrs.get("Exit_status") == exit_status
    assert ("Exit_status" in attrs) is (exit_status is not None)
    comment = attrs.get("comment")
    assert (comment is None) if comment_end is None else comment.endswith(comment_end)
    assert isinstance(attrs["history_timestamp"], int)


def test_qdel_of_running_job_with_271_is_cancelled() -> None:
    """A job whose top process (``qsub -- /bin/sleep``) dies of qdel's SIGTERM ends with 271."""
    text = read("qdel-variants.txt")
    doc = pbs.parse_qstat_json(text[text.index("{"): text.index("\n}\n") + 3])
    attrs = doc["Jobs"]["1.vm"]
    assert (attrs["Exit_status"], attrs["substate"]) == (271, 91)
    assert pbs.job_status_from_attrs("1.vm", attrs).state == st.CANCELLED
    assert pbs.job_state_from_attrs(attrs) == (st.CANCELLED, None, 15)


def test_qdel_of_a_job_that_can_never_run() -> None:
    """Deleted while queued: substate 91, no Exit_status, no obittime; ends at history_timestamp."""
    doc = pbs.parse_qstat_json(read("qstat-x-f-json.qdel-never-run.json"))
    (job_id, attrs), = doc["Jobs"].items()
    assert job_id == "13.vm"
    assert attrs["comment"].startswith("Can Never Run: Insufficient amount of resource: ngpus")
    assert attrs["comment"].endswith("and terminated")
    assert pbs.job_state_from_attrs(attrs) == (st.CANCELLED, None, None)
    row = ap.read_qstat_json(read("qstat-x-f-json.qdel-never-run.json"), tz=UTC).iloc[0]
    assert row.end_time == pd.Timestamp(attrs["history_timestamp"], unit="s", tz="UTC")
    assert pd.isna(row.start_time) and pd.isna(row.elapsed)


def test_running_json() -> None:
    doc = pbs.parse_qstat_json(read("qstat-f-json.running.json"))
    jobs = doc["Jobs"]
    assert (doc["pbs_version"], doc["pbs_server"], type(doc["timestamp"])) == ("23.06.06", "vm", int)
    got = {j: (a["job_state"], a["substate"]) for j, a in jobs.items()}
    assert got == {"3.vm": ("R", 42), "5.vm": ("R", 41), "6[].vm": ("Q", 10), "7.vm": ("Q", 10),
                   "8.vm": ("Q", 10), "9.vm": ("H", 20)}
    # a job just started (substate 41 PRERUN) has no resources_used and no session yet
    assert "resources_used" not in jobs["5.vm"] and "session_id" not in jobs["5.vm"]
    assert jobs["3.vm"]["resources_used"]["walltime"] == "00:00:00"
    assert {s.job_id: s.state for s in pbs.parse_qstat_json_status(read("qstat-f-json.running.json"))} == {
        "3.vm": st.RUNNING, "5.vm": st.RUNNING, "6[].vm": st.PENDING, "7.vm": st.PENDING,
        "8.vm": st.PENDING, "9.vm": st.HELD}
    assert {s.job_id: s.state for s in pbs.parse_qstat_text_status(read("qstat-f.running.txt"))} == {
        s.job_id: s.state for s in pbs.parse_qstat_json_status(read("qstat-f-json.running.json"))}


def test_array_parent_and_subjobs() -> None:
    running = pbs.parse_qstat_json_status(read("qstat-f-t-json.array.running.json"))
    assert [(s.job_id, s.state, s.array_job_id, s.array_task_id) for s in running] == [
        ("6[].vm", st.PENDING, "6[].vm", None),
        *[(f"6[{i}].vm", st.PENDING, "6[].vm", i) for i in range(1, 6)],
    ]
    jobs = pbs.parse_qstat_json(read("qstat-x-f-t-json.final.json"))["Jobs"]
    parent = jobs["6[].vm"]
    assert (parent["array"], parent["array_indices_submitted"], parent["array_indices_remaining"]) == (
        "True", "1-5", "-")
    assert parent["array_state_count"] == "Queued:0 Running:0 Exiting:0 Expired:0"
    assert "resources_used" not in parent and "run_count" not in parent
    assert (jobs["6[3].vm"]["array_id"], jobs["6[3].vm"]["array_index"]) == ("6[].vm", 3)
    assert parent["Output_Path"].endswith("/arr.o6.^array_index^")  # expanded per subjob
    assert jobs["6[3].vm"]["Output_Path"].endswith("/arr.o6.3")
    assert pbs.parse_job_id("6[3].vm").parent == "6[].vm"


def test_no_jobs_json_has_no_jobs_key() -> None:
    text = read("qstat-f-json.final.json")
    assert "Jobs" not in json.loads(text)
    assert pbs.parse_qstat_json(text)["Jobs"] == {}
    assert pbs.parse_qstat_json_status(text) == []
    frame = ap.read_qstat_json(text)
    assert frame.empty and list(frame.columns) == list(COLUMNS)


# --------------------------------------------------------------------------- qstat -x -f text


def test_text_form_equals_json_form() -> None:
    js = pbs.parse_qstat_json(read("qstat-x-f-json.final.json"))["Jobs"]
    tx = pbs.parse_qstat_full(read("qstat-x-f.final.txt"))

    def as_text(value: dict[str, Any]) -> dict[str, Any]:
        return {k: as_text(v) if isinstance(v, dict) else str(v) for k, v in value.items()}

    assert list(tx) == list(js)
    for job_id in js:
        assert tx[job_id] == as_text(js[job_id]), job_id
    assert statuses(read("qstat-x-f.final.txt"), pbs.parse_qstat_text_status) == {
        j: EXPECTED[j] for j in TOP_JOBS}


# --------------------------------------------------------------------------- accounting log


def test_accounting_records_per_job() -> None:
    records = list(pbs.iter_accounting_records(read("accounting-20261203.txt").splitlines()))
    assert len(records) == len(read("accounting-20261203.txt").splitlines())
    kinds: dict[str, str] = {}
    for rec in records:
        kinds[rec.job_id] = kinds.get(rec.job_id, "") + rec.record_type
    assert kinds == {
        "2.vm": "QSE", "3.vm": "QSDE", "4.vm": "QSE", "5.vm": "QSE", "6[].vm": "QSE",
        **{f"6[{i}].vm": "SE" for i in range(1, 6)},  # subjobs have no Q record
        "7.vm": "QSE", "8.vm": "QSE", "9.vm": "QD",  # deleted while held: no E record
    }
    by = {(r.job_id, r.record_type): r for r in records}
    assert by[("3.vm", "D")].attrs == {"requestor": "tester@localhost"}
    parent_e = by[("6[].vm", "E")].attrs
    assert (parent_e["run_count"], parent_e["Exit_status"]) == ("0", "0")
    assert not any(k.startswith("resources_used.") for k in parent_e) and "exec_host" not in parent_e
    assert by[("6[].vm", "Q")].attrs["array_indices"] == "1-5"
    assert by[("9.vm", "Q")].attrs["etime"] == "0"  # submitted held: never eligible
    assert by[("8.vm", "E")].attrs["Exit_status"] == "-29"
    assert by[("5.vm", "S")].attrs["resource_assigned.mem"] == "102400kb"


def test_accounting_frame_states_and_dtypes() -> None:
    df = ap.read_pbs_accounting(REAL / "accounting-20261203.txt", tz=UTC)
    assert list(df.columns) == list(COLUMNS)
    for col in ("submit_time", "start_time", "end_time"):
        assert str(df[col].dtype) == "datetime64[ns, UTC]"
    for col in ("wait", "elapsed", "time_limit", "cpu_time"):
        assert str(df[col].dtype) == "timedelta64[ns]"
    for col in ("state", "user", "partition", "scheduler"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype)
    assert str(df["exit_code"].dtype) == "Int64"
    rows = {r.job_id: r for r in df.itertuples()}
    got = {j: (r.state, None if pd.isna(r.exit_code) else r.exit_code,
               None if pd.isna(r.exit_signal) else r.exit_signal) for j, r in rows.items()}
    assert got == EXPECTED
    assert (rows["3.vm"].state_raw, rows["9.vm"].state_raw) == ("E", "D")
    nine = rows["9.vm"]
    assert nine.end_time == pd.Timestamp("2026-12-03 07:41:22", tz="UTC")  # the D record
    assert pd.isna(nine.start_time) and pd.isna(nine.eligible_time)  # etime=0
    eight = rows["8.vm"]
    assert (eight.time_limit, eight.elapsed) == (pd.Timedelta(seconds=10), pd.Timedelta(seconds=12))
    assert eight.max_rss_bytes == 6216 * 1024 and eight.node_list == "vm"
    assert rows["5.vm"].req_mem_bytes == 100 * 1024 * 1024
    parent = rows["6[].vm"]
    assert (parent.array_job_id, pd.isna(parent.array_task_id), pd.isna(parent.max_rss_bytes)) == (
        "6[].vm", True, True)
    assert (rows["6[4].vm"].array_job_id, rows["6[4].vm"].array_task_id) == ("6[].vm", 4)


def test_accounting_and_qstat_agree_on_times_and_usage() -> None:
    acct = ap.read_pbs_accounting(REAL / "accounting-20261203.txt", tz=UTC).set_index("job_id")
    qjson = ap.read_qstat_json(read("qstat-x-f-t-json.final.json"), tz=UTC).set_index("job_id")
    qtext = ap.read_qstat_text(read("qstat-x-f.final.txt"), tz=UTC).set_index("job_id")
    cols = ["state", "exit_code", "submit_time", "start_time", "time_limit", "max_rss_bytes",
            "cpu_time", "cpus", "nodes", "partition", "user", "job_name"]
    ids = sorted(acct.index)
    assert sorted(qjson.index) == ids
    expected = acct.loc[ids, cols].astype(object)
    pd.testing.assert_frame_equal(qjson.loc[ids, cols].astype(object), expected)
    pd.testing.assert_frame_equal(qtext.loc[TOP_JOBS, cols].astype(object), expected.loc[TOP_JOBS])
    # obittime (qstat) is when the server handled the obit, `end` (E record) when it wrote the
    # record: the real server shows them a second apart (6[2].vm: 07:41:25 vs 07:41:26)
    gap = (qjson.loc[ids, "end_time"] - acct.loc[ids, "end_time"]).abs()
    assert gap.notna().all() and (gap <= pd.Timedelta(seconds=1)).all()
    assert (gap > pd.Timedelta(0)).sum() == 1
    # qstat prints ctime() strings, the accounting log epoch seconds: same instants
    assert qjson.loc["2.vm", "submit_time"] == datetime(2026, 12, 3, 7, 40, 45, tzinfo=timezone.utc)


# --------------------------------------------------------------------------- ids and errors


def test_qsub_output_and_job_ids() -> None:
    ids = dict(line.split("=", 1) for line in read("jobids.txt").split())
    assert ids == {"DEL": "3.vm", "SIMPLE": "4.vm", "RES": "5.vm", "ARR": "6[].vm", "EXIT3": "7.vm",
                   "WALL": "8.vm", "QDELQ": "9.vm"}
    for job_id in ids.values():
        assert pbs.parse_qsub_output(job_id + "\n") == job_id
    arr = pbs.parse_job_id("6[].vm")
    assert (arr.sequence, arr.is_array, arr.index, arr.server) == (6, True, None, "vm")
    assert pbs.match_job_ids(["6[].vm", "4.vm"], ["4.vm", "6[].vm", "6[1].vm"]) == {
        "6[].vm": "6[].vm", "4.vm": "4.vm"}
    with pytest.raises(SchedulerOutputError):
        pbs.parse_qsub_output("qsub: Unknown queue\n")


def command_errors() -> dict[str, tuple[int, str, str]]:
    """``command-errors.txt``: ``### <command>`` / ``rc=N`` / ``--- stdout`` / ``--- stderr`` blocks."""
    out = {}
    for block in read("command-errors.txt").split("### ")[1:]:
        head, rest = block.split("\n", 1)
        rc, rest = rest.split("\n", 1)
        stdout, stderr = rest.removeprefix("--- stdout\n").split("--- stderr\n", 1)
        out[head] = (int(rc.removeprefix("rc=")), stdout, stderr)
    return out


def test_error_lines_of_the_real_clients() -> None:
    errors = command_errors()
    kinds = {cmd: [(e.kind, e.job_id) for e in pbs.parse_error_lines(stderr)]
             for cmd, (_rc, _out, stderr) in errors.items() if cmd.startswith(("qstat", "qdel", "qrls"))}
    assert kinds["qstat -f -F json 99999.vm"] == [(pbs.UNKNOWN_JOB, "99999.vm")]
    assert kinds["qstat -x -f -F json -t 99999[].vm"] == [(pbs.UNKNOWN_JOB, "99999[].vm")]
    assert kinds["qstat 13.vm"] == [(pbs.JOB_FINISHED, "13.vm")]
    assert kinds["qdel 13.vm"] == [(pbs.JOB_FINISHED, "13.vm")]
    assert kinds["qdel 99999.vm"] == [(pbs.UNKNOWN_JOB, "99999.vm")]
    assert kinds["qrls 99999.vm"] == [(pbs.UNKNOWN_JOB, "99999.vm")]
    assert kinds["qdel abc"] == [(pbs.BAD_JOB_ID, "abc")]
    assert kinds["qstat -f -F json abc"] == [(pbs.OTHER_ERROR, None)]
    assert {cmd: rc for cmd, (rc, _o, _e) in errors.items() if cmd.startswith(("qstat", "qdel"))} == {
        "qstat -f -F json 99999.vm": 153, "qstat -x -f -F json -t 99999[].vm": 153,
        "qstat -x -f 99999.vm": 153, "qstat 99999.vm": 153, "qstat -f -F json 13.vm": 35,
        "qstat 13.vm": 35, "qstat -f -F json abc": 170, "qdel 99999.vm": 153, "qdel 13.vm": 35,
        "qdel abc": 1}
    # qstat -F json prints the header without Jobs even when every id failed
    rc, stdout, _ = errors["qstat -f -F json 99999.vm"]
    assert pbs.parse_qstat_json_status(stdout) == [] and rc == 153
    backend = PbsProBackend()
    assert backend.tolerable_status_error(errors["qstat -f -F json 13.vm"][2])
    assert not backend.tolerable_status_error(errors["qstat -f -F json abc"][2])


def test_server_attributes() -> None:
    text = read("qstat-B-f-json.txt")
    backend = PbsProBackend()
    assert backend.parse_limits(text).max_array_size == 20
    assert backend.parse_cluster_name(text) == "vm"
