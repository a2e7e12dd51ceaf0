"""Rendered scripts run end to end with fake launchers: one launcher per node, ranks, environment.

The fakes stand in for the cluster's tools and record what they were given:
``srun`` runs its command ``--ntasks`` times with ``SLURM_PROCID``/``SLURM_NODEID``; ``pbsdsh``
and ``mpiexec`` run theirs with an *empty* environment (as the PBS task manager does), so only
what the job's node-environment file restores reaches the tasks; ``torchrun`` and the programs
write their argv and the variables that matter into files.
"""

from __future__ import annotations

import json
from pathlib import Path

from hpcjobs.launch.builders import tf_config
from launch.shellrun import fake_scontrol, fake_tool, render, run_bash

HOSTILE = "$(touch pwned) `id` 'q' \"dq\""

FAKE_SRUN = r'''
printf '%s\n' "$@" >"$FAKE_LOG/srun.argv"
ntasks=1 per=1
while [ "${1#--}" != "$1" ]; do
    case "$1" in --ntasks=*) ntasks=${1#*=} ;; --ntasks-per-node=*) per=${1#*=} ;; esac
    shift
done
for ((i = 0; i < ntasks; i++)); do SLURM_PROCID=$i SLURM_NODEID=$((i / per)) "$@" & done
wait
'''

FAKE_PBSDSH = r'''
[ "$1" = -n ] && [ "$3" = -- ] || exit 2
echo "$2" >>"$FAKE_LOG/pbsdsh.slots"
shift 3
# a task the MOM starts: its own session (no signal to the batch script's groups reaches it),
# default signal handling, the job's base environment only
exec setsid --wait env --default-signal -i PATH="$PATH" HOME="$HOME" FAKE_LOG="$FAKE_LOG" "$@"
'''

FAKE_MPIEXEC = r'''
printf '%s\n' "$@" >"$FAKE_LOG/mpiexec.argv"
[ "$1" = -n ] || exit 2
n=$2; shift 2
[ "$1" = --ppn ] && shift 2
for ((i = 0; i < n; i++)); do env -i PATH="$PATH" HOME="$HOME" FAKE_LOG="$FAKE_LOG" PMI_RANK=$i "$@" & done
wait
'''

FAKE_TORCHRUN = r'''
printf '%s\n' "$@" >"$FAKE_LOG/torchrun.$HPCJOBS_NODE_RANK"
printf 'NCCL_SOCKET_IFNAME=%s\nMY_VAR=%s\nPWD=%s\n' "${NCCL_SOCKET_IFNAME-unset}" "${MY_VAR-unset}" "$PWD" \
    >"$FAKE_LOG/torchrun-env.$HPCJOBS_NODE_RANK"
'''


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    bindir, log = tmp_path / "bin", tmp_path / "log"
    bindir.mkdir()
    log.mkdir()
    fake_tool(bindir, "srun", FAKE_SRUN)
    fake_tool(bindir, "pbsdsh", FAKE_PBSDSH)
    fake_tool(bindir, "mpiexec", FAKE_MPIEXEC)
    fake_tool(bindir, "torchrun", FAKE_TORCHRUN)
    fake_tool(bindir, "train_tf", 'printf "%s" "$TF_CONFIG" >"$FAKE_LOG/tf.$HPCJOBS_TASK_RANK"\n')
    return bindir, log


