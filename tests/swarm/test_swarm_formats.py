"""The Swarm parsers and argv builders on output captured from a real Swarm (``tests/data/swarm/``, see SOURCES.md).

No Docker needed: every value below is read off the captured files by hand.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from hpcjobs import states as st
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError, SchedulerOutputError
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.schedulers.swarm import formats as fmt
from hpcjobs.schedulers.swarm.backend import SwarmBackend, read_directives
from hpcjobs.states import JobTag

DATA = Path(__file__).resolve().parent.parent / "data" / "swarm"
ROOT = Path(__file__).resolve().parent.parent.parent
CAP = "cap-f6d56752-0-6-0825086bd9dfb5c5"
CAPC = "capc-946967f1-0-12-06235d7cf8465af2"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _by_slot(records: list) -> dict[int | str, tuple]:
    out: dict[int | str, tuple] = {}
    for r in records:
        key = r.array_task_id if r.array_task_id is not None else r.array_task_spec
        out[key] = (r.state, r.exit_code)
    return out


# ------------------------------------------------------------------------------ docker service ps

def test_running_and_pending_tasks_slot_zero_named_after_the_node() -> None:
    records = fmt.parse_service_ps(_read("ps-6-tasks-running.jsonl"))
    assert {r.array_job_id for r in records} == {CAP}
    assert _by_slot(records) == {0: (st.RUNNING, None), 1: (st.RUNNING, None), 2: (st.PENDING, None),
                                 3: (st.PENDING, None)}
    pending = next(r for r in records if r.array_task_id == 2)
    assert pending.reason == "no suitable node (insufficient resources on 1 node)"
    assert pending.job_id == f"{CAP}.2"
    # slot 0's task is printed as <service>.<node id>: its record is slot 0, not the node id
    assert next(r for r in records if r.array_task_id == 0).job_id == f"{CAP}.0"


@pytest.mark.parametrize("name", ["ps-6-tasks-slot3-failed.jsonl", "ps-6-tasks-slot3-failed.client-20.10.jsonl"])
def test_a_failed_slot_is_its_first_task_not_the_restart_that_found_the_claim(name: str) -> None:
    records = fmt.parse_service_ps(_read(name))
    assert _by_slot(records) == {0: (st.COMPLETED, 0), 1: (st.COMPLETED, 0), 2: (st.COMPLETED, 0),
                                 3: (st.FAILED, 7), 4: (st.COMPLETED, 0), 5: (st.COMPLETED, 0)}
    failed = next(r for r in records if r.array_task_id == 3)
    assert failed.state_raw == "Failed" and failed.reason == "task: non-zero exit (7)"


def test_tasks_in_printed_order_newest_first_within_a_slot() -> None:
    tasks = fmt.parse_tasks(_read("ps-6-tasks-slot3-failed.jsonl"))
    slot3 = [t for t in tasks if t.slot == 3]
    assert [t.state for t in slot3] == ["Complete", "Failed"]  # the restart is listed first
    assert slot3[1].exit_code == 7 and slot3[1].started_script


def test_cancelled_service_right_after_the_cancel() -> None:
    records = fmt.parse_service_ps(_read("ps-cancelled-at-once.jsonl"))
    assert _by_slot(records) == {0: (st.COMPLETED, 0), 1: (st.CANCELLED, None), 2: (st.CANCELLED, None),
                                 3: (st.CANCELLED, None), 4: (st.CANCELLED, None), "5-11": (st.CANCELLED, None)}
    assert {r.array_job_id for r in records} == {CAPC}


def test_cancelled_service_once_swarm_deleted_the_stopped_tasks() -> None:
    records = fmt.parse_service_ps(_read("ps-cancelled-settled.jsonl"))
    assert _by_slot(records) == {0: (st.COMPLETED, 0), "1-11": (st.CANCELLED, None)}
    whole = next(r for r in records if r.array_task_spec)
    assert whole.state_raw == "cancelled before it started" and whole.array_task_id is None


def test_the_refused_only_task_of_a_one_task_job_is_a_failure_swarm_does_not_retry() -> None:
    rec, plain = fmt.parse_service_ps(_read("ps-rejected-mount.jsonl"))
    reason = 'invalid mount config for type "bind": bind source path does not exist: /nonexistent/hpcjobs'
    assert (rec.state, rec.state_raw, rec.array_task_id) == (
        st.FAILED, f"Rejected: {reason} (Swarm starts no other task)", 0)
    assert rec.exit_code is None
    # a one-task service (a single job of `hpcjobs submit`) is also reported under its own name
    assert (plain.job_id, plain.array_job_id, plain.state) == (rec.array_job_id, None, st.FAILED)
    assert rec.reason == 'invalid mount config for type "bind": bind source path does not exist: /nonexistent/hpcjobs'


def _task_line(service: str, slot: int, current: str, desired: str, error: str = "") -> str:
    return json.dumps({"CurrentState": current, "DesiredState": desired, "Error": error, "ID": f"t{slot}{current[:3]}",
                       "Image": "hpcjobs-testbed/hostfs:1", "Name": f"{service}.{slot}.t{slot}{current[:3]}",
                       "Node": "vm", "Ports": ""})


def test_a_refused_slot_of_an_array_stays_pending_for_the_next_task_swarm_makes() -> None:
    service = "arr-x-0-3-00000000000000ab"
    lines = [_task_line(service, 0, "Rejected 3 minutes ago", "Shutdown", "assigned node no longer meets constraints"),
             _task_line(service, 1, "Running 1 minute ago", "Complete"),
             _task_line(service, 2, "Pending 3 minutes ago", "Complete")]
    records = fmt.parse_service_ps("\n".join(lines) + "\n")
    refused = next(r for r in records if r.array_task_id == 0)
    assert (refused.state, refused.state_raw) == (st.PENDING, "Rejected (Swarm retries)")
    assert refused.reason == "assigned node no longer meets constraints"


def test_a_one_task_job_refused_once_and_placed_again_is_what_its_new_task_is() -> None:
    service = "one-x-0-1-00000000000000ac"
    lines = [_task_line(service, 0, "Running 5 seconds ago", "Complete"),
             _task_line(service, 0, "Rejected 9 seconds ago", "Shutdown", "assigned node no longer meets constraints")]
    rec, plain = fmt.parse_service_ps("\n".join(lines) + "\n")
    assert (rec.state, plain.state) == (st.RUNNING, st.RUNNING)
    # while Swarm has not yet shut the refused task down it may still place it: pending
    line = _task_line(service, 0, "Rejected 1 second ago", "Complete", "no suitable node")
    pending = fmt.parse_service_ps(line + "\n")
    assert pending[0].state == st.PENDING


def test_unknown_services_are_named_on_stderr_and_the_others_listed() -> None:
    assert fmt.unknown_services(_read("ps-one-unknown.stderr")) == ["nope-x-0-1-0000000000000000"]
    assert fmt.unknown_services(_read("ps-all-unknown.stderr")) == ["nope-x-0-1-0000000000000000",
                                                                     "other-x-0-1-0000000000000001"]
    assert fmt.unknown_services("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.") is None
    backend = SwarmBackend()
    assert backend.tolerable_status_error(_read("ps-one-unknown.stderr"))
    assert not backend.tolerable_status_error("permission denied while trying to connect to the Docker daemon")
    assert len(backend.parse_status(_read("ps-one-unknown.stdout"))) == 6


def test_garbage_is_an_error_not_an_empty_answer() -> None:
    with pytest.raises(SchedulerOutputError):
        fmt.parse_service_ps("ID NAME IMAGE\n")
    with pytest.raises(SchedulerOutputError):
        fmt.parse_service_ps('{"CurrentState": "Running"}\n')
    assert fmt.parse_service_ps("") == []


# ------------------------------------------------------------------------------ names, tags, create

def test_tag_query_reads_the_tag_back_from_the_service_name() -> None:
    pairs = fmt.parse_tagged_services(_read("ls-tag-query.txt"))
    assert pairs == [(CAP, "hpcjobs:cap-f6d56752:0:0825086bd9dfb5c5")]


def test_service_name_of_a_sweep_chunk_and_of_a_single_job() -> None:
    assert fmt.service_name(JobTag("cap-f6d56752", 0, "0825086bd9dfb5c5"), 6) == CAP
    assert fmt.service_name(JobTag("hello", 0, "3cfa7571d8f498ca"), 1) == "hello-x-0-1-3cfa7571d8f498ca"
    long = fmt.service_name(JobTag("a.very+long@experiment.name-with-dots-0123456789-f6d56752", 12, "ab" * 8), 1000)
    assert long == "a-very-long-experime-f6d56752-12-1000-abababababababab" and len(long) <= 63
    assert fmt.parse_service_name(long, "a.very+long@experiment.name-with-dots-0123456789") == fmt.ServiceName(
        JobTag("a.very+long@experiment.name-with-dots-0123456789-f6d56752", 12, "ab" * 8), 1000)
    assert fmt.parse_service_name("hello-x-0-1-3cfa7571d8f498ca", "hello") == fmt.ServiceName(
        JobTag("hello", 0, "3cfa7571d8f498ca"), 1)
    assert fmt.parse_service_name("my-web-server", "my") is None


@given(name=hs.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.+@-]{0,40}", fullmatch=True),
       digest=hs.one_of(hs.none(), hs.from_regex(r"[0-9a-f]{8}", fullmatch=True)),
       chunk=hs.integers(0, 10**6), tasks=hs.integers(1, 10**6),
       token=hs.from_regex(r"[0-9a-f]{16}", fullmatch=True))
def test_service_names_are_valid_and_read_back(name: str, digest: str | None, chunk: int, tasks: int,
                                               token: str) -> None:
    sweep = f"{name}-{digest}" if digest else name
    experiment, _ = fmt.experiment_of(sweep)
    text = fmt.service_name(JobTag(sweep, chunk, token), tasks)
    assert len(text) <= fmt.MAX_SERVICE_NAME
    assert fmt.parse_service_name(text, experiment) == fmt.ServiceName(JobTag(sweep, chunk, token), tasks)


def test_create_prints_a_service_id() -> None:
    assert fmt.parse_service_create(_read("service-create.stdout")) == "5dartchrxcean2zuufvfgmk8e"
    with pytest.raises(SchedulerOutputError):
        fmt.parse_service_create(_read("service-create-name-conflict.stderr"))


# ------------------------------------------------------------------------------ rendering and argv

def _rendered(tmp_path: Path, example: str = "hello", overrides: tuple[str, ...] = ()) -> Path:
    text = render_experiment(ROOT / "examples" / f"{example}.yaml", site="swarm-testbed", overrides=overrides).text
    script = tmp_path / "sweep" / "scripts" / "0.0123456789abcdef.sh"
    script.parent.mkdir(parents=True)
    script.write_text(text)
    return script


def test_rendered_directives_are_the_service_options_one_argument_per_line(tmp_path: Path) -> None:
    options, image = read_directives(_rendered(tmp_path))
    assert image == "hpcjobs-testbed/hostfs:1"
    assert options[:4] == ["--mode=replicated-job", "--replicas=1", "--max-concurrent=1", "--restart-condition=none"]
    assert "--reserve-memory=512M" in options and "--limit-cpu=1" in options
    assert "--mount=type=bind,source=/usr,target=/usr,readonly" in options
    assert "--env=HPCJOBS_SWARM_SLOT={{.Task.Slot}}" in options
    assert "--label=hpcjobs.walltime=300" in options


def test_submit_argv_names_labels_mounts_and_runs_the_script(tmp_path: Path) -> None:
    script = _rendered(tmp_path)
    cwd = tmp_path / "work"
    tag = JobTag("hello-0badc0de", 3, "0123456789abcdef")
    argv = SwarmBackend().submit_argv_in(script, SubmitOptions(comment=tag.render()), cwd)
    assert argv[:7] == ["docker", "service", "create", "--detach", "--quiet", "--name",
                        "hello-0badc0de-3-1-0123456789abcdef"]
    assert argv[-3:] == ["hpcjobs-testbed/hostfs:1", "/bin/bash", str(script)]
    pairs = list(itertools.pairwise(argv))
    assert ("--label", "hpcjobs.tag=hpcjobs:hello-0badc0de:3:0123456789abcdef") in pairs
    assert ("--label", "hpcjobs.name=hello") in pairs
    assert ("--workdir", str(cwd)) in pairs
    mounts = [b for a, b in pairs if a == "--mount"]
    assert mounts == [f"type=bind,source={tmp_path / 'sweep'},target={tmp_path / 'sweep'}",
                      f"type=bind,source={cwd},target={cwd}"]
    assert ("--user", f"{os.getuid()}:{os.getgid()}") in pairs
    assert SwarmBackend().parse_submit_for(argv, "5dartchrxcean2zuufvfgmk8e\n") == "hello-0badc0de-3-1-0123456789abcdef"


def test_submit_needs_a_tag_and_one_image(tmp_path: Path) -> None:
    script = _rendered(tmp_path)
    with pytest.raises(ConfigError, match="tag"):
        SwarmBackend().submit_argv_in(script, SubmitOptions(), tmp_path)
    script.write_text(script.read_text().replace("#SWARM image=", "#SWARM --image-was="))
    with pytest.raises(ConfigError, match="needs exactly one"):
        read_directives(script)
    script.write_text("#!/bin/bash\n#SWARM replicas=3\n#SWARM image=x\n")
    with pytest.raises(ConfigError, match="neither an option"):
        read_directives(script)


def test_a_run_folder_docker_cannot_mount_is_refused(tmp_path: Path) -> None:
    script = _rendered(tmp_path)
    with pytest.raises(ConfigError, match="cannot bind-mount"):
        SwarmBackend().submit_argv_in(script, SubmitOptions(comment=JobTag("hello", 0, "ab" * 8).render()),
                                      tmp_path / "a,b")


def test_status_cancel_and_lookup_commands() -> None:
    backend = get_backend("swarm")
    assert backend.status_argv([CAP, CAPC]) == ["docker", "service", "ps", "--no-trunc", "--format", "{{json .}}",
                                                "--", CAP, CAPC]
    assert SwarmBackend().cancel_argvs([CAP]) == [[
        "docker", "service", "update", "--detach", "--quiet", "--no-resolve-image", "--image",
        "hpcjobs/cancelled:placeholder", "--constraint-add", "node.labels.hpcjobs-cancelled==true",
        "--label-add", "hpcjobs.cancelled=true", "--", CAP]]
    assert backend.cancel_argv([CAP, CAPC]) == ["docker", "service", "scale", "--detach", "--", f"{CAP}=0",
                                                f"{CAPC}=0"]
    assert SwarmBackend().tag_query_argvs("cap", "me") == [
        ["docker", "service", "ls", "--filter", "label=hpcjobs.name=cap", "--format", "cap\t{{json .}}"]]


def test_sweep_chunks_render_replicas_and_the_throttle(tmp_path: Path) -> None:
    from hpcjobs.render.script import render_job
    from hpcjobs.sweep.prepare import array_job_for_chunk, prepare_sweep

    exp = tmp_path / "e.yaml"
    exp.write_text("name: s\ncommand: echo $x\nsweep:\n  grid: {x: [1, 2, 3, 4, 5, 6, 7]}\n")
    prepared = prepare_sweep(exp, site="swarm-testbed", root=tmp_path / "sweeps")
    text = render_job(array_job_for_chunk(prepared, 0, 7, 2)).text
    assert "#SWARM --replicas=7\n#SWARM --max-concurrent=2\n" in text
    text = render_job(array_job_for_chunk(prepared, 0, 7, None)).text
    assert "#SWARM --max-concurrent=4\n" in text  # the site's max_parallel


def test_site_settings_are_validated(tmp_path: Path) -> None:
    site = tmp_path / "s.yaml"
    site.write_text("name: s\nscheduler: swarm\n")
    with pytest.raises(ConfigError, match="swarm"):
        load_site_file(site)
    site.write_text("name: s\nscheduler: swarm\nswarm:\n  image: x\n  mounts: [{source: 'rel/dir', target: /d}]\n")
    with pytest.raises(ConfigError, match="absolute"):
        load_site_file(site)
    site.write_text("name: s\nscheduler: swarm\nswarm:\n  image: x\n  constraints: ['gpu']\n")
    with pytest.raises(ConfigError, match="placement constraint"):
        load_site_file(site)
    site.write_text("name: s\nscheduler: slurm\nswarm:\n  image: x\n")
    with pytest.raises(ConfigError, match="swarm sites"):
        load_site_file(site)


def _gpu_site(tmp_path: Path) -> Path:
    site = tmp_path / "gpus.yaml"
    site.write_text(
        "name: gpus\nscheduler: swarm\ndefault_partition: a100\npartitions:\n"
        "  a100: {cpus_per_node: 32, memory_per_node: 256G, gpus_per_node: 4}\n"
        "swarm:\n  image: registry.example.org/ml/train:2.1\n  networks: [jobs]\n"
        "  constraints: ['node.labels.gpu == a100']\n  gpu_resource: NVIDIA-GPU\n"
        "  mounts: [{source: datasets, target: /data, type: volume, readonly: true}]\n"
        "  run_as: image\n  mount_run_folders: false\n")
    return site


def test_gpus_placement_networks_and_volumes(tmp_path: Path) -> None:
    job = render_experiment(ROOT / "examples" / "train-gpu.yaml", site=str(_gpu_site(tmp_path)))
    lines = [ln.split(" ", 1)[1] for ln in job.text.splitlines() if ln.startswith("#SWARM ")]
    assert "--generic-resource=NVIDIA-GPU=2" in lines
    assert "--constraint=node.labels.gpu == a100" in lines and "--network=jobs" in lines
    assert "--mount=type=volume,source=datasets,target=/data,readonly" in lines
    assert "--reserve-memory=64G" in lines and "--reserve-cpu=16" in lines
    assert "image=registry.example.org/ml/train:2.1" in lines and "--no-resolve-image" not in lines
    script = tmp_path / "s" / "scripts" / "0.ab.sh"
    script.parent.mkdir(parents=True)
    script.write_text(job.text)
    argv = SwarmBackend().submit_argv_in(script, SubmitOptions(comment=JobTag("train", 0, "ab" * 8).render()),
                                         tmp_path)
    assert "--user" not in argv and "--mount" not in argv  # run_as: image, mount_run_folders: false


def test_a_secret_from_the_environment_is_refused(tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text("name: s\ncommand: echo hi\nsecrets:\n  TOKEN: {env: HOME}\n")
    with pytest.raises(ConfigError, match="does not pass the submitter's environment"):
        render_experiment(exp, site="swarm-testbed")


def test_twelve_task_job_while_two_run() -> None:
    records = fmt.parse_service_ps(_read("ps-12-tasks-running-pending.jsonl"))
    assert _by_slot(records) == {0: (st.COMPLETED, 0), 1: (st.RUNNING, None), 2: (st.PENDING, None),
                                 3: (st.RUNNING, None), 4: (st.PENDING, None)}  # slots 5-11: no task yet


def test_a_task_stopped_at_its_wall_time_is_timeout_and_one_killed_for_memory_failed() -> None:
    # slot 0 slept past its 5 s wall time (the script exited 124), slot 1 outgrew its 64 MiB limit
    records = fmt.parse_service_ps(_read("ps-walltime-124-oom-137.jsonl"))
    assert _by_slot(records) == {0: (st.TIMEOUT, 124), 1: (st.FAILED, 137)}
    assert {r.array_task_id: r.state_raw for r in records} == {0: "Failed (wall time)", 1: "Failed"}
