"""Hand-checked tests of PBS Pro / OpenPBS ingest into the accounting schema (hpcjobs.accounting.sources.pbs)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from hpcjobs import states as st
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources import pbs as ap

DATA = Path(__file__).resolve().parents[1] / "data" / "pbs"
NCAR = DATA / "ncar-qhist_casper_20250331_testdata"
CONSTRUCTED = DATA / "constructed_accounting_20221014"
KiB, GiB = 1024, 2**30


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def td(seconds: int) -> pd.Timedelta:
    return pd.Timedelta(seconds=seconds)


def by_id(df: pd.DataFrame) -> dict[str, pd.Series]:
    return {row.job_id: row for _, row in df.iterrows()}


def assert_schema(df: pd.DataFrame, scheduler: str) -> None:
    assert list(df.columns) == list(COLUMNS)
    for name, dtype in COLUMNS.items():
        assert str(df[name].dtype) == str(dtype), name
    assert set(df["scheduler"]) <= {scheduler}


# --------------------------------------------------------------------------- qstat JSON / text


def test_read_qstat_json_real_fixture() -> None:
    df = ap.read_qstat_json((DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json").read_text(),
                            tz="UTC")
    assert_schema(df, "pbspro")
    rows = by_id(df)
    assert list(rows) == ["1004.pbs", "1005.pbs", "1006.pbs"]
    r = rows["1004.pbs"]
    assert (r.cluster, r.job_id_raw, r.job_name, r.user, r.partition) == ("pbs", "1004", "hello_pbs", "fireuser",
                                                                          "workq")
    assert pd.isna(r.account)  # only project=_pbs_project_default
    assert (r.state, r.state_raw, r.exit_code, r.exit_signal) == (st.COMPLETED, "F", 0, 0)
    assert r.submit_time == ts("2025-06-19 10:36:47")
    assert r.start_time == ts("2025-06-19 10:36:47")
    # the container's qstat ran in UTC: obittime equals history_timestamp 1750329438
    assert r.end_time == pd.Timestamp(1750329438, unit="s", tz="UTC")
    assert (r.elapsed, r.wait, r.time_limit, r.cpu_time) == (td(31), td(0), td(300), td(0))
    assert (r.nodes, r.cpus, r.gpus) == (1, 1, 0)
    assert pd.isna(r.req_mem_bytes)
    assert r.max_rss_bytes == 5652 * KiB
    assert r.node_list == "pbs"
    assert r.comment == "Job run at Thu Jun 19 at 10:36 on (pbs:ncpus=1) and finished"
    run = rows["1006.pbs"]
    assert (run.state, run.user, run.max_rss_bytes) == (st.RUNNING, "firesrv", 5660 * KiB)
    assert pd.isna(run.end_time) and pd.isna(run.exit_code)
    assert run.elapsed == td(10)  # resources_used.walltime while running


def test_read_qstat_json_timezone_argument() -> None:
    text = (DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json").read_text()
    df = ap.read_qstat_json(text, tz="Europe/Zurich")
    assert df["submit_time"].iloc[0] == ts("2025-06-19 08:36:47")  # CEST = UTC+2


def test_read_qstat_json_without_jobs_is_empty() -> None:
    df = ap.read_qstat_json((DATA / "firecrest_openpbs-23.06.06_qstat-F-json-f-Q.json").read_text())
    assert len(df) == 0
    assert_schema(df, "pbspro")


def test_read_qstat_text_real_fixture() -> None:
    df = ap.read_qstat_text((DATA / "aiida_pbspro-epfl_qstat-f_6jobs_tab-continuation.txt").read_text(),
                            tz="Europe/Zurich")
    assert_schema(df, "pbspro")
    rows = by_id(df)
    r = rows["69301.mycluster"]
    assert (r.state, r.account, r.partition, r.user) == (st.RUNNING, "lsu", "P_lsu", "user02")
    assert (r.cpus, r.nodes, r.gpus) == (64, 4, 0)
    assert r.node_list == "b141,b142,b143,b144"
    assert r.cpu_time == td(4090 * 3600 + 56 * 60 + 3)
    assert r.elapsed == td(64 * 3600 + 26 * 60 + 16)  # no end yet: resources_used.walltime
    assert r.time_limit == td(72 * 3600)
    assert r.max_rss_bytes == 13378420 * KiB
    assert r.submit_time == ts("2013-04-10 15:10:29")  # Wed Apr 10 17:10:29 2013 CEST
    assert r.start_time == ts("2013-04-19 23:36:59")  # Sat Apr 20 01:36:59 2013 CEST
    assert r.eligible_time == r.start_time and r.wait == td(0)  # etime = stime = Sat Apr 20 01:36:59
    q = rows["68350.mycluster"]
    assert (q.state, q.cpus, q.nodes) == (st.PENDING, 240, 15)
    assert pd.isna(q.account) and pd.isna(q.start_time) and pd.isna(q.wait)
    assert q.comment == "Not Running: Node is in an ineligible state: offline"
    assert rows["69302.mycluster"].state == st.HELD


def test_constructed_json_and_text_agree() -> None:
    js = ap.read_qstat_json((DATA / "constructed_qstat-F-json_arrays-exit.json").read_text(), tz="UTC")
    tx = ap.read_qstat_text((DATA / "constructed_qstat-f_arrays-exit-edge-cases.txt").read_text(), tz="UTC")
    cols = [c for c in COLUMNS if c != "job_name"]
    pd.testing.assert_frame_equal(js[cols].iloc[:4].astype(object), tx[cols].iloc[:4].astype(object))
    rows = by_id(js)
    s1 = rows["4100[1].pbs"]
    assert (s1.array_job_id, s1.array_task_id, s1.job_id_raw) == ("4100[].pbs", 1, "4100[1]")
    assert (s1.sweep_id, s1.chunk, s1.comment) == ("sw1", 0, "hpcjobs:sw1:0:0123abcd")
    assert (s1.state, s1.exit_code, s1.elapsed, s1.wait) == (st.COMPLETED, 0, td(300), td(5))
    assert (s1.req_mem_bytes, s1.max_rss_bytes, s1.cpus, s1.node_list) == (4 * GiB, 2 * GiB, 2, "n1")
    s2 = rows["4100[2].pbs"]
    assert (s2.state, s2.exit_code, s2.elapsed) == (st.TIMEOUT, -29, td(3603))
    parent = rows["4100[].pbs"]
    assert (parent.array_job_id, parent.job_id_raw, parent.state) == ("4100[].pbs", "4100[]", st.RUNNING)
    assert pd.isna(parent.array_task_id)
    old = rows["4101.pbs"]
    assert (old.state, old.exit_signal, old.account, old.gpus) == (st.TIMEOUT, 15, "proj42", 1)
    assert (old.req_mem_bytes, old.max_rss_bytes) == (64 * GiB, 68719476736)
    assert old.submit_time == ts("2022-10-04 21:23:20")  # "Tue Oct  4 21:23:20 2022"
    assert old.elapsed == td(10 * 3600 + 66)
    held = rows["4104.pbs"]
    assert (held.job_name, held.state, held.user) == ("123", st.HELD, "carol")
    queued = by_id(tx)["4103.pbs"]
    assert (queued.cpus, queued.gpus, queued.nodes, queued.time_limit) == (8, 2, 2, td(100 * 3600))


# --------------------------------------------------------------------------- accounting logs


def test_read_pbs_accounting_real_ncar() -> None:
    df = ap.read_pbs_accounting(NCAR, tz="America/Denver")
    assert_schema(df, "pbspro")
    rows = by_id(df)
    assert list(rows) == ["4215033.casper-pbs", "4215034.casper-pbs", "4215065.casper-pbs", "4215265.casper-pbs"]
    rerun = rows["4215033.casper-pbs"]  # Q Q S R(-3) S E(-1, run_count=2): the final run
    assert (rerun.state, rerun.state_raw, rerun.exit_code) == (st.FAILED, "E", -1)
    assert rerun.start_time == pd.Timestamp(1743440371, unit="s", tz="UTC")  # second start
    assert rerun.end_time == pd.Timestamp(1743440375, unit="s", tz="UTC")
    assert rerun.submit_time == ts("2025-03-31 16:59:15")
    assert (rerun.wait, rerun.elapsed) == (td(16), td(4))
    assert (rerun.req_mem_bytes, rerun.max_rss_bytes) == (30, 0)  # Resource_List.mem=30b
    assert (rerun.partition, rerun.account, rerun.user, rerun.cluster) == ("htc", "SCSG0001", "vanderwb",
                                                                           "casper-pbs")
    ok = rows["4215034.casper-pbs"]
    assert (ok.state, ok.exit_code, ok.exit_signal) == (st.COMPLETED, 0, 0)
    assert (ok.req_mem_bytes, ok.max_rss_bytes) == (30 * GiB, 756960 * KiB)
    assert (ok.elapsed, ok.cpu_time, ok.wait, ok.time_limit) == (td(218), td(9), td(11), td(6 * 3600))
    assert (ok.node_list, ok.nodes, ok.cpus, ok.gpus) == ("crhtc86", 1, 1, 0)
    m = rows["4215265.casper-pbs"]
    assert (m.job_name, m.user, m.cpus, m.req_mem_bytes, m.time_limit) == (
        "bneuman_matlab", "bneuman", 5, 10 * GiB, td(25 * 60))
    assert (m.elapsed, m.cpu_time, m.max_rss_bytes) == (td(23), td(30), 3163632 * KiB)
    assert ap.read_pbs_accounting(NCAR, tz="America/Denver", include_unfinished=True).shape == df.shape


def test_read_pbs_accounting_constructed() -> None:
    df = ap.read_pbs_accounting(CONSTRUCTED, tz="Europe/Berlin")
    assert_schema(df, "pbspro")
    rows = by_id(df)
    assert sorted(rows) == ["4200.pbs", "4201.pbs", "4202.pbs", "4203[1].pbs", "4203[2].pbs", "4204.pbs"]
    deleted_running = rows["4200.pbs"]  # D then E Exit_status=271
    assert (deleted_running.state, deleted_running.exit_signal) == (st.CANCELLED, 15)
    assert pd.isna(deleted_running.exit_code)
    assert (deleted_running.account, deleted_running.sweep_id, deleted_running.chunk) == ("my acct", "sw2", 1)
    assert deleted_running.comment == "hpcjobs:sw2:1:00ff00ff"
    assert (deleted_running.gpus, deleted_running.cpus, deleted_running.elapsed) == (1, 2, td(1797))
    queued = rows["4201.pbs"]  # Q then D: never started, ends at the D line (11:10:00 Berlin)
    assert (queued.state, queued.state_raw, queued.partition) == (st.CANCELLED, "D", "workq")
    assert queued.end_time == ts("2022-10-14 09:10:00")
    assert pd.isna(queued.start_time) and pd.isna(queued.elapsed) and pd.isna(queued.wait)
    assert queued.submit_time == ts("2022-10-14 09:01:00")
    assert queued.time_limit == td(600)
    walltime = rows["4202.pbs"]
    assert (walltime.state, walltime.exit_code, walltime.elapsed) == (st.TIMEOUT, -29, td(3605))
    sub1, sub2 = rows["4203[1].pbs"], rows["4203[2].pbs"]
    assert (sub1.array_job_id, sub1.array_task_id, sub1.state, sub1.account) == (
        "4203[].pbs", 1, st.COMPLETED, "grp;one")
    assert (sub2.array_task_id, sub2.state, sub2.exit_code) == (2, st.FAILED, 3)
    assert rows["4204.pbs"].state == st.FAILED and rows["4204.pbs"].state_raw == "A"
    assert rows["4204.pbs"].end_time == ts("2022-10-14 09:05:20")
    more = by_id(ap.read_pbs_accounting(CONSTRUCTED, tz="Europe/Berlin", include_unfinished=True))
    assert (more["4205.pbs"].state, more["4203[].pbs"].state) == (st.RUNNING, st.PENDING)
    assert pd.isna(more["4205.pbs"].end_time)


def test_accounting_sources_are_equivalent(tmp_path: Path) -> None:
    text = CONSTRUCTED.read_text()
    lines = text.splitlines(keepends=True)
    (tmp_path / "20221014").write_text("".join(lines[:8]))
    (tmp_path / "20221015").write_text("".join(lines[8:]))
    expected = ap.read_pbs_accounting(text, tz="Europe/Berlin")
    for source in (CONSTRUCTED, str(CONSTRUCTED), tmp_path, [tmp_path / "20221014", tmp_path / "20221015"]):
        got = ap.read_pbs_accounting(source, tz="Europe/Berlin")
        pd.testing.assert_frame_equal(got.sort_values("job_id").reset_index(drop=True),
                                      expected.sort_values("job_id").reset_index(drop=True))


def test_accounting_default_timezone_is_the_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(time, "tzset"):
        pytest.skip("needs time.tzset")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        df = ap.read_pbs_accounting(CONSTRUCTED)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert by_id(df)["4201.pbs"].end_time == ts("2022-10-14 09:10:00")


def test_empty_accounting(tmp_path, monkeypatch) -> None:
    """An empty string is empty text: not Path(""), the current directory (whose files were once read)."""
    import warnings

    (tmp_path / "20221014").write_text("10/14/2022 09:00:00;E;1.pbs;user=a Exit_status=0 end=1665738000\n")
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = ap.read_pbs_accounting("")
        assert len(df) == 0 and len(ap.read_pbs_accounting("  ")) == 0
    assert_schema(df, "pbspro")


def test_unfinished_jobs_from_a_partial_real_log() -> None:
    first_six = "".join(NCAR.read_text().splitlines(keepends=True)[:6])  # Q Q S Q Q R
    assert len(ap.read_pbs_accounting(first_six, tz="America/Denver")) == 0
    rows = by_id(ap.read_pbs_accounting(first_six, tz="America/Denver", include_unfinished=True))
    rerun, queued = rows["4215033.casper-pbs"], rows["4215034.casper-pbs"]
    assert (rerun.state, rerun.state_raw, rerun.partition) == (st.REQUEUED, "R", "htc")
    assert (queued.state, queued.state_raw, queued.req_mem_bytes) == (st.PENDING, "Q", 30 * GiB)
    assert queued.eligible_time == ts("2025-03-31 16:59:23")  # from the execution-queue Q record