GPU2 = {"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 16, "gpus_per_node": 4, "walltime": "1h"}
TORCHRUN = {"launcher": "torchrun", "program": "train.py", "args": ["--lr", "0.1", HOSTILE]}
SITE_NCCL = {"distributed": {"environment": {"NCCL_SOCKET_IFNAME": "ib0"}, "modules": []}}


def test_slurm_torchrun_one_launcher_per_node(tmp_path):
    bindir, log = _setup(tmp_path)
    fake_scontrol(bindir, ["gpu001", "gpu002"])
    text = render("slurm", TORCHRUN, resources=GPU2, site_kw=SITE_NCCL, environment={"MY_VAR": "a b"})
    proc = run_bash(text, {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[001-002]", "FAKE_LOG": str(log)},
                    bindir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    srun = (log / "srun.argv").read_text().splitlines()
    assert srun[:5] == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=16",
                        "--kill-on-bad-exit=1"]
    for rank in (0, 1):
        argv = (log / f"torchrun.{rank}").read_text().splitlines()
        assert argv == ["--nnodes=2", "--nproc-per-node=4", f"--node-rank={rank}", "--rdzv-backend=c10d",
                        "--rdzv-endpoint=gpu001:24242", "--rdzv-id=4242", "train.py", "--lr", "0.1", HOSTILE]
        env = (log / f"torchrun-env.{rank}").read_text()
        assert "NCCL_SOCKET_IFNAME=ib0\nMY_VAR=a b\n" in env
    assert not (tmp_path / "pwned").exists()
    assert "hpcjobs: torchrun on 2 node(s), rendezvous gpu001:24242" in proc.stderr


def test_pbs_torchrun_pbsdsh_on_each_hosts_first_slot(tmp_path):
    bindir, log = _setup(tmp_path)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n1\nn1\nn1\nn1\nn2\nn2\nn2\nn2\n")
    text = render("pbspro", TORCHRUN, resources=GPU2, site_kw=SITE_NCCL, environment={"MY_VAR": "x\ny"},
                  workdir=str(tmp_path))
    proc = run_bash(text, {"PBS_JOBID": "777.server", "PBS_NODEFILE": str(nodefile), "FAKE_LOG": str(log),
                           "PBS_O_WORKDIR": str(tmp_path)}, bindir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted((log / "pbsdsh.slots").read_text().split()) == ["0", "4"]
    for rank in (0, 1):
        argv = (log / f"torchrun.{rank}").read_text().splitlines()
        assert argv[:6] == ["--nnodes=2", "--nproc-per-node=4", f"--node-rank={rank}", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=n1:20777", "--rdzv-id=777.server"]
        assert argv[6:] == ["train.py", "--lr", "0.1", HOSTILE]
        env = (log / f"torchrun-env.{rank}").read_text()
        # the node-environment file brought the job's variables (a newline included) and directory back
        assert env == f"NCCL_SOCKET_IFNAME=ib0\nMY_VAR=x\ny\nPWD={tmp_path}\n"
    envfile = tmp_path / "hpcjobs-logs" / "job1-777.server.launch" / "task-env.sh"
    assert oct(envfile.stat().st_mode & 0o777) == "0o600"


def test_pbs_tf_config_per_task_through_mpiexec(tmp_path):
    bindir, log = _setup(tmp_path)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"h{i}\n" * 2 for i in range(4)))
    text = render("pbspro", {"launcher": "tf", "program": "train_tf"},
                  resources={"nodes": 4, "tasks_per_node": 2, "cpus_per_task": 8, "gpus_per_node": 2,
                             "walltime": "1h"})
    proc = run_bash(text, {"PBS_JOBID": "31.server", "PBS_NODEFILE": str(nodefile), "FAKE_LOG": str(log)},
                    bindir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (log / "mpiexec.argv").read_text().splitlines()[:4] == ["-n", "8", "--ppn", "2"]
    hosts = [f"h{i}" for i in range(4)]
    for rank in range(8):
        assert json.loads((log / f"tf.{rank}").read_text()) == tf_config(hosts, rank, 20031, tasks_per_node=2)


def test_slurm_tf_config_per_task_through_srun(tmp_path):
    bindir, log = _setup(tmp_path)
    fake_scontrol(bindir, ["a", "b"])
    text = render("slurm", {"launcher": "tf", "program": "train_tf"}, resources=GPU2)
    proc = run_bash(text, {"SLURM_JOB_ID": "99", "SLURM_JOB_NODELIST": "a,b", "FAKE_LOG": str(log)},
                    bindir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert json.loads((log / f"tf.{rank}").read_text()) == tf_config(["a", "b"], rank, 20099)


WORKER = r'''
import os, signal, sys, time
from pathlib import Path
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
deadline = time.time() + 30
while not got and time.time() < deadline:
    time.sleep(0.05)
Path(os.environ["FAKE_LOG"], "worker." + sys.argv[1]).write_text("signal" if got else "no signal")
'''


def test_pbs_preemption_signal_reaches_every_nodes_workers(tmp_path):
    """The batch shell's timer fires; pbsdsh fans the signal out to each node's torchrun group."""
    bindir, log = _setup(tmp_path)
    (tmp_path / "worker.py").write_text(WORKER)
    # torchrun: a worker per node, waited for; it must not die of the signal
    fake_tool(bindir, "torchrun", 'python3 worker.py "$HPCJOBS_NODE_RANK" & wait\n'
              'echo "launcher $HPCJOBS_NODE_RANK ok"\n')
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n1\nn1\nn2\nn2\n")
    text = render("torque", {"launcher": "torchrun", "program": "worker.py", "preemptible": True, "signal_seconds": 4,
                             "checkpoint_command": "echo hook"},
                  resources={"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 2, "walltime": "00:08"})
    proc = run_bash(text, {"PBS_JOBID": "5.torque", "PBS_NODEFILE": str(nodefile), "FAKE_LOG": str(log)},
                    bindir, cwd=tmp_path)
    assert proc.returncode == 75, proc.stderr
    assert [(log / f"worker.{r}").read_text() for r in (0, 1)] == ["signal", "signal"]
    assert sorted(proc.stdout.split("\n")) == ["", "hook", "launcher 0 ok", "launcher 1 ok"]
    launch_dir = tmp_path / "hpcjobs-logs" / "job1-5.torque.launch"
    assert sorted(p.name for p in launch_dir.glob("node-*.pgid")) == ["node-0.pgid", "node-1.pgid"]
