"""Names that smuggle a line break, names too long for a file name, variables a job must not set,
directive spellings that slip past ``forbidden_directives``, and what ``site validate`` checks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hpcjobs.config.policy import directive_names, forbidden_in
from hpcjobs.config.sites import load_site_file
from hpcjobs.config.types import MAX_NAME_LENGTH
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve

from ._policy_helpers import ROOT, SITES, assert_refused, bash_n, cli, run_bash, sbatch_directives, write

GPU_EXPERIMENT = """\
name: {name}
partition: {partition}
account: {account}
qos: {qos}
resources: {{nodes: 1, gpus_per_node: 1, gpu_type: {gpu_type}, memory: 4G, walltime: 10m}}
environment: {{{env}: x}}
params: {{{param}: 1}}
command: echo hi
"""

GOOD = {"name": "train", "partition": "gpu", "account": "proj1", "qos": "normal", "gpu_type": "v100",
        "env": "MY_VAR", "param": "lr"}


@pytest.mark.parametrize("key", sorted(GOOD))
def test_trailing_newline_in_a_name_is_refused(tmp_path: Path, key: str):
    values = dict(GOOD)
    values[key] = f'"{values[key]}\\n"'
    exp = write(tmp_path / "e.yaml", GPU_EXPERIMENT.format(**values))
    out = tmp_path / "out"
    result = cli("render", str(exp), "--site", str(SITES / "gpusite.yaml"), "-o", str(out))
    assert_refused(result, exp)
    assert not out.exists()


def test_the_same_names_without_the_newline_keep_every_directive(tmp_path: Path):
    exp = write(tmp_path / "e.yaml", GPU_EXPERIMENT.format(**GOOD))
    result = cli("render", str(exp), "--site", str(SITES / "gpusite.yaml"))
    assert result.code == 0, result.output
    directives = sbatch_directives(result.output)
    assert "#SBATCH --gres=gpu:v100:1" in directives
    assert {"#SBATCH --mem=4G", "#SBATCH --time=00:10:00"} <= set(directives)
    assert any(d.startswith("#SBATCH --output=") for d in directives)
    assert bash_n(result.output).returncode == 0


def test_newline_in_site_name_and_sweep_parameter(tmp_path: Path):
    site = write(tmp_path / "s.yaml", 'name: "mysite\\n"\nscheduler: local\n')
    assert_refused(cli("site", "validate", str(site)), site, "not a valid name")
    exp = write(tmp_path / "e.yaml", 'name: t\ncommand: "true"\nsweep:\n  grid: {"lr\\n": [1, 2]}\n')
    assert_refused(cli("sweep", str(exp), "--site", "local", "--dry-run"), exp, "not a valid parameter name")
    exp2 = write(tmp_path / "e2.yaml", 'name: t\ncommand: "true"\nsecrets: {"TOKEN\\n": {env: X}}\n')
    assert_refused(cli("render", str(exp2)), exp2, "not a valid environment variable name")


def test_a_directive_with_a_line_break_is_never_rendered():
    site = load_site_file(SITES / "gpusite.yaml")
    from hpcjobs.config.experiment import Experiment

    job = resolve(Experiment(name="t", command="true", partition="gpu"), site)
    for bad in ("x\ny", "x\ry", "x\x00y", "x\u2028y"):
        with pytest.raises(ConfigError, match="must stay on one line"):
            render_job(dataclasses.replace(job, account=bad))
        with pytest.raises(ConfigError, match="must stay on one line"):
            render_job(dataclasses.replace(job, extra_directives=(f"--comment={bad}",)))


def test_long_names_are_refused_and_the_longest_allowed_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    long = write(tmp_path / "long.yaml", f"name: {'a' * 300}\ncommand: 'true'\nsweep: {{grid: {{x: [1]}}}}\n")
    assert_refused(cli("sweep", str(long), "--site", "local"), long, f"at most {MAX_NAME_LENGTH} characters")
    assert not (tmp_path / "hpcjobs-sweeps").exists()
    name = "b" * MAX_NAME_LENGTH
    ok = write(tmp_path / "ok.yaml", f"name: {name}\ncommand: 'echo ran > \"$HPCJOBS_RUN_DIR/r\"'\n"
                                     "sweep: {grid: {x: [1]}}\n")
    result = cli("sweep", str(ok), "--site", "local", "--json")
    assert result.code == 0, result.output
    info = json.loads(result.output)
    runs = list((tmp_path / "hpcjobs-sweeps" / info["sweep_id"] / "points").glob("*/r"))
    assert [r.read_text() for r in runs] == ["ran\n"]


@pytest.mark.parametrize(("section", "name"), [
    ("params", "UID"), ("params", "EUID"), ("environment", "PPID"), ("environment", "BASHOPTS"),
    ("environment", "IFS"), ("environment", "PS4"), ("environment", "BASH_ENV"), ("environment", "PATH"),
    ("environment", "HOME"), ("params", "LD_PRELOAD"), ("environment", "HPCJOBS_SITE"),
])
def test_variables_a_job_must_not_set(tmp_path: Path, section: str, name: str):
    exp = write(tmp_path / "e.yaml", f"name: t\ncommand: 'true'\n{section}: {{{name}: '5'}}\n")
    assert_refused(cli("render", str(exp)), exp, f"{name}")


def test_reserved_names_as_secret_and_sweep_parameter(tmp_path: Path):
    exp = write(tmp_path / "e.yaml", "name: t\ncommand: 'true'\nsecrets: {BASH_ENV: {env: X}}\n")
    assert_refused(cli("render", str(exp)), exp, "BASH_ENV")
    sweep = write(tmp_path / "s.yaml", "name: t\ncommand: 'true'\nsweep: {grid: {UID: [1, 2]}}\n")
    result = cli("sweep", str(sweep), "--site", "local", "--dry-run")
    assert result.code == 2 and "UID" in result.output and "Traceback" not in result.output, result.output


def test_ordinary_names_still_reach_the_job(tmp_path: Path):
    """``ENV`` (an application setting, read by POSIX shells only when interactive) stays allowed."""
    exp = write(tmp_path / "e.yaml", "name: t\nenvironment: {ENV: production, MY_PATH: /x}\n"
                                     "command: 'echo \"$ENV $MY_PATH\"'\n")
    out = tmp_path / "out"
    assert cli("render", str(exp), "-o", str(out)).code == 0
    ran = run_bash(out / "t.local.sh")
    assert ran.returncode == 0 and ran.stdout == "production /x\n", ran


PBS_SITE = """\
name: pbsforbid
scheduler: {scheduler}
forbidden_directives: [mem, partition, A]
partitions:
  workq: {{max_walltime: 01:00:00, cpus_per_node: 8, memory_per_node: 8G}}
