"""read_sacct_json on real 21.08/22.05 output and on a constructed 23.11-shape sample."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hpcjobs import states as st
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources.slurm import read_sacct_json
from hpcjobs.errors import SchedulerOutputError

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def _job(df: pd.DataFrame, job_id: str, step: str | None = None) -> pd.Series:
    sel = df.job_id == job_id
    sel &= df.step.isna() if step is None else df.step == step
    rows = df[sel]
    assert len(rows) == 1
    return rows.iloc[0]


def test_clockwork_21_08() -> None:
    df = read_sacct_json(DATA / "clockwork_cedar_slurm-21.08_sacct_1.json")
    assert list(df.columns) == list(COLUMNS)
    assert list(df.job_id) == ["1_7", "2_0"]  # array.job_id _ array.task_id
    a = _job(df, "1_7")
    assert (a.job_id_raw, a.array_job_id, a.array_task_id, a.state) == ("10", "1", 7, st.NODE_FAIL)
    assert (a.user, a.account, a.cluster, a.partition) == ("nobody", "def-cerise-rrg", "cedar", "partition1")
    assert a.submit_time == pd.Timestamp(1680193479, unit="s", tz="UTC")
    assert pd.isna(a.end_time)  # end 0 = not ended
    assert a.elapsed == pd.Timedelta(seconds=20615)
    assert a.time_limit == pd.Timedelta(minutes=1440)
    assert (a.cpus, a.gpus, a.nodes) == (4, 1, 1)
    assert a.req_mem_bytes == 40960 * 1024**2
    assert _job(df, "2_0").state == st.REQUEUED


@pytest.fixture(scope="module")
def testbed() -> pd.DataFrame:
    return read_sacct_json(DATA / "testbed-22.05_sacct.json")


def test_testbed_22_05_jobs(testbed: pd.DataFrame) -> None:
    assert testbed.step.isna().sum() == 15 and len(testbed) == 45
    j6 = _job(testbed, "6")
    assert (j6.state, j6.time_limit, j6.elapsed) == (st.TIMEOUT, pd.Timedelta(minutes=1), pd.Timedelta(seconds=67))
    assert j6.start_time == ts("2026-12-02T15:53:57") and j6.end_time == ts("2026-12-02T15:55:04")
    b6 = _job(testbed, "6", "batch")
    assert (b6.state, b6.exit_code, b6.exit_signal) == (st.CANCELLED, 0, 15)  # SIGNALED, signal_id 15
    # this Slurm's JSON reports exit 3 as SUCCESS/0 (the text output says 3:0): read what it says
    assert _job(testbed, "5").exit_code == 0
    t9 = _job(testbed, "3_9")
    assert (t9.job_id_raw, t9.array_task_id) == ("3", 9)
    # step MaxRSS from tres.requested.max mem (bytes): 3_9.batch 3092K as in the text fixture
    assert _job(testbed, "3_9", "batch").max_rss_bytes == 3092 * 1024
    assert t9.max_rss_bytes == 3092 * 1024
    assert _job(testbed, "2").time_limit is pd.NaT or pd.isna(_job(testbed, "2").time_limit)
    assert _job(testbed, "4").gpus == 1


def test_constructed_23_11_shape() -> None:
    df = read_sacct_json(DATA / "constructed_sacct-json-23.11-shape.json")
    assert list(df.columns) == list(COLUMNS)
    t = _job(df, "9641650_3")
    assert (t.job_id_raw, t.array_job_id, t.array_task_id, t.state) == ("9641651", "9641650", 3, st.COMPLETED)
    assert (t.gpus, t.gpu_type, t.cpus) == (2, "a100", 8)
    assert t.time_limit == pd.Timedelta(hours=2)  # {"set": true, "number": 120} minutes
    assert t.max_rss_bytes == 5368709120
    assert t.cpu_time == pd.Timedelta(seconds=3)  # job total 0: sum of steps (1.5 s each)
    assert (t.sweep_id, t.chunk, t.comment) == ("lr-sweep", 0, "hpcjobs:lr-sweep:0:0123abcd")
    assert t.wait == pd.Timedelta(seconds=10)
    b = _job(df, "9641650_3", "batch")  # step id "9641651.batch"
    assert b.start_time == ts("2023-11-14T22:13:40")  # step times as {set, number}
    to = _job(df, "9641700")
    assert (to.state, to.time_limit) == (st.TIMEOUT, pd.Timedelta(minutes=1))
    tb = _job(df, "9641700", "batch")
    assert (tb.state, tb.exit_code, tb.exit_signal) == (st.CANCELLED, 0, 15)
    f = _job(df, "9641800")
    assert (f.state, f.exit_code, f.exit_signal, f.user) == (st.FAILED, 3, 0, "bob")
    assert pd.isna(f.time_limit)  # infinite
    assert f.req_mem_bytes == 2048 * 1024**2


def test_json_state_list_and_errors() -> None:
    doc = json.loads((DATA / "constructed_sacct-json-23.11-shape.json").read_text())
    doc["jobs"] = doc["jobs"][2:]
    doc["jobs"][0]["state"]["current"] = ["PENDING", "REQUEUED"]
    df = read_sacct_json(doc)
    assert (df.state[0], df.state_raw[0]) == (st.PENDING, "PENDING,REQUEUED")
    assert len(read_sacct_json({"jobs": []})) == 0
    with pytest.raises(SchedulerOutputError):
        read_sacct_json("{}")
    with pytest.raises(SchedulerOutputError):
        read_sacct_json("not json")
