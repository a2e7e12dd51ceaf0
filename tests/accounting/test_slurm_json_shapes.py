"""Slurm JSON exports read by their shape: ``sacct --json`` vs slurmctld's job list (``squeue --json``).

Real files: ``testbed-22.05_squeue.json`` and ``testbed-22.05_sacct.json`` (the same jobs, Slurm 22.05.8),
``testbed/squeue_running.json`` (jobs running and pending), ``testbed/sacct.json`` with ``testbed/sacct_X.txt``
(the same capture, JSON and text). The 23.02+ shape (``job_state`` a list, numbers as ``{set, infinite,
number}``, the verbose ``exit_code``) follows SchedMD's OpenAPI schema (``v0.0.41``-``v0.0.45`` ``job_info``);
no real output of it was found, so the generated test turns the real 22.05 entries into it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from hpcjobs import states as st
from hpcjobs.accounting.report_source import detect_format, read_saved
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from hpcjobs.accounting.sources.slurm_json import read_sacct_json
from hpcjobs.accounting.sources.slurm_queue import SNAPSHOT_NOTE, read_squeue_json
from hpcjobs.cli import main
from hpcjobs.errors import ConfigError, SchedulerOutputError

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
SQUEUE = DATA / "testbed-22.05_squeue.json"
SACCT = DATA / "testbed-22.05_sacct.json"
RUNNING = DATA / "testbed" / "squeue_running.json"
TESTBED_JSON, TESTBED_TEXT = DATA / "testbed" / "sacct.json", DATA / "testbed" / "sacct_X.txt"
#: The ``$FMT`` of ``tests/data/slurm/testbed/COMMANDS.txt``: the fields of ``sacct_X.txt``.
TEXT_FIELDS = next(line.split("--format=", 1)[1].split()[0] for line in (DATA / "testbed" / "COMMANDS.txt")
                   .read_text().splitlines() if line.startswith("sacct_X.txt")).split(",")
COMPARED = ["job_id", "state", "submit_time", "start_time", "end_time", "nodes", "cpus", "gpus", "req_mem_bytes",
            "user", "partition", "node_list"]


def _report(*argv: str) -> Any:
    return CliRunner().invoke(main, ["report", *argv], catch_exceptions=False)


# --------------------------------------------------------------------------- the queue list, real files


def test_squeue_json_is_detected_from_its_job_objects_whatever_the_file_name(tmp_path: Path) -> None:
    text = SQUEUE.read_text()
    assert detect_format(text) == "squeue-json"
    assert detect_format(SACCT.read_text()) == "sacct-json"
    named = tmp_path / "sacct.json"  # the name says sacct: the data decides
    named.write_text(text)
    assert read_saved(named).attrs["notes"] == [SNAPSHOT_NOTE]


def test_real_squeue_json_reads_as_the_sacct_json_of_the_same_jobs() -> None:
    queue = read_squeue_json(SQUEUE)
    assert st.UNKNOWN not in set(queue["state"].astype(str))
    acct = read_sacct_json(SACCT)
    acct = acct[acct["step"].isna()]
    both = queue.merge(acct, on="job_id_raw", suffixes=("", "_sacct"))
    assert len(both) == len(acct) == 15  # sacct was asked for every job but the testbed's smoke job
    for col in COMPARED:
        assert both[col].astype(object).tolist() == both[f"{col}_sacct"].astype(object).tolist(), col
    failer = queue.set_index("job_name").loc["failer"]
    assert (failer.state, failer.exit_code, failer.exit_signal) == (st.FAILED, 3, 0)  # 768 = exit 3
    timeout = queue.set_index("job_name").loc["timeout"]
    assert (timeout.exit_code, timeout.exit_signal, timeout.time_limit) == (0, 15, pd.Timedelta(minutes=1))


def test_real_squeue_json_of_running_and_pending_jobs_has_no_expected_times() -> None:
    df = read_squeue_json(RUNNING).set_index("job_id")
    raw = {str(j["job_id"]): j for j in json.loads(RUNNING.read_text())["jobs"]}
    assert df.loc["8", "state"] == st.HELD  # PENDING, reason JobHeldUser
    pending = df[df["state"].isin([st.PENDING, st.HELD])]
    assert len(pending) == 3 and pending["start_time"].isna().all() and pending["node_list"].isna().all()
    assert raw["12"]["start_time"] > 0  # slurmctld's expected start of job 12: not a start
    running = df[df["state"] == st.RUNNING]
    assert len(running) == 8 and running["end_time"].isna().all() and running["exit_code"].isna().all()
    assert running["start_time"].notna().all() and raw["4"]["end_time"] > 0  # an expected end: not an end
    assert df.loc["11_[2-11%3]", "array_task_spec"] == "2-11%3"


def test_cli_reports_a_squeue_export_with_the_snapshot_note() -> None:
    res = _report("--from-file", str(SQUEUE), "--section", "failures", "--table", "failures_by_state", "--json")
    assert res.exit_code == 0, res.output
    assert f"warning: {SNAPSHOT_NOTE}" in res.stderr
    states = {d["state"]: d["jobs"] for d in json.loads(res.stdout)["failures_by_state"]}
    assert states == {"COMPLETED": 13, "FAILED": 1, "TIMEOUT": 1, "CANCELLED": 1}


def test_sacct_reader_refuses_the_queue_list_by_name() -> None:
    with pytest.raises(SchedulerOutputError, match="squeue --json"):
        read_sacct_json(SQUEUE)
    with pytest.raises(SchedulerOutputError, match="job_state"):
        read_squeue_json(SACCT)


@pytest.mark.parametrize("jobs", [[{"id": 1, "status": "done"}], [{"job_state": "RUNNING"}, {"state": {}, "time": {}}],
                                  [7]], ids=["other-keys", "both-shapes", "not-objects"])
def test_a_jobs_list_of_another_shape_is_refused_with_the_formats_named(tmp_path: Path, jobs: list[Any]) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"jobs": jobs}))
    with pytest.raises(ConfigError, match=r"neither `sacct --json`.*`squeue --json`"):
        read_saved(path)
    res = _report("--from-file", str(path))
    assert res.exit_code == 2 and "squeue --json" in res.stderr and "Traceback" not in res.output


# --------------------------------------------------------------------------- 22.05 vs 23.02+ shapes, generated

_NUMBERS = ("submit_time", "eligible_time", "start_time", "end_time", "node_count", "cpus", "time_limit",
            "array_job_id", "array_task_id", "het_job_id", "het_job_offset")
_REAL_JOBS = json.loads(SQUEUE.read_text())["jobs"] + json.loads(RUNNING.read_text())["jobs"]


def _no_val(value: Any) -> dict[str, Any]:
    """A 22.05 number as 23.02+ writes it: ``{set, infinite, number}`` (``None`` = unset)."""
    return {"set": value is not None, "infinite": False, "number": value if value is not None else 0}


def _verbose_exit(status: int) -> dict[str, Any]:
    """A raw wait status as the 23.02+ ``process_exit_code_verbose`` object."""
    code, sig = status >> 8 & 0xFF, status & 0x7F
    return {"status": ["SIGNALED"] if sig else ["SUCCESS" if code == 0 else "ERROR"],
            "return_code": _no_val(code), "signal": {"id": _no_val(sig), "name": ""}}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=hs.integers(0, len(_REAL_JOBS) - 1), as_list=hs.booleans(), flags=hs.lists(
    hs.sampled_from(["REQUEUED", "RESIZING"]), max_size=1), objects=hs.sets(hs.sampled_from(_NUMBERS)),
    verbose_exit=hs.booleans())
def test_both_generations_of_a_job_object_read_alike(index: int, as_list: bool, flags: list[str], objects: set[str],
                                                     verbose_exit: bool) -> None:
    """A real 22.05 entry and the same entry in the 23.02+ shape (any mix of its changes) give one row."""
    job = _REAL_JOBS[index]
    new = copy.deepcopy(job)
    if as_list:
        new["job_state"] = [job["job_state"], *flags]  # the base state first, then flags
    for name in objects:
        new[name] = _no_val(job.get(name))
    if verbose_exit:
        new["exit_code"] = _verbose_exit(job["exit_code"])
    old_row, new_row = read_squeue_json({"jobs": [job]}).iloc[0], read_squeue_json({"jobs": [new]}).iloc[0]
    for col in ("job_id", "state", "exit_code", "exit_signal", "submit_time", "start_time", "end_time", "elapsed",
                "time_limit", "nodes", "cpus", "gpus", "req_mem_bytes", "user"):
        assert repr(old_row[col]) == repr(new_row[col]), col
    assert new_row["state"] != st.UNKNOWN


@given(seconds=hs.integers(1, 2**31), infinite=hs.booleans())
def test_unset_and_infinite_numbers_are_missing(seconds: int, infinite: bool) -> None:
    job = {"job_id": 5, "job_state": ["COMPLETED"], "submit_time": {"set": True, "infinite": False, "number": seconds},
           "start_time": {"set": False, "infinite": False, "number": seconds},
           "time_limit": {"set": True, "infinite": infinite, "number": 0 if infinite else 3}}
    row = read_squeue_json({"jobs": [job]}).iloc[0]
    assert row["submit_time"] == pd.Timestamp(seconds, unit="s", tz="UTC") and pd.isna(row["start_time"])
    assert pd.isna(row["time_limit"]) if infinite else row["time_limit"] == pd.Timedelta(minutes=3)


# --------------------------------------------------------------------------- sacct --json: a job that never started


def test_sacct_json_nodes_agree_with_the_text_of_the_same_capture() -> None:
    """Every job of the testbed capture: JSON and text give the same nodes and CPUs (job 8 never started)."""
    js = read_sacct_json(TESTBED_JSON)
    text = read_sacct_parsable2(TESTBED_TEXT, TEXT_FIELDS)
    js, text = (f[f["step"].isna()].set_index("job_id") for f in (js, text))
    assert set(js.index) == set(text.index)
    for job_id in js.index:
        assert (js.loc[job_id, "nodes"], js.loc[job_id, "cpus"]) == (text.loc[job_id, "nodes"],
                                                                      text.loc[job_id, "cpus"]), job_id
    assert js.loc["8", "nodes"] == 1 and js.loc["8", "state"] == st.CANCELLED


@given(requested=hs.integers(1, 64), started=hs.booleans(), numbers_as_objects=hs.booleans())
def test_sacct_json_nodes_are_the_allocation_else_the_request(requested: int, started: bool,
                                                              numbers_as_objects: bool) -> None:
    def num(v: int) -> Any:
        return _no_val(v) if numbers_as_objects else v

    node = [{"type": "node", "name": None, "id": 4, "count": num(requested)}]
    job = {"job_id": 8, "state": {"current": "COMPLETED" if started else "CANCELLED"}, "time": {},
           "allocation_nodes": num(requested if started else 0),
           "tres": {"allocated": node if started else [], "requested": node}}
    assert read_sacct_json({"jobs": [job]}).loc[0, "nodes"] == requested
