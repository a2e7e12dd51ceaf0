"""Cluster names read from slurm.conf and pbs.conf, the files the schedulers' own clients read."""

from __future__ import annotations

from pathlib import Path

from hpcjobs.config.cluster_names import local_cluster_names, pbs_server_name, slurm_cluster_name


def test_slurm_cluster_name_from_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("# ClusterName=commented\n  clustername = Jean-Zay  # keys are case-insensitive\n"
                    "SlurmctldHost=ctl\nNodeName=n[1-4] CPUs=8\n")
    env = {"SLURM_CONF": str(conf)}
    assert slurm_cluster_name(env) == "jean-zay"  # slurm.conf(5): upper case is mapped to lower case
    assert slurm_cluster_name({**env, "SLURM_CLUSTER_NAME": "inside-a-job"}) == "inside-a-job"
    assert slurm_cluster_name({"SLURM_CONF": str(tmp_path / "missing")}) is None
    conf.write_text("SlurmctldHost=ctl\n")
    assert slurm_cluster_name(env) is None


def test_pbs_server_name_from_conf(tmp_path: Path) -> None:
    conf = tmp_path / "pbs.conf"
    conf.write_text("PBS_EXEC=/opt/pbs\nPBS_SERVER=desched1.hpc.example.org\nPBS_START_MOM=0\n")
    env = {"PBS_CONF_FILE": str(conf)}
    assert pbs_server_name(env) == "desched1"
    assert pbs_server_name({**env, "PBS_SERVER": "gadi-pbs:15001"}) == "gadi-pbs"
    assert pbs_server_name({"PBS_CONF_FILE": str(tmp_path / "missing")}) is None
    slurm = tmp_path / "slurm.conf"
    slurm.write_text("ClusterName=desched1\n")
    assert local_cluster_names({**env, "SLURM_CONF": str(slurm)}) == ["desched1"]


def test_torque_server_name_from_pbs_default_or_server_name_file(tmp_path: Path) -> None:
    from hpcjobs.config.cluster_names import torque_server_name

    path = tmp_path / "server_name"
    path.write_text("tem-ce-el7.sdfarm.kr\n")
    assert torque_server_name({}, str(path)) == "tem-ce-el7.sdfarm.kr"
    path.write_text("head1.example.org:15001,head2.example.org\n")
    assert torque_server_name({}, str(path)) == "head1.example.org"
    assert torque_server_name({"PBS_DEFAULT": "other.example.org"}, str(path)) == "other.example.org"
    assert torque_server_name({}, str(tmp_path / "missing")) is None
    path.write_text("\n")
    assert torque_server_name({}, str(path)) is None
