"""Rendering: directives per scheduler, the template layers, strictness."""

from pathlib import Path

import pytest

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment, render_job
from hpcjobs.resolve import resolve
from hpcjobs.schedulers.base import ArraySpec

ROOT = Path(__file__).resolve().parent.parent


def _site(scheduler: str, **kw) -> SiteConfig:
    partitions = {} if scheduler == "local" else {"q": {"gpus_per_node": 4, "gpu_types": ["a100"]}}
    return SiteConfig.model_validate({"name": "s", "scheduler": scheduler, "partitions": partitions, **kw})


def _exp(**kw) -> Experiment:
    base = {"name": "job1", "command": "python run.py",
            "resources": {"nodes": 2, "tasks_per_node": 4, "cpus_per_task": 2, "gpus_per_node": 2,
                          "gpu_type": "a100", "memory": "16G", "walltime": "1-02:00:00"}}
    base.update(kw)
    return Experiment.model_validate(base)


def _directives(text: str, prefix: str) -> list[str]:
    return [line[len(prefix) + 1:] for line in text.splitlines() if line.startswith(prefix + " ")]


def test_slurm_directives():
    text = render_job(resolve(_exp(account="acct"), _site("slurm"))).text
    assert _directives(text, "#SBATCH") == [
        "--job-name=job1", "--partition=q", "--account=acct", "--nodes=2", "--ntasks-per-node=4",
        "--cpus-per-task=2", "--gres=gpu:a100:2", "--mem=16G", "--time=1-02:00:00",
        "--output=hpcjobs-logs/%x-%j.out", "--error=hpcjobs-logs/%x-%j.err",
    ]


def test_slurm_gpus_per_node_style_and_array():
    job = resolve(_exp(), _site("slurm", gpu_request="gpus-per-node"), array=ArraySpec(0, 99, throttle=10))
    d = _directives(render_job(job).text, "#SBATCH")
    assert "--gpus-per-node=a100:2" in d
    assert "--array=0-99%10" in d
    assert "--output=hpcjobs-logs/%x-%A_%a.out" in d


def test_pbspro_one_merged_select_line():
    text = render_job(resolve(_exp(account="acct"), _site("pbspro"))).text
    d = _directives(text, "#PBS")
    assert [x for x in d if x.startswith("-l select")] == [
        "-l select=2:ncpus=8:mpiprocs=4:ompthreads=2:ngpus=2:gpu_type=a100:mem=16gb"
    ]
    assert "-l walltime=26:00:00" in d
    assert "-l place=scatter" in d
    assert "-A acct" in d and "-q q" in d
    assert 'cd "${PBS_O_WORKDIR:-$PWD}"' in text


def test_torque_nodes_ppn_gpus():
    d = _directives(render_job(resolve(_exp(), _site("torque"))).text, "#PBS")
    assert "-l nodes=2:ppn=8:gpus=2:a100" in d
    assert "-l mem=32gb" in d  # Torque's mem is for the whole job: 2 nodes x 16G
    assert "-l walltime=26:00:00" in d


def test_forbidden_generated_directive_is_omitted():
    site = _site("slurm", forbidden_directives=["mem"])
    assert not [x for x in _directives(render_job(resolve(_exp(), site)).text, "#SBATCH") if x.startswith("--mem")]


