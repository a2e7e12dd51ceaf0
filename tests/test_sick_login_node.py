"""Commands that do not submit never wait on the scheduler (a login node whose controller is down).

Every scheduler client (``scontrol``, ``sbatch``, ``sacct``, ``qstat``, ``qsub`` ...) is replaced by
one that records its start and then hangs for 60 s. The commands below must finish with exit 0 and
start none of them; the time they take is measured in ``benchmarks/bench_sick_login_node.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HANGING = ("scontrol", "sbatch", "squeue", "sacct", "sacctmgr", "sinfo", "scancel",
           "qsub", "qstat", "qdel", "qmgr", "pbsnodes", "qselect", "tracejob")

SICK_SITE = """\
name: sickcluster
scheduler: slurm
detect:
  cluster_names: [sickcluster]
default_partition: batch
partitions:
  batch:
    max_walltime: 1-00:00:00
    cpus_per_node: 8
    memory_per_node: 32G
"""


@pytest.fixture
def sick_node(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose scheduler clients hang, and the file each writes its name to when started."""
    bindir, started = tmp_path / "bin", tmp_path / "started.log"
    bindir.mkdir()
    for name in HANGING:
        exe = bindir / name
        exe.write_text(f'#!/bin/sh\necho "{name} $*" >> "{started}"\nexec sleep 60\n')
        exe.chmod(0o755)
    sites = tmp_path / "sites"
    sites.mkdir()
    (sites / "sickcluster.yaml").write_text(SICK_SITE)
    conf = tmp_path / "slurm.conf"
    conf.write_text("# a login node's slurm.conf\nClusterName=sickcluster\nSlurmctldHost=ctl(10.0.0.1)\n")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HPCJOBS_PBS_BIN": str(bindir),
           "SLURM_CONF": str(conf), "PBS_CONF_FILE": str(tmp_path / "no-pbs.conf"),
           "HPCJOBS_SITE_PATH": str(sites), "HPCJOBS_SWEEP_ROOT": str(tmp_path / "sweeps"),
           "PYTHONPATH": str(ROOT), "HPCJOBS_DISCOVER": "1"}  # as for a user: site discovery is on
    env.pop("HPCJOBS_SITE", None)
    return env, started


def _run(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=45)


@pytest.mark.parametrize("args", [
    ("--help",),
    ("render", "examples/hello.yaml"),
    ("render", "examples/hello.yaml", "--site", "derecho", "--set", "account=UABC0001"),
    ("render", "examples/mpi-cpu.yaml", "--site", "carbon"),
    ("sweep", "examples/sweep-grid.yaml", "--site", "local", "--dry-run"),
    ("site", "list"),
    ("site", "show", "derecho"),
    ("site", "validate", "site-configs/derecho.yaml", "site-configs/jean-zay.yaml", "site-configs/carbon.yaml"),
    ("schema", "site"),
    ("ls",),
    ("report", "--from-file", "tests/data/slurm/testbed/sacct_header_X.txt"),
], ids=lambda a: " ".join(a))
def test_no_scheduler_command_is_started(sick_node, args) -> None:
    env, started = sick_node
    result = _run(env, *args, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert not started.exists(), f"started: {started.read_text()}"


def test_site_detected_from_slurm_conf_without_asking_slurmctld(sick_node, tmp_path: Path) -> None:
    """ClusterName is read from slurm.conf (the file scontrol would read), not from `scontrol show config`."""
    env, started = sick_node
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: probe\ncommand: echo hi\n")
    result = _run(env, "render", str(exp), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --partition=batch" in result.stdout
    assert not started.exists(), f"started: {started.read_text()}"


def test_undescribed_cluster_renders_for_local_with_a_warning_and_no_scheduler_call(sick_node, tmp_path: Path) -> None:
    """A cluster no site file describes: render does not ask the scheduler, and says why it uses local."""
    env, started = sick_node
    (Path(env["SLURM_CONF"])).write_text("ClusterName=othercluster\n")
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: probe\ncommand: echo hi\n")
    result = _run(env, "render", str(exp), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "names cluster othercluster" in result.stderr and "hpcjobs site init" in result.stderr
    assert "#SBATCH" not in result.stdout
    assert not started.exists(), f"started: {started.read_text()}"


def test_a_submission_on_a_sick_node_waits_only_the_short_timeout_and_says_so(sick_node, tmp_path: Path) -> None:
    """`submit` may ask the scheduler (discovery), but only for HPCJOBS_SCHEDULER_TIMEOUT_S, with one clear line."""
    env, started = sick_node
    Path(env["SLURM_CONF"]).write_text("ClusterName=othercluster\n")  # no site file names it: discovery
    env = {**env, "HPCJOBS_SCHEDULER_TIMEOUT_S": "1"}
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: probe\ncommand: echo hi\n")
    result = _run(env, "submit", str(exp), "--json", cwd=tmp_path)
    assert "slurmctld did not answer `scontrol show config` in 1 s" in result.stderr, result.stderr
    assert started.read_text().splitlines()[0].startswith("scontrol show config")
    # nothing answered: site local, which has no scheduler to submit to: exit 2, nothing written
    assert result.returncode == 2 and "has no scheduler to submit to" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "exp.yaml", "sites", "slurm.conf", "started.log"]
