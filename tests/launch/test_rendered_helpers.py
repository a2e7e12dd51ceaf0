"""The launch helpers as rendered, run with fake node lists: TF_CONFIG, hostfiles, ports for 1, 2, 4 nodes.

Slurm: ``SLURM_JOB_NODELIST`` and a fake ``scontrol`` on PATH printing the host names. PBS Pro and
Torque: a fake ``$PBS_NODEFILE`` with one line per MPI slot (hosts repeated, first host first).
Every value is parsed (JSON, hostfile lines) and compared with hand-written expectations and with
the Python builders of :mod:`hpcjobs.launch.builders`.
"""

from __future__ import annotations

import json

import pytest

from hpcjobs.launch.builders import hostfile, rendezvous_port, tf_config
from launch.shellrun import fake_scontrol, helpers, render, run_bash

NODE_COUNTS = (1, 2, 4)


def _hosts(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(1, n + 1)]


def _slurm(tmp_path, nodes: int, launcher: str = "tf", tasks_per_node: int = 1):
    text = render("slurm", {"launcher": launcher, "program": "train.py"},
                  resources={"nodes": nodes, "tasks_per_node": tasks_per_node, "cpus_per_task": 2,
                             "gpus_per_node": 4, "walltime": "1h"})
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    fake_scontrol(bindir, _hosts(nodes))
    env = {"SLURM_JOB_NODELIST": f"gpu[001-{nodes:03d}]", "SLURM_JOB_ID": "4242"}
    return helpers(text), env, bindir


def _pbs(tmp_path, scheduler: str, nodes: int, slots: int = 4):
    text = render(scheduler, {"launcher": "tf", "program": "train.py"},
                  resources={"nodes": nodes, "tasks_per_node": 1, "cpus_per_task": 2, "gpus_per_node": 4,
                             "walltime": "1h"})
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}.cluster\n" * slots for h in _hosts(nodes)))
    return helpers(text), {"PBS_NODEFILE": str(nodefile), "PBS_JOBID": "4242.pbsserver"}


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_slurm_tf_config_per_rank(tmp_path, nodes):
    code, env, bindir = _slurm(tmp_path, nodes)
    port = rendezvous_port("4242")
    script = code + "".join(f'hpcjobs_tf_config {r} "$(hpcjobs_rdzv_port)" 1\n' for r in range(nodes))
    proc = run_bash(script, env, bindir)
    assert proc.returncode == 0, proc.stderr
    configs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(configs) == nodes
    for rank, cfg in enumerate(configs):
        assert cfg["cluster"]["worker"] == [f"gpu{i:03d}:24242" for i in range(1, nodes + 1)]
        assert cfg["task"] == {"type": "worker", "index": rank}
        assert cfg == tf_config(_hosts(nodes), rank, port)


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_slurm_tf_config_two_tasks_per_node(tmp_path, nodes):
    code, env, bindir = _slurm(tmp_path, nodes, tasks_per_node=2)
    proc = run_bash(code + 'for r in $(seq 0 $((2 * HPCJOBS_NNODES - 1))); do '
                    'hpcjobs_tf_config "$r" 30000 "$HPCJOBS_TASKS_PER_NODE"; done\n', env, bindir)
    assert proc.returncode == 0, proc.stderr
    configs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [c["task"]["index"] for c in configs] == list(range(2 * nodes))
    workers = configs[0]["cluster"]["worker"]
    assert len(workers) == 2 * nodes
    assert workers[:2] == ["gpu001:30000", "gpu001:30001"]
    assert workers[-1] == f"gpu{nodes:03d}:30001"


@pytest.mark.parametrize("scheduler", ["pbspro", "torque"])
@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_pbs_tf_config_from_nodefile(tmp_path, scheduler, nodes):
    code, env = _pbs(tmp_path, scheduler, nodes)
    proc = run_bash(code + "".join(f'hpcjobs_tf_config {r} "$(hpcjobs_rdzv_port)" 1\n' for r in range(nodes)),
                    env)
    assert proc.returncode == 0, proc.stderr
    hosts = [f"{h}.cluster" for h in _hosts(nodes)]
    for rank, line in enumerate(proc.stdout.splitlines()):
        cfg = json.loads(line)
        assert cfg["cluster"]["worker"] == [f"{h}:24242" for h in hosts]  # one worker per host, not per slot
        assert cfg == tf_config(hosts, rank, 24242)


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_slurm_deepspeed_hostfile(tmp_path, nodes):
    code, env, bindir = _slurm(tmp_path, nodes, launcher="deepspeed")
    proc = run_bash(code + 'hpcjobs_hostfile "$HPCJOBS_NPROC_PER_NODE"\n', env, bindir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [f"gpu{i:03d} slots=4" for i in range(1, nodes + 1)]
    parsed = {h: int(s.split("=")[1]) for h, s in (line.split() for line in lines)}
    assert parsed == {h: 4 for h in _hosts(nodes)}
    assert proc.stdout == hostfile(_hosts(nodes), 4)


@pytest.mark.parametrize("nodes", NODE_COUNTS)
def test_pbs_hostfile_and_rendezvous_host(tmp_path, nodes):
    code, env = _pbs(tmp_path, "pbspro", nodes, slots=3)
    proc = run_bash(code + 'hpcjobs_hostfile 4\necho "first=$(hpcjobs_hosts | awk \'NR == 1\')"\n', env)
    assert proc.returncode == 0, proc.stderr
    *lines, first = proc.stdout.splitlines()
    assert lines == [f"{h}.cluster slots=4" for h in _hosts(nodes)]
    assert first == "first=gpu001.cluster"


@pytest.mark.parametrize(("job_id", "port"), [
    ("4242", 24242), ("1234567.desched1", 24567), ("88[3].server", 20883), ("12345678901234", 21234),
])
def test_rendezvous_port_in_bash_equals_python(tmp_path, job_id, port):
    code, env, bindir = _slurm(tmp_path, 2)
    env = {**env, "SLURM_JOB_ID": job_id}
    proc = run_bash(code + "hpcjobs_rdzv_port\n", env, bindir)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == port == rendezvous_port(job_id)


def test_hosts_without_a_scheduler_is_this_host(tmp_path):
    code = helpers(render("local", {"launcher": "tf", "program": "x"},
                          resources={"nodes": 1, "tasks_per_node": 2}))
    proc = run_bash(code + "hpcjobs_hosts; hpcjobs_tf_config 1 20000 2\n", {})
    host, cfg = proc.stdout.splitlines()
    assert host and json.loads(cfg) == tf_config([host], 1, 20000, 2)
