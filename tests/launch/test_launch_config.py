"""The ``launch:`` section and the site's ``distributed:``/``preemption:`` sections: validation and rendering."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hpcjobs.config.experiment import Experiment
from hpcjobs.errors import ConfigError
from hpcjobs.resolve import resolve
from launch.shellrun import render, site


def _exp(**kw) -> Experiment:
    return Experiment.model_validate({"name": "j", **kw})


@pytest.mark.parametrize(("spec", "message"), [
    ({"launch": {"launcher": "torchrun"}}, "launcher 'torchrun' needs launch.program"),
    ({"command": "x", "launch": {"launcher": "torchrun", "program": "t.py"}}, "give neither 'command' nor 'script'"),
    ({"command": "x", "launch": {"program": "t.py"}}, "need a launcher"),
    ({"launch": {"launcher": "tf", "program": "p", "deepspeed_config": "c.json"}}, "only for launcher 'deepspeed'"),
    ({"command": "x", "launch": {"launcher": "jax"}}, "Input should be"),
    ({"command": "x", "launch": {"rdzv_port_base": 80}}, "greater than or equal to 1024"),
])
def test_invalid_launch_sections(spec, message):
    with pytest.raises(ValidationError, match=message):
        _exp(**spec)


def test_no_launch_section_renders_as_before():
    text = render("slurm", {"gpu_sampler": False})  # a section that changes nothing
    assert "hpcjobs launch helpers" not in text and text.rstrip().endswith("true")


def test_srun_launcher_needs_slurm():
    with pytest.raises(ConfigError, match="launcher 'srun' needs Slurm"):
        resolve(_exp(launch={"launcher": "srun", "program": "a"}), site("pbspro"))


def test_preemptible_pbs_job_needs_a_walltime_longer_than_the_lead():
    with pytest.raises(ConfigError, match=r"needs resources\.walltime"):
        resolve(_exp(command="x", launch={"preemptible": True}), site("torque"))
    with pytest.raises(ConfigError, match="before a wall time of 00:01:00"):
        resolve(_exp(command="x", resources={"walltime": "1m"}, launch={"preemptible": True}), site("slurm"))


def test_slurm_preemption_directives():
    text = render("slurm", {"preemptible": True, "signal": "USR2", "signal_seconds": 90, "max_requeues": 2})
    assert "#SBATCH --signal=B:USR2@90\n#SBATCH --requeue\n#SBATCH --open-mode=append\n" in text
    assert 'if [ "$count" -lt 2 ]; then' in text and 'scontrol requeue "$SLURM_JOB_ID"' in text
    assert "trap hpcjobs_on_preempt USR2" in text
    assert "hpcjobs_after" in text and 'hpcjobs_after 3510' not in text  # Slurm sends the signal itself


@pytest.mark.parametrize("scheduler", ["pbspro", "torque"])
def test_pbs_preemption_timer_from_the_walltime(scheduler):
    text = render(scheduler, {"preemptible": True, "signal_seconds": 90})
    assert 'hpcjobs_after 3510 USR1 "$$"' in text  # 1 h - 90 s
    assert "--signal" not in text and "qrerun" not in text and "exit 75" in text


def test_pbs_qrerun_and_exit_code_from_the_site():
    text = render("pbspro", {"preemptible": True},
                  site_kw={"preemption": {"pbs_requeue": "qrerun", "requeue_exit_code": 99}})
    assert 'qrerun "$PBS_JOBID"' in text and "exit 99" in text


def test_distributed_modules_and_nccl_environment_only_for_gpu_or_launcher_jobs():
    kw = {"distributed": {"modules": ["cuda/12.2", "nccl/2.18"], "environment": {"NCCL_IB_HCA": "mlx5_0"}},
          "modules": ["gcc"]}
    gpu = resolve(_exp(command="x", resources={"gpus_per_node": 2}), site("slurm", **kw))
    assert gpu.modules == ("gcc", "cuda/12.2", "nccl/2.18")
    assert ("NCCL_IB_HCA", "mlx5_0") in gpu.environment
    launcher = resolve(_exp(launch={"launcher": "mpi", "program": "a"}), site("slurm", **kw))
    assert "nccl/2.18" in launcher.modules
    cpu = resolve(_exp(command="x"), site("slurm", **kw))
    assert cpu.modules == ("gcc",) and all(k != "NCCL_IB_HCA" for k, _ in cpu.environment)


def test_nproc_per_node_defaults():
    def nproc(resources, **launch):
        job = resolve(_exp(resources=resources, launch={"launcher": "torchrun", "program": "t.py", **launch}),
                      site("slurm"))
        return job.launch.nproc_per_node
    assert nproc({"gpus_per_node": 4}) == 4
    assert nproc({"tasks_per_node": 3}) == 3
    assert nproc({"gpus_per_node": 4}, nproc_per_node=2) == 2


@pytest.mark.parametrize(("scheduler", "site_kw", "line"), [
    ("slurm", {}, "srun --nodes=2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=2 --kill-on-bad-exit=1 ./a 'x y'"),
    ("pbspro", {}, "mpiexec -n 8 --ppn 4 ./a 'x y'"),
    ("torque", {"distributed": {"mpi_flavour": "openmpi"}}, "mpiexec -n 8 --map-by ppr:4:node:PE=2 ./a 'x y'"),
    ("local", {}, "mpiexec -n 4 ./a 'x y'"),
])
def test_mpi_counts(scheduler, site_kw, line):
    text = render(scheduler, {"launcher": "mpi", "program": "./a", "args": ["x y"]}, site_kw=site_kw,
                  resources={"nodes": 2, "tasks_per_node": 4, "cpus_per_task": 2, "walltime": "1h"})
    assert text.rstrip().endswith(line)


def test_torchrun_static_rendezvous_and_site_command():
    text = render("slurm", {"launcher": "torchrun", "program": "t.py", "rdzv_backend": "static"},
                  site_kw={"distributed": {"torchrun": "python -m torch.distributed.run"}})
    assert "hpcjobs_signal_group python -m torch.distributed.run --nnodes=" in text
    assert '--master-addr="$HPCJOBS_RDZV_HOST" --master-port="$HPCJOBS_RDZV_PORT"' in text


def test_deepspeed_line():
    text = render("slurm", {"launcher": "deepspeed", "program": "train.py", "args": ["--x"],
                            "deepspeed_config": "ds config.json", "deepspeed_launcher": "openmpi"})
    assert ('hpcjobs_signal_group deepspeed --hostfile="$HPCJOBS_LAUNCH_DIR/hostfile" '
            '--master_addr="$HPCJOBS_RDZV_HOST" --master_port="$HPCJOBS_RDZV_PORT" --launcher=openmpi \\\n'
            "    train.py --x --deepspeed --deepspeed_config 'ds config.json'") in text


def test_port_range_from_site_and_experiment():
    assert "echo \"$((29500 + $(hpcjobs_job_number \"$HPCJOBS_JOB_ID\") % 500))\"" in render(
        "slurm", {"launcher": "tf", "program": "p"}, site_kw={"distributed": {"port_base": 29500, "port_span": 500}})
    assert "$((40000 + " in render("slurm", {"launcher": "tf", "program": "p", "rdzv_port_base": 40000})
    with pytest.raises(ValidationError, match="goes past 65535"):
        site("slurm", distributed={"port_base": 60000, "port_span": 10000})


def test_sampler_chains_the_site_epilogue():
    text = render("slurm", {"gpu_sampler": True}, site_kw={"epilogue": ["echo bye"]})
    assert "trap 'hpcjobs_launch_cleanup; hpcjobs_epilogue' EXIT" in text
    assert text.index("trap hpcjobs_epilogue EXIT") < text.index("trap 'hpcjobs_launch_cleanup; hpcjobs_epilogue'")
