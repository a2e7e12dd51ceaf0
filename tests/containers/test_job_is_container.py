"""On Docker Swarm and Kubernetes the experiment's ``container:`` is the job's container, offline.

Its image replaces the site's in the service's argv and the Job's manifest; its mounts are accepted
only where the site's ``swarm:``/``kubernetes:`` section already mounts that container path; a file or
bundle image, another mount, ``workdir``, an ``env:`` list and a ``runtime`` are refused with the
experiment file's line, exit 2, before anything is written. The cases are every platform × every
accepted image and every refusal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcjobs.config.sites import load_site_file
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.kubernetes.backend import KubernetesBackend
from hpcjobs.schedulers.swarm.backend import SwarmBackend
from hpcjobs.states import JobTag

ROOT = Path(__file__).resolve().parents[2]
SITES = {"swarm": ROOT / "tests" / "sites" / "swarm-dist.yaml",
         "kubernetes": ROOT / "tests" / "sites" / "k8s-dist.yaml"}
TAG = JobTag("ctr", 0, "0123456789abcdef")
IMAGES = [("docker://nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"),
          ("python:3.12-slim", "python:3.12-slim"),
          ("registry.example.org:5000/team/train@sha256:" + "a" * 64, "registry.example.org:5000/team/train@sha256:"
           + "a" * 64)]
#: (container: lines, the key refused, a phrase of the message); line 4 of the file is the refused key's.
REFUSED = [
    ("  image: /scratch/images/py.sif", "image", "is a file or bundle folder"),
    ("  image: ~/enroot/py.sqsh", "image", "is a file or bundle folder"),
    ("  image: /scratch/bundles/py", "image", "is a file or bundle folder"),
    ("  image: docker://ubuntu:24.04\n  mounts: [/scratch]", "mounts.0", "choices: /usr, /etc"),
    ("  image: docker://ubuntu:24.04\n  mounts: ['/usr', '~/data:/data:ro']", "mounts.1", "'/data' is not one"),
    ("  image: docker://ubuntu:24.04\n  workdir: /workspace", "workdir", "runs in the submit folder"),
    ("  image: docker://ubuntu:24.04\n  env: [LR]", "env", "remove the env: list"),
    ("  image: docker://ubuntu:24.04\n  runtime: apptainer", "runtime", "every job is a container already"),
]


def _experiment(tmp: Path, container: str) -> Path:
    path = tmp / "exp.yaml"
    path.write_text(f"name: ctr\ncommand: echo hi\ncontainer:\n{container}\n", encoding="utf-8")
    return path


def _script(tmp: Path, platform: str, container: str) -> tuple[Path, Path]:
    text = render_experiment(_experiment(tmp, container), site=str(SITES[platform])).text
    work = tmp / "project"
    script = work / "hpcjobs-logs" / "scripts" / "ctr.0123456789abcdef.sh"
    script.parent.mkdir(parents=True)
    script.write_text(text, encoding="utf-8")
    return work, script


def _image_run(tmp: Path, platform: str, container: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The image the submission would run: the service argv's, or the manifest's container's."""
    work, script = _script(tmp, platform, container)
    options = SubmitOptions(comment=TAG.render())
    if platform == "swarm":
        argv = SwarmBackend().submit_argv_in(script, options, work)
        return argv[argv.index("/bin/bash") - 1]
    monkeypatch.setattr("os.getuid", lambda: 1000)
    monkeypatch.setattr("os.getgid", lambda: 1000)
    argv = KubernetesBackend().submit_argv_in(script, options, work, server_version=(1, 29))
    doc = json.loads(Path(argv[argv.index("-f") + 1]).read_text())
    items = doc.get("items", [doc])
    images = {c["image"] for item in items for c in item["spec"]["template"]["spec"]["containers"]}
    assert len(images) == 1, images
    return images.pop()


@pytest.mark.parametrize("platform", sorted(SITES))
@pytest.mark.parametrize(("image", "expected"), IMAGES, ids=["docker", "name-tag", "digest"])
def test_the_experiments_image_replaces_the_sites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str,
                                                  image: str, expected: str) -> None:
    assert _image_run(tmp_path, platform, f"  image: {image}\n  mounts: [/usr, '/etc:/etc:ro']",
                      monkeypatch) == expected


@pytest.mark.parametrize("platform", sorted(SITES))
def test_without_a_container_the_sites_image_runs(tmp_path: Path, platform: str) -> None:
    site_image = getattr(load_site_file(SITES[platform]), platform).image
    _work, script = _script(tmp_path, platform, "  image: python:3.12-slim")
    exp = tmp_path / "plain.yaml"
    exp.write_text("name: ctr\ncommand: echo hi\n", encoding="utf-8")
    plain = render_experiment(exp, site=str(SITES[platform])).text
    assert f"image={site_image}\n" in plain and "python:3.12-slim" not in plain
    assert f"image={site_image}\n" not in script.read_text() and "image=python:3.12-slim\n" in script.read_text()


@pytest.mark.parametrize("platform", sorted(SITES))
@pytest.mark.parametrize(("container", "key", "phrase"), REFUSED, ids=[f"{k}-{i}" for i, (_, k, _) in
                                                                       enumerate(REFUSED)])
def test_what_cannot_be_the_jobs_container_exits_2_at_its_line(tmp_path: Path, platform: str, container: str,
                                                               key: str, phrase: str) -> None:
    path = _experiment(tmp_path, container)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "hpcjobs", "render", str(path), "--site", str(SITES[platform])],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    line = 4 if key == "image" else 5
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: container\.{re.escape(key)}: ", proc.stderr), proc.stderr
    assert phrase in proc.stderr and "Traceback" not in proc.stderr
    assert not proc.stdout
