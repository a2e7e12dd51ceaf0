"""The pure builders (rendezvous port, hosts, hostfile, TF_CONFIG), checked against hand-written values."""

from __future__ import annotations

import json

import pytest

from hpcjobs.launch.builders import (
    gpu_csv_name,
    gpu_sampler_argv,
    hostfile,
    job_number,
    rendezvous_port,
    tf_config,
    tf_config_json,
    unique_hosts,
)


@pytest.mark.parametrize(("job_id", "number"), [
    ("1234", 1234), ("1234.desched1", 1234), ("4567[3].server", 45673), ("98765_4", 987654),
    ("12345678901234", 345678901234 % 10**9), ("abc", 0), ("", 0), ("007", 7),
])
def test_job_number(job_id, number):
    assert job_number(job_id) == number


def test_rendezvous_port_is_base_plus_job_number_mod_span():
    assert rendezvous_port("1234") == 21234
    assert rendezvous_port("98765") == 28765
    assert rendezvous_port("4000000.server") == 20000
    assert rendezvous_port("12", base=29500, span=100) == 29512
    for n in range(0, 200_000, 997):
        assert 20000 <= rendezvous_port(str(n)) < 30000
    with pytest.raises(ValueError):
        rendezvous_port("1", base=60000, span=10000)


def test_unique_hosts_keep_first_seen_order():
    nodefile = ["n7.cluster", "n7.cluster", "n3.cluster", "", "n3.cluster", "n9.cluster"]
    assert unique_hosts(nodefile) == ["n7.cluster", "n3.cluster", "n9.cluster"]


def test_hostfile():
    assert hostfile(["a", "b"], 4) == "a slots=4\nb slots=4\n"
    assert hostfile(["gpu001"], 8) == "gpu001 slots=8\n"


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_tf_config_one_worker_per_node(nodes):
    hosts = [f"n{i}" for i in range(nodes)]
    for rank in range(nodes):
        cfg = tf_config(hosts, rank, 21000)
        assert cfg == {"cluster": {"worker": [f"n{i}:21000" for i in range(nodes)]},
                       "task": {"type": "worker", "index": rank}}
    with pytest.raises(ValueError):
        tf_config(hosts, nodes, 21000)


def test_tf_config_two_tasks_per_node_get_consecutive_ports():
    cfg = json.loads(tf_config_json(["a", "b"], 3, 20000, tasks_per_node=2))
    assert cfg["cluster"]["worker"] == ["a:20000", "a:20001", "b:20000", "b:20001"]
    assert cfg["task"] == {"type": "worker", "index": 3}


def test_gpu_sampler_command_line_is_the_one_the_reader_expects():
    assert gpu_sampler_argv(30) == [
        "nvidia-smi",
        "--query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw",
        "--format=csv,nounits", "-l", "30",
    ]
    assert gpu_csv_name("train", "123") == "train-123.gpu.csv"
