"""Hand-checked tests of Torque ingest into the accounting schema (hpcjobs.accounting.sources.torque)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hpcjobs import states as st
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources import torque as at

DATA = Path(__file__).resolve().parents[1] / "data" / "torque"
KiB, GiB = 1024, 2**30


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def td(seconds: int) -> pd.Timedelta:
    return pd.Timedelta(seconds=seconds)


def by_id(df: pd.DataFrame) -> dict[str, pd.Series]:
    return {row.job_id: row for _, row in df.iterrows()}


def assert_schema(df: pd.DataFrame) -> None:
    assert list(df.columns) == list(COLUMNS)
    for name, dtype in COLUMNS.items():
        assert str(df[name].dtype) == str(dtype), name
    assert set(df["scheduler"]) == {"torque"}


def test_read_torque_qstat_xml_real_fixture() -> None:
    text = (DATA / "fyrd_torque-stanford_qstat-x.xml").read_text()
    df = at.read_torque_qstat_xml(text)
    assert_schema(df)
    rows = by_id(df)
    run = rows["665199.superserver.stanford.edu"]
    assert (run.state, run.user, run.partition, run.cluster) == (st.RUNNING, "johnfox", "interactive",
                                                                 "superserver.stanford.edu")
    assert run.submit_time == ts("2016-11-16 23:34:39")  # epoch 1479339279
    assert run.start_time == pd.Timestamp(1479339665, unit="s", tz="UTC")
    assert run.wait == td(1479339665 - 1479339279)
    assert run.elapsed == td(335 * 3600 + 34 * 60 + 49)  # running: resources_used.walltime
    assert (run.cpu_time, run.max_rss_bytes, run.req_mem_bytes) == (td(923), 17592 * KiB, 4 * GiB)
    assert (run.nodes, run.cpus, run.node_list) == (1, 1, "node01")
    assert pd.isna(run.time_limit) and pd.isna(run.exit_code)
    q = rows["667999.superserver.stanford.edu"]
    assert (q.state, q.cpus, q.req_mem_bytes, q.time_limit) == (st.PENDING, 1, 32 * GiB, td(23 * 3600 + 59 * 60))
    done = rows["673174.superserver.stanford.edu"]
    assert (done.state, done.exit_code, done.exit_signal) == (st.COMPLETED, 0, 0)
    assert done.end_time == pd.Timestamp(1480547422, unit="s", tz="UTC")  # comp_time
    assert (done.elapsed, done.wait) == (td(0), td(1))
    sub = rows["673175[19].fruster.stanford.edu"]
    assert (sub.array_job_id, sub.array_task_id, sub.job_id_raw, sub.job_name) == (
        "673175[].fruster.stanford.edu", 19, "673175[19]", "t.sh-19")
    assert (sub.user, sub.node_list, sub.max_rss_bytes, sub.elapsed) == ("dacre", "node11", 2888 * KiB, td(1))
    parent = rows["673175[].superserver.stanford.edu"]
    assert (parent.state, parent.job_id_raw) == (st.UNKNOWN, "673175[]")
    # with the declaration line real qstat prints first
    with_decl = at.read_torque_qstat_xml('<?xml version="1.0"?>\n' + text)
    pd.testing.assert_frame_equal(with_decl, df)


def test_read_torque_qstat_text_real_fixture() -> None:
    df = at.read_torque_qstat_text((DATA / "aiida_torque-ichec_qstat-f_unexpected-newlines.txt").read_text(),
                                   tz="Europe/Dublin")
    assert_schema(df)
    rows = by_id(df)
    assert len(rows) == 10
    killed = rows["546437"]
    assert (killed.state, killed.state_raw, killed.exit_signal) == (st.CANCELLED, "C", 15)
    assert (killed.cpus, killed.nodes, killed.account) == (96, 4, "account_546437")  # exec_host 4 x 0-23
    assert killed.node_list == "r2i7n16,r2i6n14,r2i6n1,r1i7n8"
    assert killed.start_time == ts("2015-06-18 15:23:35")  # Thu Jun 18 16:23:35 2015 IST (UTC+1)
    assert pd.isna(killed.end_time)  # Torque -f text prints no comp_time here
    assert killed.elapsed == td(6 * 3600 + 12 * 60 + 22)
    assert killed.cpu_time == td(146 * 3600 + 3 * 60 + 5)
    held = rows["549159"]
    assert (held.state, held.cpus, held.nodes, held.gpus) == (st.HELD, 96, 4, 0)  # from nodes=4:ppn=24
    assert held.user == "user_549159"  # euser
    big = rows["543984"]
    # the fixture lost one '+' in exec_host ("r2i2n5/0-23" + "r2i1n3/0-23" joined): 30 hosts x 24 slots plus
    # one unparseable item counted as 1 slot; nodes still come from Resource_List.nodect
    assert (big.state, big.nodes, big.cpus) == (st.CANCELLED, 32, 30 * 24 + 1)
    assert big.time_limit == td(71 * 3600 + 59 * 60 + 59)


def test_read_torque_accounting_constructed() -> None:
    df = at.read_torque_accounting(DATA / "constructed_accounting_20170405", tz="Europe/Brussels")
    assert_schema(df)
    rows = by_id(df)
    assert list(rows) == ["45.master23.banette.gent.vsc", "46.master23.banette.gent.vsc",
                          "47.master23.banette.gent.vsc"]
    j = rows["45.master23.banette.gent.vsc"]  # the verbatim Torque 6 E line
    assert (j.state, j.exit_code, j.user, j.partition, j.job_name) == (st.COMPLETED, 0, "vsc40075", "short", "STDIN")
    assert (j.cpus, j.nodes, j.gpus) == (4, 2, 0)  # total_execution_slots, Resource_List.nodect
    assert j.node_list == "node2801.banette.gent.vsc,node2803.banette.gent.vsc"
    assert j.submit_time == ts("2017-04-05 11:05:00") and j.start_time == ts("2017-04-05 11:05:07")
    assert j.end_time == ts("2017-04-05 11:06:53")  # end=1491390413: the line's local 13:06:53 CEST
    assert (j.wait, j.elapsed, j.time_limit) == (td(7), td(106), td(3600))  # used walltime says 00:01:44
    assert (j.cpu_time, j.max_rss_bytes) == (td(0), 55048 * KiB)  # resources_used.cput=0 (plain seconds)
    assert pd.isna(j.req_mem_bytes) and pd.isna(j.account)  # only vmem requested
    deleted = rows["46.master23.banette.gent.vsc"]  # Q (queue= only) then D
    assert (deleted.state, deleted.state_raw, deleted.partition) == (st.CANCELLED, "D", "short")
    assert deleted.end_time == ts("2017-04-05 11:08:20")
    assert deleted.submit_time == ts("2017-04-05 11:05:20")  # no ctime anywhere: the Q record's 13:05:20 CEST
    assert pd.isna(deleted.user)
    over = rows["47.master23.banette.gent.vsc"]
    assert (over.state, over.exit_code, over.account) == (st.TIMEOUT, -11, "gvo00001")
    assert (over.cpus, over.nodes, over.gpus, over.req_mem_bytes) == (28, 1, 1, 16 * GiB)
    assert over.cpu_time == td(55 * 3600 + 10 * 60 + 7)
