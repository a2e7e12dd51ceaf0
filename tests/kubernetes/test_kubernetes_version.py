"""The Job form chosen from the server's version (``kubectl version -o json``), and ``hpcjobs render``'s
manifest. The version outputs are captured from the real testbed (``tests/data/kubernetes/``, SOURCES.md);
no cluster needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.kubernetes import formats as fmt
from hpcjobs.schedulers.kubernetes.backend import KubernetesBackend
from hpcjobs.states import JobTag

DATA = Path(__file__).resolve().parent.parent / "data" / "kubernetes"
ROOT = Path(__file__).resolve().parent.parent.parent


def _version(minor: str) -> str:
    """The testbed's answer with another server minor version (managed clusters print ``"28+"``)."""
    data = json.loads((DATA / "version-1.20-testbed.json").read_text())
    data["serverVersion"]["minor"] = minor
    return json.dumps(data)


def test_server_versions_read_from_kubectl_version() -> None:
    assert fmt.parse_server_version((DATA / "version-1.20-testbed.json").read_text()) == (1, 20)
    # no server: kubectl prints only its own version (and exits 1)
    assert fmt.parse_server_version((DATA / "version-no-server.json").read_text()) is None
    assert fmt.parse_server_version("") is None and fmt.parse_server_version("not json") is None
    assert fmt.parse_server_version(_version("28+")) == (1, 28)
    assert fmt.parse_server_version(_version("29")) == (1, 29)
    assert [fmt.indexed_for(v) for v in (None, (1, 20), (1, 28), (1, 29), (2, 0))] == [False, False, False, True,
                                                                                       True]


class _FakeKubectl(SchedulerClient):
    """Answers ``kubectl version`` with ``version`` and ``kubectl create`` with the Jobs of its manifest."""

    def __init__(self, version: str) -> None:
        super().__init__(KubernetesBackend())
        self.version = version
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        self.argvs.append(list(argv))
        if argv[1] == "version":
            return CommandResult(tuple(argv), 0 if "serverVersion" in self.version else 1, self.version, "", 0.1)
        doc = json.loads(Path(argv[argv.index("-f") + 1]).read_text())
        names = [i["metadata"]["name"] for i in doc.get("items", [doc])]
        return CommandResult(tuple(argv), 0, "".join(f"job.batch/{n}\n" for n in names), "", 0.1)


def _script(tmp_path: Path, indexed: str) -> Path:
    script = tmp_path / "scripts" / "s.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/bash\n#K8S namespace=default\n#K8S image=img:1\n#K8S tasks=3\n#K8S indexed={indexed}\n"
                      "echo hi\n")
    return script


@pytest.mark.parametrize(("version", "indexed", "form"), [
    ("version-1.20-testbed.json", "null", "per point"),
    ("version-no-server.json", "null", "per point"),
    ("1.29", "null", "indexed"),
    ("1.29", "false", "per point"),  # the site's setting wins
    ("version-1.20-testbed.json", "true", "indexed"),
])
def test_the_form_follows_the_server_unless_the_site_sets_it(tmp_path: Path, version: str, indexed: str,
                                                             form: str) -> None:
    answer = _version("29") if version == "1.29" else (DATA / version).read_text()
    client = _FakeKubectl(answer)
    for chunk in (0, 1):  # two chunks of one sweep: the server is asked once
        tag = JobTag("exp-0123abcd", chunk, f"{chunk:016x}")
        job_id = client.submit(_script(tmp_path, indexed), SubmitOptions(comment=tag.render()), cwd=tmp_path)
        assert job_id.endswith(("-3i-" if form == "indexed" else "-3-") + f"{chunk:016x}")
    asked = [a for a in client.argvs if a[1] == "version"]
    assert asked == ([["kubectl", "version", "-o", "json"]] if indexed == "null" else [])


def test_render_prints_the_manifest_and_script_prints_the_script(tmp_path: Path) -> None:
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\nresources: {cpus_per_task: 1, memory: 128M, walltime: 5m}\ncommand: echo hi\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def render(*extra: str) -> str:
        res = subprocess.run([sys.executable, "-m", "hpcjobs", "render", str(exp), "--site", "k8s-testbed", *extra],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout
    doc = yaml.safe_load(render())
    (job,) = doc["items"]
    assert (doc["kind"], job["kind"], job["spec"]["activeDeadlineSeconds"]) == ("List", "Job", 300)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["/bin/bash", str(tmp_path / "hpcjobs-logs" / "scripts" /
                                                                 "one.0000000000000000.sh")]
    assert pod["containers"][0]["workingDir"] == str(tmp_path)
    script = render("--script")
    assert script.startswith("#!/bin/bash") and "#K8S indexed=null\n" in script