"""


@pytest.mark.parametrize(("scheduler", "directive", "hit"), [
    ("pbspro", "-lmem=4gb", "mem"),
    ("pbspro", "-l mem=4gb", "mem"),
    ("pbspro", "-lselect=1:mem=4gb", "mem"),
    ("pbspro", "-l select=1:ncpus=2:mem=4gb", "mem"),
    ("pbspro", "-l select=1:ncpus=2+1:ncpus=1:mem=1gb", "mem"),
    ("pbspro", "-l walltime=00:10:00,mem=4gb", "mem"),
    ("pbspro", "-Aproj", "A"),
    ("torque", "-l nodes=1:ppn=2,mem=4gb", "mem"),
    ("slurm", "--mem=4G", "mem"),
    ("slurm", "--mem 4G", "mem"),
    ("slurm", "--me=4G", "mem"),
    ("slurm", "-p workq", "partition"),
    ("slurm", "-pworkq", "partition"),
    ("slurm", "--parti=workq", "partition"),
    ("slurm", "--time=10 --mem=4G", "mem"),
])
def test_forbidden_directive_spellings(tmp_path: Path, scheduler: str, directive: str, hit: str):
    site = write(tmp_path / "site.yaml", PBS_SITE.format(scheduler=scheduler))
    exp = write(tmp_path / "e.yaml", f"name: t\ncommand: 'true'\ndirectives: [{json.dumps(directive)}]\n")
    assert_refused(cli("render", str(exp), "--site", str(site)), exp, "does not accept the directive", hit)


def test_allowed_directives_pass_and_forbidden_site_extras_are_dropped(tmp_path: Path):
    site = write(tmp_path / "site.yaml", PBS_SITE.format(scheduler="pbspro")
                 + "directives: ['-lmem=2gb', '-l place=pack']\n")
    exp = write(tmp_path / "e.yaml", "name: t\ncommand: 'true'\nresources: {memory: 4G}\n"
                                     "directives: ['-l software=abc', '-m abe']\n")
    result = cli("render", str(exp), "--site", str(site))
    assert result.code == 0, result.output
    assert "mem=" not in result.output and "-lmem" not in result.output
    assert "#PBS -l place=pack" in result.output and "#PBS -l software=abc" in result.output
    assert bash_n(result.output).returncode == 0


def test_directive_names_by_hand():
    assert directive_names("-lselect=2:ncpus=4:mem=4gb+1:ngpus=1") == {"l", "select", "ncpus", "mem", "ngpus"}
    assert directive_names("-l walltime=1:00:00,mem=4gb") == {"l", "walltime", "mem"}
    assert directive_names("-p gpu", "slurm") == {"p", "partition"}
    assert directive_names("--mem-per-cpu=2G") == {"mem-per-cpu"}
    assert forbidden_in("--mem-per-cpu=2G", ["mem"], "slurm") == set()
    assert forbidden_in("--mem-per-cpu=2G", ["mem-per-cpu"], "slurm") == {"mem-per-cpu"}


BROKEN_SITE = """\
name: broken
scheduler: slurm
default_qos: normal
prologue:
  - 'if true; then'
