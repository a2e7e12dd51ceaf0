"""The Slurm testbed keeps the shape it promises (see tests/slurm/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm


def test_two_partitions_debug_is_default(slurm_testbed):
    out = run_command(["sinfo", "--noheader", "--format=%P|%a|%l"]).stdout.split()
    assert sorted(out) == ["debug*|up|1:00:00", "gpu|up|1:00:00"]


def test_cluster_limits_from_scontrol_show_config(slurm_testbed):
    config = slurm_testbed.config()
    assert config["ClusterName"] == "hpctest"
    assert config["MaxArraySize"] == "101"
    assert config["DefMemPerCPU"] == "256"
    assert config["MinJobAge"] == "60 sec"
    assert config["AccountingStorageEnforce"] == "associations"
    assert "job_comment" in config["AccountingStoreFlags"]


@pytest.mark.parametrize("gpu_option", ["--gres=gpu:1", "--gpus-per-node=1"])
def test_gpu_job_sees_cuda_visible_devices(slurm_testbed, slurm_workdir, gpu_option):
    job = slurm_testbed.submit(
        "--partition=gpu",
        gpu_option,
        "--time=1",
        wrap="echo CVD=$CUDA_VISIBLE_DEVICES",
        workdir=slurm_workdir,
    )
    row = slurm_testbed.wait_terminal(job.job_id)[job.job_id]
    assert row["State"] == "COMPLETED"
    assert row["Partition"] == "gpu"
    assert "gres/gpu=1" in row["AllocTRES"].split(",")
    # one of the two fake GPUs, whichever was free
    assert Path(job.output).read_text().strip() in {"CVD=0", "CVD=1"}


def test_job_comment_is_stored_in_sacct(slurm_testbed, slurm_workdir):
    comment = "hpcjobs:testbed-smoke:0:c0ffee"
    job = slurm_testbed.submit(f"--comment={comment}", "--time=1", wrap="true", workdir=slurm_workdir)
    row = slurm_testbed.wait_terminal(job.job_id)[job.job_id]
    assert row["State"] == "COMPLETED"
    assert row["Comment"] == comment
    assert row["Account"] == "hpcjobs"
    assert row["Partition"] == "debug"


def test_second_account_is_usable(slurm_testbed, slurm_workdir):
    job = slurm_testbed.submit("--account=other", "--time=1", wrap="true", workdir=slurm_workdir)
    row = slurm_testbed.wait_terminal(job.job_id)[job.job_id]
    assert (row["State"], row["Account"]) == ("COMPLETED", "other")


def test_bad_account_is_rejected(slurm_testbed, slurm_workdir):
    result = run_command(
        ["sbatch", "--parsable", "--account=nosuch", "--time=1", f"--chdir={slurm_workdir}", "--wrap=true"],
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Invalid account or account/partition combination specified" in result.stderr


def test_array_index_over_max_array_size_is_rejected(slurm_testbed):
    result = run_command(["sbatch", "--parsable", "--array=0-101", "--time=1", "--wrap=true"], check=False)
    assert result.returncode == 1
    assert "Invalid job array specification" in result.stderr
