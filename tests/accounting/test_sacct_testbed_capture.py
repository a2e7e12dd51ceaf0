"""Parsers on the outputs captured from the real Slurm 22.05 testbed (tests/data/slurm/testbed/).

Job ids there (JOBIDS.txt): completed=4 exit3=5 timeout=6 cancel_running=7 cancel_pending=8 memhog=9
gpu=10 array=11 (0-11%3) comment=12. Values below were read off the text files by hand.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpcjobs import states as st
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from hpcjobs.schedulers.slurm import formats as fs

TESTBED = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed"
pytestmark = [pytest.mark.skipif(not (TESTBED / "sacct.txt").exists(), reason="testbed captures not present"),
              pytest.mark.usefixtures("sacct_reader")]  # each test under the C scanner and the pyarrow path
FIELDS = [
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State", "ExitCode", "DerivedExitCode",
    "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "NNodes", "NCPUS",
    "AllocCPUS", "ReqCPUS", "ReqMem", "MaxRSS", "AveRSS", "TotalCPU", "CPUTime", "AllocTRES", "ReqTRES", "NodeList",
    "Comment", "Reason", "WorkDir",
]


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def _row(df: pd.DataFrame, job_id: str, step: str | None = None) -> pd.Series:
    sel = (df.job_id == job_id) & (df.step.isna() if step is None else df.step == step)
    assert sel.sum() == 1, (job_id, step)
    return df[sel].iloc[0]


@pytest.fixture(scope="module")
def steps(sacct_reader: str) -> pd.DataFrame:
    return read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)


def test_header_file_gives_its_own_fields() -> None:
    df = read_sacct_parsable2(TESTBED / "sacct_header_X.txt", None)
    assert df.step.isna().all()
    same = read_sacct_parsable2(TESTBED / "sacct_X.txt", FIELDS)
    pd.testing.assert_frame_equal(df, same)


def test_final_states_and_exit_codes(steps: pd.DataFrame) -> None:
    assert (_row(steps, "5").state, _row(steps, "5").exit_code) == (st.FAILED, 3)
    assert (_row(steps, "6").state, _row(steps, "6").elapsed) == (st.TIMEOUT, pd.Timedelta(seconds=85))
    assert _row(steps, "6").time_limit == pd.Timedelta(minutes=1)  # TimelimitRaw 1 (minutes)
    assert (_row(steps, "7").state, _row(steps, "7").state_raw) == (st.CANCELLED, "CANCELLED by 0")
    mem = _row(steps, "9")  # over its --mem=100M: this Slurm kills it, FAILED 0:9, not OUT_OF_MEMORY
    assert (mem.state, mem.exit_code, mem.exit_signal) == (st.FAILED, 0, 9)
    assert _row(steps, "9", "batch").state_raw == "CANCELLED by 0"
    assert mem.max_rss_bytes == 289192 * 1024 and mem.req_mem_bytes == 100 * 1024**2
    gpu = _row(steps, "10")
    assert (gpu.partition, gpu.gpus, gpu.cpus) == ("gpu", 1, 1)
    assert gpu.max_rss_bytes == 3244 * 1024  # 10.batch 3244K > 10.extern 1560K


def test_cancelled_while_pending(steps: pd.DataFrame) -> None:
    j8 = _row(steps, "8")  # held, then cancelled: Eligible Unknown; 22.05 still stamps Start = End
    assert (j8.state, j8.node_list) == (st.CANCELLED, "None assigned")
    assert pd.isna(j8.eligible_time)
    assert j8.start_time == j8.end_time == ts("2026-12-02T18:28:40")
    assert j8.elapsed == pd.Timedelta(0)
    assert j8.wait == pd.Timedelta(seconds=2)  # start - submit (no eligible time)
    assert pd.isna(j8.cpus) is False and j8.cpus == 1  # AllocCPUS 1 here


def test_array_tasks_and_comment(steps: pd.DataFrame) -> None:
    tasks = steps[(steps.array_job_id == "11") & steps.step.isna()]
    assert sorted(tasks.array_task_id.tolist()) == list(range(12))
    t0 = _row(steps, "11_0")
    assert (t0.job_id_raw, t0.elapsed, t0.cpu_time) == ("13", pd.Timedelta(seconds=4), t0.cpu_time)
    c = _row(steps, "12")
    assert c.comment == "hpcjobs:capture:0:3f2a9c"
    assert pd.isna(c.sweep_id)  # token "3f2a9c" is 6 hex digits; hpcjobs tags carry 8-32


def test_array_midway_pending_range() -> None:
    df = read_sacct_parsable2(TESTBED / "sacct_array_midway_X.txt", FIELDS)
    pend = df[df.job_id == "11_[5-11%3]"].iloc[0]
    assert (pend.job_id_raw, pend.array_job_id, pend.array_task_spec, pend.state) == (
        "11", "11", "5-11%3", st.PENDING)
    assert pd.isna(pend.array_task_id) and pd.isna(pend.start_time)
    assert (pend.cpus, pend.req_mem_bytes) == (1, 256 * 1024**2)  # AllocCPUS 1; ReqMem 256M


def test_interim_rows_while_running() -> None:
    df = read_sacct_parsable2(TESTBED / "sacct_running_X.txt", FIELDS)
    j4 = _row(df, "4")  # read right after submission: sacct still says PENDING, name 'allocation'
    assert (j4.state, j4.job_name, j4.qos) == (st.PENDING, "allocation", "Unknown")
    assert pd.isna(j4.req_mem_bytes) and pd.isna(j4.end_time)  # ReqMem "16?", End Unknown
    assert pd.isna(j4.cpus)  # AllocCPUS 0 and no TRES yet


def test_status_parse_on_captured_rows() -> None:
    idx = {f: i for i, f in enumerate(FIELDS)}
    cut = []
    for line in (TESTBED / "sacct.txt").read_text().splitlines():
        f = line.split("|")
        cut.append("|".join(f[idx[k]] for k in fs.SACCT_STATUS_FIELDS))
    recs = {r.job_id: r for r in fs.parse_sacct_status("\n".join(cut))}
    assert (recs["8"].state, recs["8"].reason) == (st.CANCELLED, "JobHeldUser")
    # Reason "None" and a failed job: the batch step's line says why
    assert (recs["9"].state, recs["9"].exit_signal, recs["9"].reason) == (st.FAILED, 9, "batch CANCELLED by 0 0:9")
    assert (recs["6"].state, recs["6"].reason) == (st.TIMEOUT, "batch CANCELLED 0:15")
    assert (recs["4"].state, recs["4"].reason) == (st.COMPLETED, None)  # sacct's Reason "None" → None
    assert recs["11_11"].array_task_id == 11 and recs["12"].comment == "hpcjobs:capture:0:3f2a9c"


def test_squeue_status_on_captured_rows() -> None:
    for name, expect_spec in (("squeue_running.txt", True), ("squeue_running_array_expanded.txt", False)):
        lines = (TESTBED / name).read_text().splitlines()[1:]  # captured with a header
        # captured format: %i|%A|%F|%K|%j|%u|%a|%P|%T|%r|...|%k; re-cut to SQUEUE_STATUS_FORMAT's order
        cut = ["|".join([f[0], f[1], f[2], f[3], f[8], f[9], f[4], f[-1]]) for f in (ln.split("|") for ln in lines)]
        recs = {r.job_id: r for r in fs.parse_squeue_status("\n".join(cut))}
        assert (recs["8"].state, recs["8"].reason, recs["8"].comment) == (st.HELD, "JobHeldUser", None)
        assert recs["12"].comment == "hpcjobs:capture:0:3f2a9c"
        assert recs["4"].state == st.RUNNING
        if expect_spec:
            r = recs["11_[2-11%3]"]
            assert (r.array_job_id, r.array_task_id, r.array_task_spec) == ("11", None, "2-11%3")
        else:
            r = recs["11_5"]
            assert (r.array_job_id, r.array_task_id, r.state, r.reason) == ("11", 5, st.PENDING, "Resources")


def test_scontrol_show_config_capture() -> None:
    cfg = fs.parse_scontrol_show_config((TESTBED / "scontrol_show_config.txt").read_text())
    assert cfg["ClusterName"] == "hpctest"
    limits = fs.cluster_limits_from_config(cfg)
    assert (limits.max_array_size, limits.max_job_count, limits.min_job_age_s) == (101, 10000, 60)


def test_sbatch_parsable_capture() -> None:
    assert fs.parse_submit_output((TESTBED / "sbatch_parsable.txt").read_text()) == ("2", None)
    assert fs.parse_submit_output((TESTBED / "sbatch_parsable_cluster.txt").read_text()) == ("3", "hpctest")


def test_json_capture_agrees_with_text(steps: pd.DataFrame) -> None:
    from hpcjobs.accounting.sources.slurm import read_sacct_json

    js = read_sacct_json(TESTBED / "sacct.json")
    jobs_text = steps[steps.step.isna()].set_index("job_id")
    jobs_json = js[js.step.isna()].set_index("job_id")
    assert sorted(jobs_json.index) == sorted(jobs_text.index)
    for col in ("state", "job_id_raw", "array_task_id", "submit_time", "start_time", "end_time", "elapsed",
                "time_limit", "cpus", "gpus", "req_mem_bytes", "max_rss_bytes", "comment"):
        left, right = jobs_text[col].sort_index(), jobs_json[col].sort_index()
        pd.testing.assert_series_equal(left, right, check_names=False, check_dtype=False), col
