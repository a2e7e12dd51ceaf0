"""read_sacct_parsable2 on the real testbed output and on rows built from documented real shapes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpcjobs import states as st
from hpcjobs.accounting.schema import COLUMNS
from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, read_sacct_parsable2, sacct_accounting_argv
from hpcjobs.errors import SchedulerOutputError

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
TESTBED_FIELDS = [
    "JobID", "JobIDRaw", "JobName", "Partition", "State", "ExitCode", "Submit", "Start", "End", "Elapsed",
    "AllocCPUS", "ReqMem", "MaxRSS", "TotalCPU", "AllocTRES", "ReqTRES", "Timelimit", "NodeList",
]
UTC = "UTC"
pytestmark = pytest.mark.usefixtures("sacct_reader")  # each test under the C scanner and the pyarrow path


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz=UTC)


def _check_schema(df: pd.DataFrame) -> None:
    assert list(df.columns) == list(COLUMNS)
    for name, dtype in COLUMNS.items():
        assert str(df[name].dtype) == str(dtype), name


@pytest.fixture(scope="module")
def steps(sacct_reader: str) -> pd.DataFrame:
    return read_sacct_parsable2(DATA / "testbed-22.05_sacct-steps-parsable2.txt", TESTBED_FIELDS)


def test_testbed_steps_rows_and_ids(steps: pd.DataFrame) -> None:
    _check_schema(steps)
    assert len(steps) == 45  # 15 jobs/tasks x (job + batch + extern)
    assert steps["step"].isna().sum() == 15
    row = steps[(steps.job_id == "3_9") & (steps.step == "batch")].iloc[0]
    assert (row.job_id_raw, row.array_job_id, row.array_task_id, row.job_name) == ("3", "3", 9, "batch")
    task0 = steps[(steps.job_id == "3_0") & steps.step.isna()].iloc[0]
    assert (task0.job_id_raw, task0.array_task_id) == ("8", 0)
    assert steps.loc[steps.job_id == "2", "array_job_id"].isna().all()
    assert (steps["scheduler"] == "slurm").all()


def test_testbed_states_exit_codes(steps: pd.DataFrame) -> None:
    job = steps[steps.step.isna()].set_index("job_id")
    assert job.loc["5", "state"] == st.FAILED and job.loc["5", "exit_code"] == 3
    assert job.loc["6", "state"] == st.TIMEOUT and job.loc["6", "exit_signal"] == 0
    assert job.loc["7", "state"] == st.CANCELLED and job.loc["7", "state_raw"] == "CANCELLED by 0"
    b6 = steps[(steps.job_id == "6") & (steps.step == "batch")].iloc[0]
    assert (b6.state, b6.exit_code, b6.exit_signal) == (st.CANCELLED, 0, 15)


def test_testbed_times_and_durations(steps: pd.DataFrame) -> None:
    j6 = steps[(steps.job_id == "6") & steps.step.isna()].iloc[0]
    assert j6.submit_time == ts("2026-12-02T15:53:39")
    assert j6.start_time == ts("2026-12-02T15:53:57")
    assert j6.end_time == ts("2026-12-02T15:55:04")
    assert j6.wait == pd.Timedelta(seconds=18)  # no Eligible field: start - submit
    assert j6.elapsed == pd.Timedelta(minutes=1, seconds=7)
    assert j6.time_limit == pd.Timedelta(minutes=1)
    assert j6.cpu_time == pd.Timedelta(milliseconds=4)
    j2 = steps[(steps.job_id == "2") & steps.step.isna()].iloc[0]
    assert pd.isna(j2.time_limit)  # UNLIMITED
    assert j2.cpu_time == pd.Timedelta(milliseconds=6)


def test_testbed_memory_and_tres(steps: pd.DataFrame) -> None:
    def get(job_id: str, step: str | None) -> pd.Series:
        sel = steps.job_id == job_id
        sel &= steps.step.isna() if step is None else steps.step == step
        return steps[sel].iloc[0]

    assert get("2", None).req_mem_bytes == 1024**3
    assert get("2", "batch").max_rss_bytes == 3372 * 1024
    assert get("2", "extern").max_rss_bytes == 1680 * 1024
    # job row has no MaxRSS: max over its steps (3372K batch vs 1680K extern)
    assert get("2", None).max_rss_bytes == 3372 * 1024
    # 5.batch MaxRSS blank -> stays NA; the job takes its extern step's 1424K
    assert pd.isna(get("5", "batch").max_rss_bytes)
    assert get("5", None).max_rss_bytes == 1424 * 1024
    assert get("3_9", None).max_rss_bytes == 3092 * 1024
    g = get("4", None)
    assert (g.gpus, g.cpus, g.nodes, g.partition) == (1, 1, 1, "gpu")
    assert pd.isna(g.gpu_type)
    assert get("2", None).gpus == 0  # a TRES without gres/gpu: no GPUs
    assert pd.isna(get("2", "batch").partition)


def test_testbed_allocations_file() -> None:
    df = read_sacct_parsable2((DATA / "testbed-22.05_sacct-X-parsable2.txt").read_text(), TESTBED_FIELDS)
    assert len(df) == 15 and df.step.isna().all()
    assert sorted(df.job_id)[:5] == ["2", "3_0", "3_1", "3_2", "3_3"]
    assert pd.isna(df.max_rss_bytes).all()  # -X rows carry no MaxRSS and no steps to take it from
    assert df.set_index("job_id").loc["3_9", "job_id_raw"] == "3"


def test_interim_row_read_as_unknown_memory() -> None:
    lines = (DATA / "testbed-22.05_sacct-interim-vs-final.txt").read_text().splitlines()
    fields = lines[0].split(",")
    interim = lines[1].split(": ", 1)[1]
    final = lines[2].split(":   ", 1)[1]
    df = read_sacct_parsable2(interim + "\n" + final + "\n", fields)
    assert list(df.job_name) == ["allocation", "myname"]
    assert pd.isna(df.req_mem_bytes[0])  # ReqMem "16?" and no ReqTRES
    assert df.req_mem_bytes[1] == 1024**3
    assert pd.isna(df.partition[0]) and df.partition[1] == "debug"
    assert pd.isna(df.time_limit[0]) and df.time_limit[1] == pd.Timedelta(minutes=5)
    assert (df.exit_code[1], df.state[1]) == (2, st.FAILED)
    assert list(df.account) == ["root", "root"]


# Rows in SACCT_ACCOUNTING_FIELDS order, built from shapes documented in the sacct man page and
# seen in real output (sacct(1) JOB STATE CODES and JobID forms): pending array range, het job, None/Unknown times,
# old per-CPU/per-node ReqMem, day durations, Partition_Limit, typed GPUs, OOM 0:125, hpcjobs tag.
def _row(**kw: str) -> str:
    unknown = set(kw) - {f.lower() for f in SACCT_ACCOUNTING_FIELDS}
    assert not unknown, unknown
    return "|".join(kw.get(f.lower(), "") for f in SACCT_ACCOUNTING_FIELDS)


TRES_A100 = "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1"
CONSTRUCTED = "\n".join([
    _row(jobid="100_[5-9%2]", jobidraw="100", jobname="sweep", user="alice", account="proj", partition="gpu",
         qos="normal", cluster="c1", state="PENDING", exitcode="0:0", submit="2026-12-01T10:00:00",
         eligible="2026-12-01T10:00:00", start="Unknown", end="Unknown", elapsedraw="0", timelimit="1-00:00:00",
         nnodes="1", alloccpus="0", reqcpus="8", reqtres=TRES_A100, reqmem="64G", nodelist="None assigned",
         comment="hpcjobs:lr.sweep:3:0123abcd"),
    _row(jobid="101_4", jobidraw="105", jobname="sweep", user="alice", account="proj", partition="gpu",
         qos="normal", cluster="c1", state="OUT_OF_MEMORY", exitcode="0:125", submit="2026-12-01T10:00:00",
         eligible="2026-12-01T10:00:05", start="2026-12-01T10:00:10", end="2026-12-01T12:00:10",
         elapsedraw="7200", timelimit="Partition_Limit", nnodes="1", alloccpus="8", reqcpus="8",
         alloctres=TRES_A100, reqtres="billing=8,cpu=8,gres/gpu=2,mem=64G,node=1", reqmem="64G",
         totalcpu="1-02:03:04", nodelist="gpu01", comment="hpcjobs:lr.sweep:3:0123abcd"),
    _row(jobid="101_4.batch", jobidraw="105.batch", jobname="batch", cluster="c1", state="OUT_OF_MEMORY",
         exitcode="0:125", submit="2026-12-01T10:00:10", start="2026-12-01T10:00:10", end="2026-12-01T12:00:10",
         elapsedraw="7200", nnodes="1", alloccpus="8", alloctres="cpu=8,mem=64G,node=1", maxrss="65536000K",
         totalcpu="23:08.358", nodelist="gpu01"),
    _row(jobid="102+0", jobidraw="102", jobname="het", user="bob", account="proj", partition="cpu", qos="normal",
         cluster="c1", state="CANCELLED by 1000", exitcode="0:0", submit="2026-12-01T11:00:00",
         eligible="2026-12-01T11:00:00", start="None", end="2026-12-01T11:30:00", elapsedraw="0",
         timelimit="3-00:00:00", nnodes="2", alloccpus="64", reqcpus="64", reqmem="3000Mc",
         nodelist="None assigned"),
    _row(jobid="102+1", jobidraw="103", jobname="het", user="bob", account="proj", partition="cpu", qos="normal",
         cluster="c1", state="CANCELLED by 1000", exitcode="0:0", submit="2026-12-01T11:00:00",
         eligible="2026-12-01T11:00:00", start="None", end="2026-12-01T11:30:00", elapsedraw="0",
         timelimit="UNLIMITED", nnodes="4", alloccpus="16", reqcpus="16", reqmem="48000Mn",
         nodelist="None assigned"),
    _row(jobid="102+1.0", jobidraw="103.0", jobname="hostname", cluster="c1", state="CANCELLED", exitcode="0:15",
         submit="2026-12-01T11:00:00", eligible="2026-12-01T11:00:00", start="None", end="2026-12-01T11:30:00",
         elapsedraw="0", nnodes="4", alloccpus="16", maxrss="891.26M", totalcpu="00:00.001"),
])


def test_constructed_shapes() -> None:
    df = read_sacct_parsable2(CONSTRUCTED + "\n", SACCT_ACCOUNTING_FIELDS)
    _check_schema(df)
    pend, oom, oom_batch, het0, het1, het1_0 = (df.iloc[i] for i in range(6))
    assert (pend.job_id, pend.array_job_id, pend.array_task_spec, pend.state) == (
        "100_[5-9%2]", "100", "5-9%2", st.PENDING)
    assert pd.isna(pend.array_task_id) and pd.isna(pend.start_time) and pd.isna(pend.end_time)
    assert pd.isna(pend.wait)
    assert (pend.gpus, pend.gpu_type, pend.cpus) == (2, "a100", 8)  # requested (nothing allocated yet)
    assert pend.time_limit == pd.Timedelta(days=1)
    assert (pend.sweep_id, pend.chunk, pend.user, pend.cluster) == ("lr.sweep", 3, "alice", "c1")
    assert (oom.job_id, oom.job_id_raw, oom.array_task_id) == ("101_4", "105", 4)
    assert (oom.state, oom.exit_code, oom.exit_signal) == (st.OUT_OF_MEMORY, 0, 125)
    assert oom.wait == pd.Timedelta(seconds=5)  # start - eligible
    assert oom.elapsed == pd.Timedelta(hours=2)
    assert pd.isna(oom.time_limit)  # Partition_Limit
    assert oom.cpu_time == pd.Timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert oom.max_rss_bytes == 65536000 * 1024  # from its batch step
    assert oom_batch.cpu_time == pd.Timedelta(minutes=23, seconds=8, milliseconds=358)
    assert (het0.job_id, het0.het_offset, het0.state, het0.state_raw) == (
        "102+0", 0, st.CANCELLED, "CANCELLED by 1000")
    assert pd.isna(het0.start_time) and het0.end_time == ts("2026-12-01T11:30:00")
    assert het0.req_mem_bytes == 3000 * 1024**2 * 64  # per CPU x 64 CPUs
    assert het1.req_mem_bytes == 48000 * 1024**2 * 4  # per node x 4 nodes
    assert het0.time_limit == pd.Timedelta(days=3)
    assert (het1_0.job_id, het1_0.step, het1_0.het_offset, het1_0.exit_signal) == ("102+1", "0", 1, 15)
    assert het1_0.max_rss_bytes == round(891.26 * 1024**2)
    assert het1.max_rss_bytes == het1_0.max_rss_bytes


def test_epoch_times_header_and_errors() -> None:
    text = "JobID|State|Submit|Start|End\n7|COMPLETED|1796226819|1796226820|Unknown\n"
    df = read_sacct_parsable2(text, ["JobID", "State", "Submit", "Start", "End"])
    assert len(df) == 1
    assert df.submit_time[0] == ts("2026-12-02T15:53:39") and pd.isna(df.end_time[0])
    assert df.wait[0] == pd.Timedelta(seconds=1)
    assert len(read_sacct_parsable2("", SACCT_ACCOUNTING_FIELDS)) == 0
    with pytest.raises(SchedulerOutputError):
        read_sacct_parsable2("1|2|3\n", ["JobID", "State"])
    with pytest.raises(SchedulerOutputError):
        read_sacct_parsable2("abc|COMPLETED\n", ["JobID", "State"])


def test_local_time_zone() -> None:
    df = read_sacct_parsable2("7|2026-07-01T12:00:00\n", ["JobID", "Submit"], tz="Europe/Paris")
    assert df.submit_time[0] == ts("2026-07-01T10:00:00")


def test_accounting_argv() -> None:
    from datetime import datetime, timezone

    argv = sacct_accounting_argv(all_users=True, accounts=["a", "b"], start=datetime(2026, 12, 1),
                                 end=datetime(2026, 12, 2, 1, tzinfo=timezone.utc), states=["CD", "F"])
    assert argv[:3] == ["sacct", "--noheader", "--parsable2"]
    assert argv[3] == "--format=" + ",".join(SACCT_ACCOUNTING_FIELDS)
    assert argv[4:] == ["--allusers", "--accounts=a,b", "--state=CD,F", "--starttime=2026-12-01T00:00:00",
                        "--endtime=2026-12-02T01:00:00"]
    argv = sacct_accounting_argv(users=["alice"], job_ids=["3", "5_1"], steps=False, duplicates=True)
    assert argv[4:] == ["--user=alice", "--jobs=3,5_1", "--allocations", "--duplicates"]


def test_unordered_rows_and_large_input_paths() -> None:
    """Steps out of order use the hash group-by; 60k rows take the threaded path; results agree."""
    lines = (DATA / "testbed-22.05_sacct-steps-parsable2.txt").read_text().splitlines()
    ordered = read_sacct_parsable2("\n".join(lines) + "\n", TESTBED_FIELDS)
    shuffled = read_sacct_parsable2("\n".join(lines[::-1]) + "\n", TESTBED_FIELDS)
    key = ["job_id", "step"]

    def by_key(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(step=df.step.fillna("")).sort_values(key).reset_index(drop=True)

    pd.testing.assert_frame_equal(by_key(ordered), by_key(shuffled))
    big = read_sacct_parsable2("\n".join(lines * 1400) + "\n", TESTBED_FIELDS)  # 63,000 rows
    assert len(big) == 63_000
    pd.testing.assert_frame_equal(by_key(big.iloc[:45].reset_index(drop=True)), by_key(ordered))


def test_duration_spellings_at_buffer_edges() -> None:
    text = "1|00:00:03\n2|1-00:00:00\n3|00:00.001\n4|12-01:02:03\n5|INVALID\n6|05:00\n7|\n8|00:00:04\n"
    df = read_sacct_parsable2(text, ["JobID", "TotalCPU"])
    assert list(df.cpu_time[:4]) == [pd.Timedelta(seconds=3), pd.Timedelta(days=1), pd.Timedelta(milliseconds=1),
                                     pd.Timedelta(days=12, hours=1, minutes=2, seconds=3)]
    assert pd.isna(df.cpu_time[4]) and df.cpu_time[5] == pd.Timedelta(minutes=5) and pd.isna(df.cpu_time[6])
    assert df.cpu_time[7] == pd.Timedelta(seconds=4)
