"""``hpcjobs site init`` and ``site diff`` on the real Slurm testbed, checked against what scontrol says."""

from __future__ import annotations

import getpass
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.config.sites import load_site_file
from hpcjobs.process import run_command
from hpcjobs.units import parse_memory, parse_walltime

pytestmark = pytest.mark.slurm


def _records(argv: list[str]) -> list[dict[str, str]]:
    """``scontrol show ... -o`` lines as dicts (values with spaces are cut at the space: fine for these keys)."""
    lines = run_command(argv, timeout=30).stdout.splitlines()
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in lines if "=" in line]


@pytest.fixture
def site_file(slurm_testbed: Any, tmp_path: Path) -> Path:
    out = tmp_path / "x.yaml"
    result = CliRunner().invoke(main, ["site", "init", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_site_init_matches_scontrol_field_by_field(slurm_testbed: Any, site_file: Path) -> None:
    site = load_site_file(site_file)
    config = slurm_testbed.config()
    partitions = _records(["scontrol", "show", "partition", "-o"])
    nodes = _records(["scontrol", "show", "node", "-o"])
    assert site.scheduler == "slurm"
    assert site.name == config["ClusterName"] and site.detect.cluster_names == [config["ClusterName"]]
    assert site.limits.max_array_size == int(config["MaxArraySize"])
    assert sorted(site.partitions) == sorted(p["PartitionName"] for p in partitions)
    assert site.default_partition == next(p["PartitionName"] for p in partitions if p["Default"] == "YES")
    for part in partitions:
        entry = site.partitions[part["PartitionName"]]
        members = [n for n in nodes if part["PartitionName"] in n["Partitions"].split(",")]
        assert entry.max_walltime == parse_walltime(part["MaxTime"])
        assert entry.default_walltime is None and part["DefaultTime"] == "NONE"
        assert entry.max_nodes == int(part["TotalNodes"])
        assert entry.cpus_per_node == min(int(n["CPUTot"]) for n in members)
        assert entry.memory_per_node == min(int(n["RealMemory"]) for n in members) * 1024**2
        gres = [re.fullmatch(r"gpu(?::(\w+))?:(\d+)", n["Gres"]) for n in members]
        assert entry.gpus_per_node == min(int(m[2]) for m in gres if m)
        assert entry.gpu_types == sorted({m[1] for m in gres if m and m[1]})
        assert entry.default_memory_per_cpu == parse_memory(config["DefMemPerCPU"] + "M")
    # every value in the file names the command it came from
    text = site_file.read_text()
    for line in text.splitlines():
        if re.match(r"^\s+(max_walltime|cpus_per_node|memory_per_node|gpus_per_node|max_nodes):", line):
            assert "# scontrol show" in line, line
    assert yaml.safe_load(text)["partitions"]["gpu"]["gpus_per_node"] == 2


def test_site_validate_passes_on_the_discovered_file(site_file: Path) -> None:
    result = CliRunner().invoke(main, ["site", "validate", str(site_file)])
    assert result.exit_code == 0, result.output
    assert f"ok  {site_file}" in result.output


def test_site_diff_is_clean_then_reports_one_edited_limit(site_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    clean = runner.invoke(main, ["site", "diff", str(site_file)])
    assert clean.exit_code == 0, clean.output
    text = site_file.read_text()
    gpu_block = text.index("  gpu:\n")
    edited = text[:gpu_block] + text[gpu_block:].replace('max_walltime: "01:00:00"', 'max_walltime: "2-00:00:00"', 1)
    assert edited != text
    changed = tmp_path / "edited.yaml"
    changed.write_text(edited)
    result = runner.invoke(main, ["site", "diff", str(changed)])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        "partition gpu: max_walltime 2-00:00:00 in the file, 01:00:00 on the cluster"]


def test_no_site_file_anywhere_submits_to_the_discovered_slurm_site(
        slurm_testbed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`sweep` (which submits) discovers the cluster; `render` then uses the cached site without asking."""
    monkeypatch.setenv("HPCJOBS_DISCOVER", "1")
    monkeypatch.setenv("HPCJOBS_SWEEP_ROOT", str(tmp_path / "sweeps"))
    monkeypatch.chdir(tmp_path)
    tmp_path.chmod(0o777)
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: discovered\ncommand: echo hi\nresources:\n  walltime: 00:01:00\n"
                   "sweep:\n  grid:\n    x: [1, 2]\n")
    from hpcjobs.sites.discover import cache_dir

    result = CliRunner().invoke(main, ["sweep", str(exp), "--json"])
    assert result.exit_code == 0, result.output
    assert "site hpctest (discovered from Slurm cluster hpctest)" in caplog.text
    assert '"points_submitted": 2' in result.output
    cached = cache_dir() / "slurm-hpctest.yaml"
    assert load_site_file(cached).limits.max_array_size == int(slurm_testbed.config()["MaxArraySize"])
    # render asks no scheduler: the fresh cached site is used (scontrol hidden from PATH to prove it)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path / "no-scheduler-here"))
    caplog.clear()
    result = CliRunner().invoke(main, ["render", str(exp)])
    assert result.exit_code == 0, result.output
    assert "#SBATCH" in result.output and "--partition=debug" in result.output
    monkeypatch.setenv("PATH", path)
    # --refresh-site discovers again although the cached site is fresh (a hand-edited limit is replaced)
    cached.write_text(cached.read_text().replace(f"max_array_size: {load_site_file(cached).limits.max_array_size}",
                                                 "max_array_size: 7"))
    assert load_site_file(cached).limits.max_array_size == 7
    single = tmp_path / "single.yaml"
    single.write_text("name: single\ncommand: echo hi\nresources:\n  walltime: 00:01:00\n")
    caplog.clear()
    result = CliRunner().invoke(main, ["submit", str(single), "--refresh-site", "--json"])
    assert result.exit_code == 0, result.output
    assert "site hpctest (discovered from Slurm cluster hpctest)" in caplog.text
    assert load_site_file(cached).limits.max_array_size == int(slurm_testbed.config()["MaxArraySize"])
    # every submitting command says which site it used and why, also when it was named
    caplog.clear()
    result = CliRunner().invoke(main, ["submit", str(single), "--site", str(cached), "--json"])
    assert result.exit_code == 0, result.output
    assert f"site {cached} (--site)" in caplog.text


@pytest.fixture
def maxwall_qos(slurm_testbed: Any) -> Any:
    """A QOS of this test's own with MaxWall=00:10:00 and GrpTRES=cpu=4 that the current user may use.

    The testbed's QOS (``normal``, the default of root's associations) are never changed; deleting the
    QOS at the end also takes it off the user's associations.
    """
    name = f"hpcjobs_maxwall_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    user = getpass.getuser()
    run_command(["sacctmgr", "-i", "add", "qos", name, "MaxWall=00:10:00", "GrpTRES=cpu=4"], timeout=30)
    try:
        run_command(["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", f"qos+={name}"], timeout=30)
        yield name
    finally:
        run_command(["scancel", f"--qos={name}"], timeout=30, check=False)
        run_command(["sacctmgr", "-i", "delete", "qos", name], timeout=30, check=False)


def test_site_init_reads_qos_maxwall_and_submit_refuses_a_longer_job(
        maxwall_qos: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "x.yaml"
    result = CliRunner().invoke(main, ["site", "init", "-o", str(out)])
    assert result.exit_code == 0, result.output
    # field by field against sacctmgr's own answer
    live = run_command(["sacctmgr", "--parsable2", "--noheader", "show", "qos", maxwall_qos,
                        "format=Name,MaxWall,GrpTRES,MaxSubmitJobsPerUser"], timeout=30).stdout.strip()
    assert live == f"{maxwall_qos}|00:10:00|cpu=4|"
    site = load_site_file(out)
    limits = site.qos_limits[maxwall_qos]
    assert (limits.max_walltime, limits.max_cpus_per_job, limits.max_submitted_jobs, limits.max_gpus_per_job) == (
        parse_walltime("00:10:00"), 4, None, None)
    assert "normal" not in site.qos_limits  # the testbed's QOS sets no limit (other tests may set MaxSubmitPU)
    text = out.read_text()
    assert f'  {maxwall_qos}:\n    max_walltime: "00:10:00"  # sacctmgr show qos: MaxWall=00:10:00' in text
    assert "max_cpus_per_job: 4  # sacctmgr show qos: GrpTRES=cpu=4" in text
    assert CliRunner().invoke(main, ["site", "validate", str(out)]).exit_code == 0
    assert CliRunner().invoke(main, ["site", "diff", str(out)]).exit_code == 0

    monkeypatch.chdir(tmp_path)
    tmp_path.chmod(0o777)
    exp = tmp_path / "long.yaml"
    exp.write_text(f"name: qoslong\ncommand: 'true'\nqos: {maxwall_qos}\nresources:\n  walltime: 00:20:00\n")
    refused = CliRunner().invoke(main, ["submit", str(exp), "--site", str(out)])
    assert refused.exit_code == 2, refused.output
    assert (f"wall time 00:20:00 requested, QOS '{maxwall_qos}' of site 'hpctest' ({out}) allows at most 00:10:00"
            in refused.output), refused.output
    queued = run_command(["squeue", "--noheader", f"--qos={maxwall_qos}", "--format=%i"], timeout=30).stdout
    assert queued.strip() == ""  # refused before sbatch: nothing reached Slurm
    # within the QOS's MaxWall the same job goes through, under that QOS
    exp.write_text(exp.read_text().replace("00:20:00", "00:05:00"))
    accepted = CliRunner().invoke(main, ["submit", str(exp), "--site", str(out), "--json"])
    assert accepted.exit_code == 0, accepted.output
    job_id = json.loads(accepted.output[accepted.output.index("{"):])["job_id"]
    shown = run_command(["scontrol", "show", "job", str(job_id)], timeout=30).stdout
    assert f"QOS={maxwall_qos}" in shown and "TimeLimit=00:05:00" in shown
