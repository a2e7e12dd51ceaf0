"""The Kubernetes parsers, argv builders and manifests, on output captured from the real testbed
(``tests/data/kubernetes/``, see SOURCES.md) and golden manifests (``tests/golden/kubernetes-manifests/``).

No cluster needed: the values below are read off the captured files by hand.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hpcjobs import states as st
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError, SchedulerOutputError
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.kubernetes import formats as fmt
from hpcjobs.schedulers.kubernetes.backend import KubernetesBackend, read_directives
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.states import JobTag

DATA = Path(__file__).resolve().parent.parent / "data" / "kubernetes"
ROOT = Path(__file__).resolve().parent.parent.parent
GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "kubernetes-manifests"
CAPK = "default/capk-c3165f35-0-6-bb3e499817a3c850"
CAPKC = "default/capkc-77321fa4-0-4-fe2faab8a053ad32"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _states(records: list) -> dict[int, tuple]:
    return {r.array_task_id: (r.state, r.exit_code) for r in records}


def test_points_of_one_job_each_while_two_wait() -> None:
    records = fmt.parse_get(_read("get-jobs-pods-6-points-two-pending.json"))
    assert {r.array_job_id for r in records} == {CAPK}
    assert _states(records) == {0: (st.COMPLETED, 0), 1: (st.COMPLETED, 0), 2: (st.COMPLETED, 0),
                                3: (st.FAILED, 7), 4: (st.PENDING, None), 5: (st.PENDING, None)}
    failed = next(r for r in records if r.array_task_id == 3)
    assert (failed.state_raw, failed.reason, failed.job_id) == ("BackoffLimitExceeded", "Error", f"{CAPK}.3")


def test_finished_chunk_with_a_failed_point() -> None:
    records = fmt.parse_get(_read("get-jobs-pods-6-points-point3-failed.json"))
    assert _states(records) == {0: (st.COMPLETED, 0), 1: (st.COMPLETED, 0), 2: (st.COMPLETED, 0),
                                3: (st.FAILED, 7), 4: (st.COMPLETED, 0), 5: (st.COMPLETED, 0)}


def test_cancel_keeps_the_finished_point_and_cancels_the_rest() -> None:
    before = fmt.parse_get(_read("get-jobs-pods-4-points-before-cancel.json"))
    assert _states(before) == {0: (st.COMPLETED, 0), 1: (st.RUNNING, None), 2: (st.RUNNING, None),
                               3: (st.PENDING, None)}
    after = fmt.parse_get(_read("get-jobs-pods-cancelled.json"))
    assert {r.array_job_id for r in after} == {CAPKC}
    # pods 1 and 2 are still terminating (phase Running) and pod 3 is gone: the Jobs' annotation decides
    assert _states(after) == {0: (st.COMPLETED, 0), 1: (st.CANCELLED, None), 2: (st.CANCELLED, None),
                              3: (st.CANCELLED, None)}


def _indexed(items: list[dict]) -> list[dict]:
    """The captured per-point chunk recast as one Indexed Job (constructed: 1.20 cannot run one): the
    Jobs become one Job without an index label, the pods carry the completion-index annotation."""
    jobs = [i for i in items if i["kind"] == "Job"]
    job = copy.deepcopy(jobs[0])
    job["metadata"]["labels"].pop("hpcjobs/index")
    job["status"] = {"active": 1}
    pods = []
    for pod in (copy.deepcopy(i) for i in items if i["kind"] == "Pod"):
        index = pod["metadata"]["labels"].pop("hpcjobs/index")
        pod["metadata"].setdefault("annotations", {})[fmt.COMPLETION_INDEX_ANNOTATION] = index
        pods.append(pod)
    return [job, *pods]


def test_points_of_an_indexed_job_come_from_its_pods() -> None:
    items = _indexed(fmt.parse_list(_read("get-jobs-pods-6-points-point3-failed.json")))
    assert _states(fmt.job_statuses(items)) == {0: (st.COMPLETED, 0), 1: (st.COMPLETED, 0), 2: (st.COMPLETED, 0),
                                                3: (st.FAILED, 7), 4: (st.COMPLETED, 0), 5: (st.COMPLETED, 0)}
    running = _indexed(fmt.parse_list(_read("get-jobs-pods-4-points-before-cancel.json")))
    running[0]["metadata"]["annotations"][fmt.CANCELLED_ANNOTATION] = "true"
    assert _states(fmt.job_statuses(running))[1] == (st.CANCELLED, None)
    running[0]["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}
    del running[0]["metadata"]["annotations"][fmt.CANCELLED_ANNOTATION]
    assert _states(fmt.job_statuses(running)) == {0: (st.COMPLETED, 0), 1: (st.TIMEOUT, None),
                                                  2: (st.TIMEOUT, None), 3: (st.TIMEOUT, None)}


def test_tag_query_gives_one_pair_per_chunk() -> None:
    pairs = fmt.parse_tagged_jobs(_read("get-jobs-tag-query.json"))
    assert pairs == [(CAPK, "hpcjobs:capk-c3165f35:0:bb3e499817a3c850")]


def test_garbage_is_an_error() -> None:
    with pytest.raises(SchedulerOutputError):
        fmt.parse_get("No resources found in default namespace.\n")
    assert fmt.parse_get("") == []
    with pytest.raises(SchedulerOutputError):
        fmt.parse_created("error: no objects passed to create\n")
    assert fmt.parse_created("job.batch/a-0\njob.batch/a-1\n") == ["a-0", "a-1"]


def test_names_fit_and_read_back() -> None:
    assert fmt.chunk_name(JobTag("capk-c3165f35", 0, "bb3e499817a3c850"), 6) == "capk-c3165f35-0-6-bb3e499817a3c850"
    name = fmt.chunk_name(JobTag("My_Very.Long+Experiment-c3165f35", 12, "ab" * 8), 9999, indexed=True)
    assert name == "my-very-long-c3165f35-12-9999i-abababababababab"
    assert fmt.tasks_in_name(name) == (9999, True) and fmt.job_names(name) == [name]
    assert fmt.job_names("capk-c3165f35-0-3-bb3e499817a3c850") == [f"capk-c3165f35-0-3-bb3e499817a3c850-{i}"
                                                                   for i in range(3)]
    with pytest.raises(ValueError):
        fmt.chunk_name(JobTag("x", 10**20, "ab" * 8), 10**20)
    assert fmt.label_value("+weird@name.") == "weird_name"


def test_commands() -> None:
    backend = get_backend("kubernetes")
    assert backend.status_argv([CAPK, CAPKC]) == [
        "kubectl", "--namespace", "default", "get", "jobs,pods", "-l",
        "hpcjobs/chunk in (capk-c3165f35-0-6-bb3e499817a3c850,capkc-77321fa4-0-4-fe2faab8a053ad32)", "-o", "json"]
    assert backend.cancel_argv([CAPKC]) == [
        "kubectl", "--namespace", "default", "patch", "--type", "merge",
        "-p", '{"metadata":{"annotations":{"hpcjobs/cancelled":"true"}},"spec":{"parallelism":0}}',
        "--", "jobs", *(f"capkc-77321fa4-0-4-fe2faab8a053ad32-{i}" for i in range(4))]
    assert backend.tag_query_argvs("capk", "me") == [
        ["kubectl", "get", "jobs", "--all-namespaces", "-l", "hpcjobs/name=capk", "-o", "json"]]


# ------------------------------------------------------------------------------ manifests

def _gpu_site(tmp_path: Path) -> Path:
    site = tmp_path / "k8s-gpus.yaml"
    site.write_text(
        "name: k8s-gpus\nscheduler: kubernetes\ndefault_partition: a100\npartitions:\n"
        "  a100: {cpus_per_node: 32, memory_per_node: 256G, gpus_per_node: 4, gpu_types: [a100]}\n"
        "kubernetes:\n  namespace: ml\n  image: registry.example.org/ml/train:2.1\n"
        "  node_selector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}\n"
        "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
        "  priority_class: batch-low\n  service_account: trainer\n"
        "  volumes: [{claim: datasets, target: /data, readonly: true}]\n  max_parallel: 8\n  indexed_jobs: true\n")
    return site


EXAMPLES = [("k8s-testbed", "hello", 1), ("k8s-testbed", "sweep-grid", 3), ("gpus", "train-gpu", 1),
            ("gpus", "sweep-grid", 3)]


@pytest.mark.parametrize(("site", "example", "tasks"), EXAMPLES)
def test_golden_manifests(site: str, example: str, tasks: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          update_golden: bool) -> None:
    """The Jobs each example becomes (sweeps: a chunk of its first 3 points), with a fixed user and folder."""
    from hpcjobs.render.script import render_job
    from hpcjobs.sweep.prepare import array_job_for_chunk, prepare_sweep

    monkeypatch.setattr("os.getuid", lambda: 1000)
    monkeypatch.setattr("os.getgid", lambda: 1000)
    site_ref = str(_gpu_site(tmp_path)) if site == "gpus" else site
    work = tmp_path / "project"  # shown as /home/user/project
    if example.startswith("sweep"):
        prepared = prepare_sweep(ROOT / "examples" / f"{example}.yaml", site=site_ref, root=work / "hpcjobs-sweeps",
                                 submit_dir=work)
        text = render_job(array_job_for_chunk(prepared, 0, tasks, None)).text
        tag = JobTag(prepared.sweep_id, 0, "0123456789abcdef")
    else:
        text = render_experiment(ROOT / "examples" / f"{example}.yaml", site=site_ref).text
        tag = JobTag(example, 0, "0123456789abcdef")
    script = work / "hpcjobs-sweeps" / tag.sweep_id / "scripts" / "0.0123456789abcdef.sh"
    script.parent.mkdir(parents=True)
    script.write_text(text)
    argv = KubernetesBackend().submit_argv_in(script, SubmitOptions(comment=tag.render()), work)
    manifest = Path(argv[argv.index("-f") + 1])
    doc = json.loads(manifest.read_text().replace(str(tmp_path), "/home/user"))
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    golden = GOLDEN / site / f"{example}.json"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        return
    assert golden.exists(), f"no golden manifest {golden}; run pytest {__file__} --update-golden"
    assert text == golden.read_text(), f"{golden} differs; if intended, regenerate with --update-golden"


def test_rendered_settings_are_data(tmp_path: Path) -> None:
    text = render_experiment(ROOT / "examples" / "train-gpu.yaml", site=str(_gpu_site(tmp_path))).text
    script = tmp_path / "s.sh"
    script.write_text(text)
    settings = read_directives(script)
    assert settings["limits"] == {"cpu": "16", "memory": "65536Mi", "nvidia.com/gpu": "2"}
    assert settings["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert settings["indexed"] is True and settings["namespace"] == "ml"


def test_site_and_job_refusals(tmp_path: Path) -> None:
    site = tmp_path / "s.yaml"
    site.write_text("name: s\nscheduler: kubernetes\nkubernetes:\n  image: x\n  namespace: Not_A_Name\n")
    with pytest.raises(ConfigError, match="Kubernetes name"):
        load_site_file(site)
    site.write_text("name: s\nscheduler: kubernetes\nkubernetes:\n  image: x\n  volumes: [{target: /d}]\n")
    with pytest.raises(ConfigError, match="exactly one"):
        load_site_file(site)
    exp = tmp_path / "e.yaml"
    exp.write_text("name: s\ncommand: echo hi\nsecrets:\n  TOKEN: {env: HOME}\n")
    with pytest.raises(ConfigError, match="does not pass the submitter's environment"):
        render_experiment(exp, site="k8s-testbed")


@pytest.mark.parametrize("name", ["get-jobs-pods-deadline-pod-terminating-oomkilled.json",
                                  "get-jobs-pods-deadline-oomkilled-settled.json"])
def test_deadline_exceeded_is_timeout_and_oomkilled_out_of_memory(name: str) -> None:
    # point 0 slept past activeDeadlineSeconds (its pod still running, then deleted), point 1 outgrew 64Mi
    records = fmt.parse_get(_read(name))
    assert _states(records) == {0: (st.TIMEOUT, None), 1: (st.OUT_OF_MEMORY, 137)}
    assert {r.array_task_id: (r.state_raw, r.reason) for r in records} == {
        0: ("DeadlineExceeded", None), 1: ("BackoffLimitExceeded", "OOMKilled")}
