"""Every container runtime × every scheduler: rendered where the scheduler hosts it and the site lists it, else refused.

A runtime is accepted exactly when the site's backend can host it (``capabilities.container_runtimes``)
and the site's ``containers.runtimes`` lists it; a refusal names the experiment file's line and the
runtimes the site offers. A site file that lists a runtime its scheduler cannot host is refused
when it is loaded.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from hpcjobs.config.container import CONTAINER_RUNTIMES, ContainerSpec
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import load_checked_site, render_experiment
from hpcjobs.schedulers.registry import capabilities_of, get_backend

ROOT = Path(__file__).resolve().parents[2]
SITES = {"containers-slurm": ROOT / "tests" / "sites" / "containers-slurm.yaml",
         "containers-pbs": ROOT / "tests" / "sites" / "containers-pbs.yaml",
         "swarm-dist": ROOT / "tests" / "sites" / "swarm-dist.yaml",
         "k8s-dist": ROOT / "tests" / "sites" / "k8s-dist.yaml",
         "local": ROOT / "site-configs" / "local.yaml"}
IMAGE = {"oci": "/scratch/bundles/py", "pyxis": "docker://ubuntu:24.04"}
CASES = [(site, runtime) for site in SITES for runtime in CONTAINER_RUNTIMES]


def _experiment(tmp: Path, runtime: str) -> Path:
    path = tmp / "exp.yaml"
    path.write_text(f"name: ctr\ncommand: echo hi\ncontainer:\n  image: {IMAGE.get(runtime, 'docker://ubuntu:24.04')}\n"
                    f"  runtime: {runtime}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("site", "runtime"), CASES, ids=["-".join(c) for c in CASES])
def test_runtime_is_rendered_exactly_where_site_and_scheduler_have_it(tmp_path: Path, site: str,
                                                                      runtime: str) -> None:
    config = load_site_file(SITES[site])
    listed = set(config.containers.runtimes) if config.containers else set()
    hosted = capabilities_of(config.scheduler).container_runtimes
    path = _experiment(tmp_path, runtime)
    if runtime in listed and runtime in hosted:
        text = render_experiment(path, site=str(SITES[site])).text
        assert "# Container (" + runtime + ")" in text
        return
    with pytest.raises(ConfigError) as info:
        render_experiment(path, site=str(SITES[site]))
    message = str(info.value)
    assert re.search(rf"{re.escape(str(path))}:5:\d+: container.runtime", message), message
    if get_backend(config.scheduler).job_container_problems(config, ContainerSpec(image="ubuntu:24.04")) is not None:
        assert "every job is a container already" in message  # Swarm, Kubernetes: the job's image is the container
        return
    offered = sorted(listed & hosted)
    assert ("choices: " + ", ".join(r for r in config.containers.runtimes if r in hosted)) in message if offered \
        else "offers no container runtime" in message


@pytest.mark.parametrize("site", ["containers-pbs", "swarm-dist", "local"])
def test_a_site_listing_a_runtime_its_scheduler_cannot_host_is_refused(tmp_path: Path, site: str) -> None:
    doc = yaml.safe_load(SITES[site].read_text())
    doc["containers"] = {"runtimes": {"apptainer": {}, "pyxis": {}}}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"containers.runtimes: .*pyxis.* cannot run under"):
        load_checked_site(path)


def test_a_mount_outside_the_allowed_roots_is_refused_with_the_roots(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: ctr\ncommand: echo hi\ncontainer:\n  image: docker://ubuntu:24.04\n"
                    "  mounts: [/scratch/ok, /etc:/host-etc]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        render_experiment(path, site=str(SITES["containers-slurm"]))
    assert re.search(r"exp\.yaml:5:\d+: container\.mounts\.1: mount source '/etc' is outside", str(info.value))
    assert "allowed roots: /scratch, /datasets, ~" in str(info.value)


@pytest.mark.parametrize("runtimes", [["apptainer"], ["apptainer", "pyxis"], ["podman", "pyxis", "singularity"]])
def test_slurm_oci_is_rendered_only_where_the_site_declares_it(tmp_path: Path, runtimes: list[str]) -> None:
    """Slurm 22.05 accepts ``--container`` and ignores it on a node without ``oci.conf``: the site must list ``oci``."""
    doc = yaml.safe_load(SITES["containers-slurm"].read_text())
    doc["containers"] = {"runtimes": {r: {} for r in runtimes}}
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(doc), encoding="utf-8")
    path = _experiment(tmp_path, "oci")
    with pytest.raises(ConfigError) as info:
        render_experiment(path, site=str(site))
    assert "choices: " + ", ".join(runtimes) in str(info.value)
    auto = tmp_path / "auto.yaml"
    auto.write_text("name: ctr\ncommand: echo hi\ncontainer:\n  image: docker://ubuntu:24.04\n", encoding="utf-8")
    assert "--container=" not in render_experiment(auto, site=str(site)).text
