"""Jobs of several nodes on Kubernetes, offline: the manifests (golden, both Job forms), the chunk's
name, and the status of captured ``kubectl get jobs,pods -o json`` output (``tests/data/kubernetes/``,
see SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcjobs import states as st
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.kubernetes import formats as fmt
from hpcjobs.schedulers.kubernetes.backend import KubernetesBackend
from hpcjobs.states import JobTag

TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data" / "kubernetes"
SITE = str(TESTS / "sites" / "k8s-dist.yaml")
GOLDEN = TESTS / "golden" / "distributed" / "k8s-dist"
TORCHRUN = ("name: ddp\nresources: {nodes: 2, tasks_per_node: 2, cpus_per_task: 1, memory: 1G, walltime: 10m}\n"
            "launch: {launcher: torchrun, program: allreduce.py, args: [--steps, '3']}\n")
TAG = JobTag("ddp", 0, "0123456789abcdef")


def _manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              version: tuple[int, int] | None) -> tuple[str, dict[str, Any]]:
    monkeypatch.setattr("os.getuid", lambda: 1000)
    monkeypatch.setattr("os.getgid", lambda: 1000)
    tmp_path.mkdir(parents=True, exist_ok=True)
    exp = tmp_path / "e.yaml"
    exp.write_text(TORCHRUN)
    text = render_experiment(exp, site=SITE).text
    work = tmp_path / "project"
    script = work / "hpcjobs-logs" / "scripts" / "ddp.0123456789abcdef.sh"
    script.parent.mkdir(parents=True)
    script.write_text(text)
    argv = KubernetesBackend().submit_argv_in(script, SubmitOptions(comment=TAG.render()), work,
                                              server_version=version)
    path = Path(argv[argv.index("-f") + 1])
    return text, json.loads(path.read_text().replace(str(tmp_path), "/home/user"))


@pytest.mark.parametrize(("form", "version"), [("per-rank", (1, 20)), ("indexed", (1, 29))])
def test_golden_manifests(form: str, version: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          update_golden: bool) -> None:
    script, doc = _manifest(tmp_path, monkeypatch, version)
    outputs = {GOLDEN / f"ddp-torchrun.{form}.json": json.dumps(doc, indent=1, sort_keys=True) + "\n",
               GOLDEN / "ddp-torchrun.sh": script}
    for golden, text in outputs.items():
        if update_golden:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(text)
            continue
        assert golden.exists(), f"no golden file {golden}; run pytest {__file__} --update-golden"
        assert text == golden.read_text(), f"{golden} differs; if intended, regenerate with --update-golden"


def test_the_pods_of_one_point_run_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, per_rank = _manifest(tmp_path / "a", monkeypatch, (1, 20))
    names = [j["metadata"]["name"] for j in per_rank["items"]]
    assert names == ["ddp-x-0-2n-0123456789abcdef-0", "ddp-x-0-2n-0123456789abcdef-1"]
    for i, job in enumerate(per_rank["items"]):
        env = job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "HPCJOBS_K8S_INDEX", "value": str(i)} in env
        assert {"name": "HPCJOBS_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in env
        assert job["spec"]["backoffLimit"] == 0
    _, indexed = _manifest(tmp_path / "b", monkeypatch, (1, 29))
    spec = indexed["spec"]
    assert indexed["metadata"]["name"] == "ddp-x-0-2ni-0123456789abcdef"
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (2, 2, 0)
    assert "backoffLimitPerIndex" not in spec  # one failed rank fails the job


def test_chunk_names() -> None:
    chunk = fmt.chunk_name(TAG, 2, nodes=2)
    assert chunk == "ddp-x-0-2n-0123456789abcdef"
    assert fmt.nodes_in_name(chunk) == 2 and fmt.tasks_in_name(chunk) == (2, False)
    assert fmt.job_names(chunk) == [f"{chunk}-0", f"{chunk}-1"]
    assert fmt.nodes_in_name(fmt.chunk_name(TAG, 2, True, nodes=2)) == 2
    assert fmt.nodes_in_name(fmt.chunk_name(TAG, 6)) == 1


def test_what_is_refused(tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text("name: a\nresources: {nodes: 2}\nlaunch: {launcher: deepspeed, program: t.py}\n")
    with pytest.raises(ConfigError, match="ssh or an MPI"):
        render_experiment(exp, site=SITE)


JOB = "default/dok-e77884dc-0-2n-7cb1cf74eb0202ce"


@pytest.mark.parametrize(("name", "state", "raw", "code"), [
    ("get-jobs-pods-2-node-pending.json", st.PENDING, "0 of 2 ranks started", None),
    ("get-jobs-pods-2-node-running.json", st.RUNNING, "2 of 2 ranks running, 0 completed", None),
    ("get-jobs-pods-2-node-complete.json", st.COMPLETED, "all 2 ranks completed", 0),
])
def test_a_distributed_job_is_one_record(name: str, state: str, raw: str, code: int | None) -> None:
    [rec] = fmt.parse_get((DATA / name).read_text())
    assert (rec.job_id, rec.state, rec.state_raw, rec.exit_code) == (JOB, state, raw, code)


def test_a_failed_rank_fails_the_job() -> None:
    [rec] = fmt.parse_get((DATA / "get-jobs-pods-2-node-rank1-failed.json").read_text())
    assert (rec.job_id, rec.state, rec.exit_code) == ("default/dfail-1a6de759-0-2n-3a40e72d7c923cd1", st.FAILED, 5)
    assert rec.state_raw == "rank 1 of 2: BackoffLimitExceeded"


def test_every_pod_runs_at_once_whatever_max_parallel_says(tmp_path: Path) -> None:
    site = tmp_path / "one-at-a-time.yaml"
    site.write_text(Path(SITE).read_text() + "  max_parallel: 1\n")
    exp = tmp_path / "e.yaml"
    exp.write_text("name: p\nresources: {nodes: 2, cpus_per_task: 1}\ncommand: 'true'\n")
    script = render_experiment(exp, site=str(site)).text
    assert "#K8S tasks=2\n" in script and "#K8S parallel=2\n" in script and "#K8S nodes=2\n" in script
