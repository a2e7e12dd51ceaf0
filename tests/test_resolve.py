"""A request against a site's limits: partition choice, defaults, and errors that name the way out."""

from pathlib import Path

import pytest

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.loading import load_experiment
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError
from hpcjobs.resolve import directive_names, resolve

SITES = Path(__file__).parent / "sites"


@pytest.fixture
def site():
    return load_site_file(SITES / "gpusite.yaml")


def exp(**kw):
    kw.setdefault("name", "t")
    kw.setdefault("command", "true")
    return Experiment.model_validate(kw)


def test_default_partition_and_defaults(site):
    job = resolve(exp(), site)
    assert job.partition == "cpu"
    assert job.walltime == 3600  # the partition's default_walltime
    assert job.account == "proj1"
    assert dict(job.environment)["OMP_NUM_THREADS"] == "1"


def test_gpu_request_picks_a_partition_that_fits(site):
    job = resolve(exp(resources={"gpus_per_node": 2, "gpu_type": "a100"}), site)
    assert job.partition == "gpu"
    assert "--constraint=gpu" in job.extra_directives


def test_big_memory_picks_bigmem(site):
    assert resolve(exp(resources={"memory": "512G"}), site).partition == "bigmem"


def test_too_many_gpus_names_limit_and_fitting_partitions(site, tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("name: t\ncommand: x\npartition: gpu\nresources:\n  gpus_per_node: 8\n")
    experiment, doc = load_experiment(f)
    with pytest.raises(ConfigError) as info:
        resolve(experiment, site, doc=doc, site_file="gpusite.yaml")
    (p,) = info.value.problems
    assert p.file == str(f) and p.line == 5 and p.key == "resources.gpus_per_node"
    assert "8 GPUs per node requested, the limit is 4" in p.message
    assert "no partition of this site fits" in p.message


def test_walltime_over_limit_lists_partitions_that_fit(site):
    with pytest.raises(ConfigError) as info:
        resolve(exp(partition="gpu", resources={"walltime": "1-00:00:00"}), site)
    (p,) = info.value.problems
    assert "the limit is 12:00:00" in p.message
    assert "partitions that would fit: cpu, bigmem" in p.message


def test_gpu_type_not_on_partition(site):
    with pytest.raises(ConfigError, match=r"GPU type 'h100' is not available \(available: a100, v100\)"):
        resolve(exp(partition="gpu", resources={"gpus_per_node": 1, "gpu_type": "h100"}), site)


def test_memory_and_cpus_over_node(site):
    with pytest.raises(ConfigError) as info:
        resolve(exp(partition="cpu", resources={"memory": "200G", "tasks_per_node": 8, "cpus_per_task": 8}), site)
    msgs = " | ".join(p.message for p in info.value.problems)
    assert "200G per node requested, the limit is 128G" in msgs
    assert "64 CPUs per node requested" in msgs and "the limit is 32" in msgs


def test_unknown_partition_lists_choices(site):
    with pytest.raises(ConfigError) as info:
        resolve(exp(partition="gpus"), site)
    (p,) = info.value.problems
    assert tuple(p.choices) == ("cpu", "gpu", "bigmem")


def test_unknown_account(site):
    with pytest.raises(ConfigError) as info:
        resolve(exp(account="nope"), site)
    assert info.value.problems[0].choices == ("proj1", "proj2")


def test_forbidden_directive_refused(site):
    with pytest.raises(ConfigError, match="does not accept the directive"):
        resolve(exp(directives=["--exclusive"]), site)


def test_directive_names():
    assert directive_names("--mem=4G") == {"mem"}
    assert directive_names("-l select=1:ncpus=4:mem=4gb") == {"l", "select", "ncpus", "mem"}
    assert directive_names("-A proj") == {"A"}


def test_local_site_has_no_partitions():
    local = load_site_file(Path(__file__).parent.parent / "site-configs" / "local.yaml")
    assert resolve(exp(), local).partition is None
    with pytest.raises(ConfigError, match="has no partitions"):
        resolve(exp(partition="gpu"), local)