epilogue:
  - 'echo "unterminated'
partitions:
  a: {{qos: [high, low]}}
  b: {{qos: [normal]}}
{extra}"""


def test_site_validate_runs_bash_and_checks_default_qos(tmp_path: Path):
    site = write(tmp_path / "broken.yaml", BROKEN_SITE.format(extra=""))
    result = cli("site", "validate", str(site))
    assert_refused(result, site, "default_qos 'normal' is not allowed on partition 'a'", "prologue: not valid bash",
                   "epilogue: not valid bash", "test render on partition 'a': the script is not valid bash")
    assert f"{site}:3:" in result.output and f"{site}:4:" in result.output and f"{site}:6:" in result.output
    assert f"ok  {site}" not in result.output


def test_site_validate_bash_checks_the_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    templates = tmp_path / "templates" / "sites"
    templates.mkdir(parents=True)
    write(templates / "bad.sh.j2", '{% extends "slurm.sh.j2" %}\n{% block footer %}\ndone\n{% endblock %}\n')
    monkeypatch.setenv("HPCJOBS_TEMPLATE_PATH", str(tmp_path / "templates"))
    site = write(tmp_path / "s.yaml", "name: tpl\nscheduler: slurm\ntemplate: sites/bad.sh.j2\n"
                                      "partitions: {a: {}}\n")
    assert_refused(cli("site", "validate", str(site)), site, "the script is not valid bash")


def test_missing_site_template_names_the_site_file_and_line(tmp_path: Path):
    site = write(tmp_path / "s.yaml", "name: tpl\nscheduler: slurm\npartitions: {a: {}}\ntemplate: sites/nope.sh.j2\n")
    exp = write(tmp_path / "e.yaml", "name: t\ncommand: 'true'\n")
    result = cli("render", str(exp), "--site", str(site))
    assert_refused(result, site, "'sites/nope.sh.j2' not found")
    assert f"{site}:4:1" in result.output and "  -:" not in result.output
    assert_refused(cli("site", "validate", str(site)), site, "'sites/nope.sh.j2' not found")


def test_shipped_and_test_sites_still_validate():
    files = sorted(str(p) for p in [*(ROOT / "site-configs").glob("*.yaml"), *SITES.glob("*.yaml")])
    result = cli("site", "validate", *files)
    assert result.code == 0, result.output
    assert result.output.count("ok  ") == len(files)
