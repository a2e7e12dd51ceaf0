"""Hand-checked tests of the pandas-free Slurm parsers (hpcjobs.schedulers.slurm.formats)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.slurm import formats as fs

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def test_module_does_not_import_pandas() -> None:
    code = "import sys, hpcjobs.schedulers.slurm.formats; sys.exit('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("COMPLETED", st.COMPLETED), ("CD", st.COMPLETED), ("completed", st.COMPLETED),
        ("PENDING", st.PENDING), ("PD", st.PENDING), ("RUNNING", st.RUNNING), ("R", st.RUNNING),
        ("CANCELLED by 0", st.CANCELLED), ("CANCELLED by 123", st.CANCELLED), ("CA", st.CANCELLED),
        ("CANCELLED+", st.CANCELLED), ("OUT_OF_ME+", st.OUT_OF_MEMORY), ("OUT_OF_MEMORY", st.OUT_OF_MEMORY),
        ("OOM", st.OUT_OF_MEMORY), ("FAILED", st.FAILED), ("F", st.FAILED), ("TIMEOUT", st.TIMEOUT),
        ("TO", st.TIMEOUT), ("NODE_FAIL", st.NODE_FAIL), ("NF", st.NODE_FAIL), ("PREEMPTED", st.PREEMPTED),
        ("PR", st.PREEMPTED), ("BOOT_FAIL", st.BOOT_FAIL), ("BF", st.BOOT_FAIL), ("DEADLINE", st.DEADLINE),
        ("DL", st.DEADLINE), ("REQUEUED", st.REQUEUED), ("RQ", st.REQUEUED), ("SUSPENDED", st.SUSPENDED),
        ("S", st.SUSPENDED), ("COMPLETING", st.COMPLETING), ("CG", st.COMPLETING),
        ("CONFIGURING", st.RUNNING), ("CF", st.RUNNING), ("REQUEUE_HOLD", st.HELD), ("SPECIAL_EXIT", st.HELD),
        ("REQUEUE_FED", st.REQUEUED), ("STOPPED", st.SUSPENDED), ("SIGNALING", st.RUNNING),
        ("STAGE_OUT", st.COMPLETING), ("RESV_DEL_HOLD", st.HELD), ("RESIZING", st.RUNNING),
        ("REVOKED", st.CANCELLED), ("  TIMEOUT ", st.TIMEOUT),
        ("", st.UNKNOWN), (None, st.UNKNOWN), ("WEIRD_NEW_STATE", st.UNKNOWN), ("C+", st.UNKNOWN),
        ("X+", st.UNKNOWN), ("COMPL+", st.UNKNOWN),  # COMPLETED or COMPLETING: ambiguous
    ],
)
def test_normalize_state(raw: str | None, expected: str) -> None:
    assert fs.normalize_state(raw) == expected


def test_pending_held_by_reason() -> None:
    assert fs.normalize_state("PENDING", "JobHeldUser") == st.HELD
    assert fs.normalize_state("PD", "JobHeldAdmin") == st.HELD
    assert fs.normalize_state("PENDING", "Resources") == st.PENDING


@pytest.mark.parametrize(
    ("text", "job_id", "base", "task", "spec", "het", "step"),
    [
        ("123", "123", "123", None, None, None, None),
        ("123_4", "123_4", "123", 4, None, None, None),
        ("123_[5-9%2]", "123_[5-9%2]", "123", None, "5-9%2", None, None),
        ("123_[9-11,13]", "123_[9-11,13]", "123", None, "9-11,13", None, None),
        ("123+0", "123+0", "123", None, None, 0, None),
        ("123+1.0", "123+1", "123", None, None, 1, "0"),
        ("123+0.batch", "123+0", "123", None, None, 0, "batch"),
        ("123.batch", "123", "123", None, None, None, "batch"),
        ("123.extern", "123", "123", None, None, None, "extern"),
        ("123.interactive", "123", "123", None, None, None, "interactive"),
        ("123.0", "123", "123", None, None, None, "0"),
        ("3_9.batch", "3_9", "3", 9, None, None, "batch"),
        ("3_9.ba+", "3_9", "3", 9, None, None, "ba+"),
    ],
)
def test_parse_job_id(text, job_id, base, task, spec, het, step) -> None:
    jid = fs.parse_job_id(text)
    assert (jid.job_id, jid.base_id, jid.array_task_id, jid.array_task_spec, jid.het_offset, jid.step) == (
        job_id, base, task, spec, het, step)
    assert jid.is_step == (step is not None)
    assert jid.is_array == (task is not None or spec is not None)


@pytest.mark.parametrize("bad", ["", "abc", "12a", "123_", "123_[", "123..batch", "JobID"])
def test_parse_job_id_rejects(bad: str) -> None:
    with pytest.raises(SchedulerOutputError):
        fs.parse_job_id(bad)


def test_parse_submit_output() -> None:
    assert fs.parse_submit_output("123\n") == ("123", None)
    assert fs.parse_submit_output("123;cluster\n") == ("123", "cluster")
    assert fs.parse_submit_output("sbatch: warning: x\n42;testcluster\n") == ("42", "testcluster")
    for bad in ("", "\n", "Submitted batch job 12\n"):
        with pytest.raises(SchedulerOutputError):
            fs.parse_submit_output(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0:0", (0, 0)), ("3:0", (3, 0)), ("0:15", (0, 15)), ("0:9", (0, 9)), ("0:125", (0, 125)),
     ("2:0", (2, 0)), ("", (None, None)), (None, (None, None)), ("x:y", (None, None)), ("7", (7, 0))],
)
def test_parse_exit_code(text, expected) -> None:
    assert fs.parse_exit_code(text) == expected
    assert fs.OOM_SIGNAL == 125


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("00:00:02", 2), ("00:01:07", 67), ("22:32:22", 22 * 3600 + 32 * 60 + 22),
     ("1-06:46:42", 86400 + 6 * 3600 + 46 * 60 + 42), ("3-00:00:00", 3 * 86400),
     ("164-03:37:36", 164 * 86400 + 3 * 3600 + 37 * 60 + 36), ("00:00.006", 0.006),
     ("23:08.358", 23 * 60 + 8.358), ("00:01:00", 60), ("2-12", 2 * 86400 + 12 * 3600), ("05:00", 300),
     ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("", None), (None, None)],
)
def test_parse_duration(text, seconds) -> None:
    got = fs.parse_duration(text)
    if seconds is None:
        assert got is None
    else:
        assert got == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "nbytes", "per"),
    [("1294440K", 1294440 * 1024, None), ("3372K", 3372 * 1024, None), ("16G", 16 * 1024**3, None),
     ("1G", 1024**3, None), ("0", 0, None), ("3000Mc", 3000 * 1024**2, "cpu"),
     ("48000Mn", 48000 * 1024**2, "node"), ("199G", 199 * 1024**3, None), ("32000M", 32000 * 1024**2, None),
     ("891.26M", round(891.26 * 1024**2), None), ("2T", 2 * 1024**4, None), ("16?", None, None),
     ("", None, None), (None, None, None)],
)
def test_parse_memory(text, nbytes, per) -> None:
    assert fs.parse_memory(text) == fs.Memory(nbytes, per)


def test_tres() -> None:
    text = "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1"
    assert fs.parse_tres(text) == {"billing": "8", "cpu": "8", "gres/gpu:a100": "2", "gres/gpu": "2",
                                   "mem": "64G", "node": "1"}
    s = fs.summarize_tres(text)
    assert s == fs.TresSummary(cpus=8, mem_bytes=64 * 1024**3, nodes=1, gpus=2, gpu_type="a100", billing=8)
    # testbed GPU job: untyped gres
    s = fs.summarize_tres("billing=1,cpu=1,gres/gpu=1,mem=1G,node=1")
    assert (s.gpus, s.gpu_type, s.mem_bytes) == (1, None, 1024**3)
    # typed only, two models; usage TRES gres/gpumem and gpuutil are not GPUs
    s = fs.summarize_tres("cpu=4,gres/gpu:v100=1,gres/gpu:a100=2,gres/gpumem=20500736K,gres/gpuutil=90")
    assert (s.gpus, s.gpu_type, s.mem_bytes, s.nodes) == (3, "a100,v100", None, None)
    assert fs.summarize_tres("") == fs.TresSummary()
    assert fs.parse_tres(None) == {}


def test_sacct_status_argv() -> None:
    argv = fs.sacct_status_argv(["2", "3", "3_4", "7"])
    assert argv == ["sacct", "--noheader", "--parsable2",
                    "--format=JobID,JobIDRaw,State,ExitCode,Reason,JobName,Comment", "--jobs=2,3,3_4,7"]
    with pytest.raises(ValueError):
        fs.sacct_status_argv([])
    with pytest.raises(SchedulerOutputError):
        fs.sacct_status_argv(["2;rm -rf"])


def _status_text_from_fixture() -> str:
    """The steps fixture re-cut to SACCT_STATUS_FIELDS (JobID, JobIDRaw, State, ExitCode + blanks)."""
    out = []
    for line in (DATA / "testbed-22.05_sacct-steps-parsable2.txt").read_text().splitlines():
        f = line.split("|")
        out.append("|".join([f[0], f[1], f[4], f[5], "None", f[2], ""]))
    return "\n".join(out) + "\n"


def test_parse_sacct_status_on_testbed_rows() -> None:
    recs = {r.job_id: r for r in fs.parse_sacct_status(_status_text_from_fixture())}
    # 5 plain jobs + 10 array tasks; steps dropped
    assert sorted(recs) == sorted(["2", "4", "5", "6", "7"] + [f"3_{i}" for i in range(10)])
    assert (recs["2"].state, recs["2"].exit_code, recs["2"].exit_signal) == (st.COMPLETED, 0, 0)
    assert (recs["5"].state, recs["5"].exit_code, recs["5"].name) == (st.FAILED, 3, "failer")
    assert recs["5"].reason == "batch FAILED 3:0"
    assert (recs["6"].state, recs["6"].exit_code, recs["6"].exit_signal) == (st.TIMEOUT, 0, 0)
    assert recs["6"].reason == "batch CANCELLED 0:15"  # the step tells why
    assert (recs["7"].state, recs["7"].state_raw) == (st.CANCELLED, "CANCELLED by 0")
    t = recs["3_9"]
    assert (t.array_job_id, t.array_task_id, t.array_task_spec, t.state) == ("3", 9, None, st.COMPLETED)
    assert recs["2"].array_job_id is None and recs["2"].reason is None and recs["2"].comment is None


def test_parse_sacct_status_pending_range_comment_and_duplicates() -> None:
    text = (
        "20_[5-9%2]|20|PENDING|0:0|JobArrayTaskLimit|sweep|hpcjobs:s1:0:0123abcd\n"
        "21|21|PENDING|0:0|JobHeldUser|held|\n"
        "22|22|REQUEUED|0:0|None|rq|\n"
        "22|22|RUNNING|0:0|None|rq|\n"
        "23|23|OUT_OF_MEMORY|0:125|None|big|a|b\n"
        "23.batch|23.batch|OUT_OF_MEMORY|0:125|||\n"
    )
    recs = {r.job_id: r for r in fs.parse_sacct_status(text)}
    r = recs["20_[5-9%2]"]
    assert (r.state, r.array_job_id, r.array_task_id, r.array_task_spec) == (st.PENDING, "20", None, "5-9%2")
    assert (r.reason, r.comment) == ("JobArrayTaskLimit", "hpcjobs:s1:0:0123abcd")
    assert recs["21"].state == st.HELD
    assert recs["22"].state == st.RUNNING  # the last record of a repeated id wins
    assert (recs["23"].state, recs["23"].exit_signal, recs["23"].comment) == (st.OUT_OF_MEMORY, 125, "a|b")
    assert recs["23"].reason == "batch OUT_OF_MEMORY 0:125"
    assert fs.parse_sacct_status("") == []


def test_squeue_status() -> None:
    argv = fs.squeue_status_argv(["5", "3"])
    assert argv == ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%A|%F|%K|%T|%r|%j|%k",
                    "--jobs=5,3"]
    text = (
        "3_9|3|3|9|RUNNING|None|arr|\n"
        "3_[10-12%2]|18|3|N/A|PENDING|JobArrayTaskLimit|arr|hpcjobs:s:1:deadbeef\n"
        "5|5|5|N/A|PENDING|JobHeldUser|failer|\n"
        "6|6|6|N/A|COMPLETED|None|plain|\n"
    )
    recs = {r.job_id: r for r in fs.parse_squeue_status(text)}
    assert (recs["3_9"].state, recs["3_9"].array_job_id, recs["3_9"].array_task_id) == (st.RUNNING, "3", 9)
    r = recs["3_[10-12%2]"]
    assert (r.array_task_id, r.array_task_spec, r.reason, r.comment) == (
        None, "10-12%2", "JobArrayTaskLimit", "hpcjobs:s:1:deadbeef")
    assert (recs["5"].state, recs["5"].array_job_id) == (st.HELD, None)
    assert recs["6"].state == st.COMPLETED and recs["6"].exit_code is None


# Excerpt in the shape of real `scontrol show config` output (header, padded keys,
# `SlurmctldHost[0]`, `(null)`, the trailing status line); values typed for this test.
SHOW_CONFIG = """Configuration data as of 2026-12-02T15:50:00
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = testcluster
MaxArraySize            = 101
MaxJobCount             = 10000
MaxJobId                = 67043328
MinJobAge               = 300 sec
PriorityFlags           = <SP>
SlurmctldHost[0]        = vm(127.0.0.1)
SchedulerParameters     = batch_sched_delay=0

Cgroup Support Configuration:
AllowedRAMSpace         = 100.0%

Slurmctld(primary) at vm is UP
""".replace("<SP>", "")  # real output has a trailing blank here


def test_scontrol_show_config_and_limits() -> None:
    cfg = fs.parse_scontrol_show_config(SHOW_CONFIG)
    assert cfg["ClusterName"] == "testcluster"
    assert cfg["SlurmctldHost[0]"] == "vm(127.0.0.1)"
    assert cfg["SchedulerParameters"] == "batch_sched_delay=0"
    assert cfg["PriorityFlags"] == ""
    assert cfg["AllowedRAMSpace"] == "100.0%"
    assert not any(k.startswith(("Configuration", "Slurmctld(")) for k in cfg)
    limits = fs.cluster_limits_from_config(cfg)
    assert (limits.max_array_size, limits.max_job_count, limits.min_job_age_s) == (101, 10000, 300)
    assert fs.cluster_limits_from_config({}).max_array_size is None