def test_directives_come_before_any_command():
    text = render_job(resolve(_exp(), _site("slurm"))).text
    lines = text.splitlines()
    last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    first_code = min(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert last_directive < first_code


def test_user_template_dir_overrides_and_extends(tmp_path):
    (tmp_path / "slurm.sh.j2").write_text(
        '{% extends "base.sh.j2" %}\n{% block custom_content %}\necho custom {{ job.name }}\n{% endblock %}\n'
    )
    text = render_job(resolve(_exp(), _site("slurm")), template_dirs=(str(tmp_path),)).text
    assert "echo custom job1" in text
    assert "#SBATCH --job-name=job1" in text


def test_site_template_layer(tmp_path, monkeypatch):
    tdir = tmp_path / "templates" / "sites"
    tdir.mkdir(parents=True)
    (tdir / "mine.sh.j2").write_text(
        '{% extends "slurm.sh.j2" %}\n{% block footer %}\necho site footer\n{% endblock %}\n'
    )
    monkeypatch.setenv("HPCJOBS_TEMPLATE_PATH", str(tmp_path / "templates"))
    text = render_job(resolve(_exp(), _site("slurm", template="sites/mine.sh.j2"))).text
    assert text.rstrip().endswith("echo site footer")


def test_strict_undefined_is_an_error(tmp_path):
    (tmp_path / "slurm.sh.j2").write_text('{% extends "base.sh.j2" %}{% block footer %}{{ nope }}{% endblock %}')
    with pytest.raises(ConfigError, match="undefined"):
        render_job(resolve(_exp(), _site("slurm")), template_dirs=(str(tmp_path),))


def test_missing_template_is_a_config_error():
    with pytest.raises(ConfigError, match=r"template 'nope\.sh\.j2' not found"):
        render_job(resolve(_exp(), _site("slurm", template="nope.sh.j2")))


def test_prologue_epilogue_and_exit_status(tmp_path):
    import subprocess

    site = _site("local", prologue=["echo pro"], epilogue=["echo epi"])
    exp = Experiment.model_validate({"name": "j", "command": "echo body; exit 7"})
    script = tmp_path / "j.sh"
    script.write_text(render_job(resolve(exp, site)).text)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert proc.stdout.split() == ["pro", "body", "epi"]
    assert proc.returncode == 7  # the epilogue runs and the job's own status is kept


def test_render_experiment_example_on_local():
    r = render_experiment(ROOT / "examples" / "hello.yaml")
    assert r.job.site.name == "local"
    assert r.text.startswith("#!/bin/bash\n")


def test_site_detection_by_env_and_hostname(tmp_path, monkeypatch):
    from hpcjobs.config.sites import detect_site

    assert detect_site(hostname="derecho5.hpc.ucar.edu", env={}) == "derecho"
    assert detect_site(hostname="x", env={"SLURM_CLUSTER_NAME": "jean-zay"}) == "jean-zay"
    assert detect_site(hostname="laptop", env={}) == "local"
    assert detect_site(hostname="laptop", env={"HPCJOBS_SITE": "carbon"}) == "carbon"


def test_site_search_path_order(tmp_path, monkeypatch):
    from hpcjobs.config.sites import find_site, list_sites

    mine = tmp_path / "sites"
    mine.mkdir()
    (mine / "derecho.yaml").write_text("name: derecho\nscheduler: local\n")
    monkeypatch.setenv("HPCJOBS_SITE_PATH", str(mine))
    assert find_site("derecho") == mine / "derecho.yaml"
    entry = next(e for e in list_sites() if e.name == "derecho")
    assert entry.shadowed and entry.shadowed[0].name == "derecho.yaml"
    with pytest.raises(ConfigError, match="did you mean 'derecho'"):
        find_site("derekho")
    assert load_site_file(find_site("derecho")).scheduler == "local"


def test_directive_memo_sees_every_field_that_matters():
    import dataclasses

    site = _site("slurm")
    job = resolve(_exp(), site)
    a = render_job(job).text
    b = render_job(dataclasses.replace(job, walltime=60)).text
    c = render_job(dataclasses.replace(job, params={"lr": "1"})).text
    assert "--time=1-02:00:00" in a and "--time=00:01:00" in b
    assert _directives(a, "#SBATCH") == _directives(c, "#SBATCH")
    other = _site("slurm", gpu_request="gpus-per-node")  # another site object, same fields
    assert "--gpus-per-node=a100:2" in render_job(dataclasses.replace(job, site=other)).text
