"""The Slurm testbed keeps the shape it promises (see tests/slurm/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm

COMMENT = "hpcjobs:testbed-smoke:0:c0ffee"


@pytest.fixture(scope="module")
def finished_jobs(slurm_testbed, tmp_path_factory):
    """Submit the module's jobs side by side and wait once for all of them: ``{name: (job, row)}``."""
    workdir = tmp_path_factory.mktemp("testbed-jobs")
    workdir.chmod(0o777)
    wanted = {
        "gres": ("--partition=gpu", "--gres=gpu:1", "--time=1"),
        "gpus_per_node": ("--partition=gpu", "--gpus-per-node=1", "--time=1"),
        "comment": (f"--comment={COMMENT}", "--time=1"),
        "other_account": ("--account=other", "--time=1"),
    }
    jobs = {
        name: slurm_testbed.submit(*args, wrap="echo CVD=$CUDA_VISIBLE_DEVICES", workdir=os.fspath(workdir))
        for name, args in wanted.items()
    }
    rows = slurm_testbed.wait_terminal(*(job.job_id for job in jobs.values()))
    return {name: (job, rows[job.job_id]) for name, job in jobs.items()}


def test_two_partitions_debug_is_default(slurm_testbed):
    out = run_command(["sinfo", "--noheader", "--format=%P|%a|%l"]).stdout.split()
    assert sorted(out) == ["debug*|up|1:00:00", "gpu|up|1:00:00"]


def test_cluster_limits_from_scontrol_show_config(slurm_testbed):
    config = slurm_testbed.config()
    assert config["ClusterName"] == "hpctest"
    assert config["MaxArraySize"] == "101"
    assert config["DefMemPerCPU"] == "256"
    assert config["MinJobAge"] == "60 sec"
    assert config["AccountingStorageEnforce"] == "associations,limits,qos"
    assert "job_comment" in config["AccountingStoreFlags"]


@pytest.mark.parametrize("name", ["gres", "gpus_per_node"])
def test_gpu_job_sees_cuda_visible_devices(finished_jobs, name):
    job, row = finished_jobs[name]
    assert row["State"] == "COMPLETED"
    assert row["Partition"] == "gpu"
    assert "gres/gpu=1" in row["AllocTRES"].split(",")
    # one of the two fake GPUs, whichever was free
    assert Path(job.output).read_text().strip() in {"CVD=0", "CVD=1"}


def test_cpu_job_sees_no_gpu(finished_jobs):
    job, row = finished_jobs["comment"]
    assert Path(job.output).read_text().strip() == "CVD="
    assert "gres/gpu" not in row["AllocTRES"]


def test_job_comment_is_stored_in_sacct(finished_jobs):
    _, row = finished_jobs["comment"]
    assert row["State"] == "COMPLETED"
    assert row["Comment"] == COMMENT
    assert row["Account"] == "hpcjobs"
    assert row["Partition"] == "debug"


def test_second_account_is_usable(finished_jobs):
    _, row = finished_jobs["other_account"]
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
