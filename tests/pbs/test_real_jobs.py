"""Single jobs against the real OpenPBS testbed: examples, shells, status, cancel, failures, limits.

One batch of short jobs is submitted at once (module fixture) and every test reads what hpcjobs
and ``qstat -x`` say about it once each job is in state F. What the real server showed:

* the login shell reads the job script's *path* from its standard input and runs it, so the
  kernel honours the script's ``#!/bin/bash`` whatever the owner's login shell is (here ``-S
  /bin/sh`` stands for such a user): the template needs no ``#PBS -S``;
* ``exit 3`` gives ``Exit_status`` 3 (substate 93), a walltime kill -29 with the comment "...
  exceeded resource walltime", a qdel of a running job 271, 143 or even 0 (a job deleted a second
  after it started) with substate 91, a qdel of a held or waiting job no ``Exit_status`` at all;
* ``qstat -f -F json`` of several ids prints only the first one's job unless ``-E`` is given;
* ``qsub`` refuses a request over ``resources_max`` with exit code 188 (PBSE_EXCQRESC 15036 & 0xFF).
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import render_spec
from real_testbed import wait_for

from hpcjobs import states
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import JobStatus, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered
from pbs._real_helpers import (
    EXAMPLES,
    SITE,
    cli,
    cli_json,
    jobs_named,
    pbs_directives,
    qdel_quietly,
    server_jobs,
    wait_final,
)
from pbs.real import PBS_EXEC, PbsServer, pbs

pytestmark = pytest.mark.pbs

#: Examples that run on the testbed's one 2-cpu node as they are (the sweep files as one job).
RUNNABLE = {"hello": "Hello from hpcjobs on ", "sweep-grid": "lr=", "sweep-random": "opt=",
            "sweep-wandb": "batch_size="}
#: The other examples, shrunk to the queue's limits (cpus, memory, wall time) but with their nodes,
#: GPUs and launchers; submitted held, checked, deleted.
FIT = ("--set", "resources.cpus_per_task=1", "--set", "resources.tasks_per_node=1")
HELD_ONLY = {
    "train-gpu": (*FIT, "--set", "resources.memory=1G"),
    "launch-torchrun": (*FIT, "--set", "resources.gpus_per_node=2"),
    "launch-torchrun-cpu": FIT,
    "launch-deepspeed": (*FIT, "--set", "resources.gpus_per_node=2", "--set", "resources.walltime=1h"),
    "launch-tf": (*FIT, "--set", "resources.gpus_per_node=2"),
    "launch-mpi": (*FIT, "--set", "resources.memory=1G"),
    "mpi-cpu": (*FIT, "--set", "resources.memory=1G"),
    "launch-preemptible": (*FIT, "--set", "resources.walltime=1h"),
}
UNKNOWN_ID = "999999.vm"
FINAL_WAIT_S = 300.0  # other jobs may share the node's two cpus


def _client() -> SchedulerClient:
    return SchedulerClient(get_backend("pbspro"), env={"HPCJOBS_PBS_BIN": str(PBS_EXEC / "bin")})


def _render(name: str, spec: dict[str, Any]):
    return render_spec(spec, SITE, name=name)


@dataclass
class Batch:
    """The jobs of the module and what hpcjobs and the server said about them."""

    workdir: Path
    ids: dict[str, str]
    first_poll: dict[str, JobStatus]
    running_poll: dict[str, JobStatus]
    final_poll: dict[str, JobStatus]
    qstat_calls_per_poll: list[int]
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _by_name(client: SchedulerClient, ids: dict[str, str], records: list[JobStatus]) -> dict[str, JobStatus]:
    out = {}
    for name, jid in ids.items():
        found = [r for r in records if client.backend.same_job(r.job_id, jid)]
        if found:
            out[name] = found[0]
    return out


def _poll(client: SchedulerClient, ids: dict[str, str], counts: list[int]) -> dict[str, JobStatus]:
    before = client.calls.get("qstat", 0)
    records = client.status([*ids.values(), UNKNOWN_ID])
    counts.append(client.calls.get("qstat", 0) - before)
    assert not any(client.backend.same_job(r.job_id, UNKNOWN_ID) for r in records)
    return _by_name(client, ids, records)


@pytest.fixture(scope="module")
def batch(pbs_server_session: PbsServer, tmp_path_factory: pytest.TempPathFactory) -> Batch:
    work = tmp_path_factory.mktemp("real-jobs")
    work.chmod(0o777)
    client = _client()
    ids: dict[str, str] = {}
    try:
        for example in RUNNABLE:
            out = cli_json(["submit", str(EXAMPLES / f"{example}.yaml"), "--site", str(SITE), "--json"], cwd=work)
            ids[example] = out["job_id"]
        jobs = {
            # bash-only syntax ($'..' quoting of a line break, pipefail) under a /bin/sh login shell
            "sh-login": (_render("sh-login", {
                "environment": {"MULTI": "a\nb"},
                "command": 'echo "bash=${BASH_VERSION:-none}"; echo "parent=$(ps -o args= -p $PPID)"; '
                           'echo "lines=$(printf \'%s\\n\' "$MULTI" | wc -l)"'}),
                         SubmitOptions(extra_args=("-S", "/bin/sh"))),
            "exit3": (_render("exit3", {"command": "exit 3"}), SubmitOptions()),
            # the mom checks wall time every 10 to 120 s (min/max_check_poll): the kill comes late
            "walltime": (_render("walltime", {"command": "sleep 600", "resources": {"walltime": "00:00:05"}}),
                         SubmitOptions()),
            "running": (_render("running", {"command": 'touch "$PBS_O_WORKDIR/running.started"; sleep 300'}),
                        SubmitOptions()),
            "held": (_render("held", {"command": "true"}), SubmitOptions(hold=True)),
            # an execution time an hour ahead: waiting (W), never started
            "waiting": (_render("waiting", {"command": "true"}),
                        SubmitOptions(extra_args=("-a", time.strftime("%Y%m%d%H%M",
                                                                      time.localtime(time.time() + 3600))))),
        }
        for name, (rendered, options) in jobs.items():
            ids[name] = submit_rendered(rendered, client=client, submit_dir=work, options=options).job_id
        counts: list[int] = []
        first = _poll(client, ids, counts)
        wait_for("the running job started", (work / "running.started").exists, timeout=FINAL_WAIT_S)
        running = _poll(client, ids, counts)
        client.cancel([ids["running"], ids["held"], ids["waiting"]])
        attrs = wait_final(list(ids.values()), timeout=FINAL_WAIT_S)
        final = _poll(client, ids, counts)
    except BaseException:
        qdel_quietly(list(ids.values()))
        raise
    by_name = {name: next(a for j, a in attrs.items() if client.backend.same_job(j, jid))
               for name, jid in ids.items()}
    return Batch(work, ids, first, running, final, counts, by_name)


def _output(attrs: dict[str, Any], key: str = "Output_Path") -> str:
    return Path(str(attrs[key]).split(":", 1)[1]).read_text()


@pytest.mark.parametrize("example", sorted(RUNNABLE))
def test_runnable_example_completes_with_its_output(batch: Batch, example: str):
    attrs = batch.attrs[example]
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    assert attrs["queue"] == "workq"
    assert attrs["Job_Name"] == example
    out = _output(attrs)
    assert out.startswith(RUNNABLE[example]), out
    if example == "hello":
        assert out.strip() == f"Hello from hpcjobs on {socket.gethostname().split('.')[0]}"
    assert _output(attrs, "Error_Path") == ""
    status = batch.final_poll[example]
    assert (status.state, status.exit_code) == (states.COMPLETED, 0)
    # submitted by `hpcjobs submit`: the tag names the request (<name>-<hash>) recorded in the ledger of single jobs
    assert status.comment and re.fullmatch(rf"hpcjobs:{attrs['Job_Name']}-[0-9a-f]{{8}}:0:[0-9a-f]{{16}}",
                                           status.comment), status.comment


def test_status_logs_and_a_repeated_submit_by_job_id(batch: Batch):
    # `hpcjobs submit` printed 1234.server; status takes that id or its number alone (one qstat call)
    job_id = batch.ids["hello"]
    assert re.fullmatch(r"\d+\.\S+", job_id), job_id
    for text in (job_id, job_id.split(".")[0]):
        out = cli_json(["status", text, "--json"], cwd=batch.workdir)
        assert out["job"]["job_id"].split(".")[0] == job_id.split(".")[0]
        assert (out["job"]["state"], out["job"]["exit_code"], out["job"]["scheduler"]) == ("COMPLETED", 0, "pbspro")
        assert out["total"] == 1 and out["counts"] == {"COMPLETED": 1}
    logs = cli(["logs", job_id.split(".")[0]], cwd=batch.workdir)
    assert logs.returncode == 0, logs.stderr
    assert f"==> stdout of job {job_id} (COMPLETED, exit 0): {batch.workdir}" in logs.stdout, logs.stdout
    assert f"Hello from hpcjobs on {socket.gethostname().split('.')[0]}" in logs.stdout
    # the same request again: the job already submitted, nothing new in the server
    again = cli_json(["submit", str(EXAMPLES / "hello.yaml"), "--site", str(SITE), "--json"], cwd=batch.workdir)
    assert (again["job_id"], again["new"], again["state"]) == (job_id, False, "COMPLETED")
    text = pbs(["qstat", "-x", "-f", "-F", "json"]).stdout
    tagged = [j for j, tag in get_backend("pbspro").parse_tag_query(text)
              if tag.startswith(f"hpcjobs:{again['request_id']}:")]  # the id hashes the submit folder too
    assert tagged == [job_id], tagged
    listed = cli_json(["ls", "--jobs", "--json"], cwd=batch.workdir)
    assert {r["name"]: r["state"] for r in listed}["hello"] == "COMPLETED"


def test_script_runs_under_bash_when_the_login_shell_is_sh(batch: Batch):
    # OpenPBS starts the owner's login shell (here /bin/sh through -S) and writes the script's path
    # on its stdin; the shell runs that file, so its #!/bin/bash line picks the interpreter.
    attrs = batch.attrs["sh-login"]
    assert attrs["Shell_Path_List"] == "/bin/sh"
    assert attrs["Exit_status"] == 0, _output(attrs, "Error_Path")
    lines = dict(line.split("=", 1) for line in _output(attrs).splitlines())
    assert lines["bash"] != "none"
    assert lines["parent"] == "-sh"
    assert lines["lines"] == "2"


def test_failures_as_hpcjobs_and_qstat_report_them(batch: Batch):
    a, f = batch.attrs, batch.final_poll
    assert (a["exit3"]["Exit_status"], f["exit3"].state, f["exit3"].exit_code) == (3, states.FAILED, 3)
    assert a["walltime"]["Exit_status"] == -29
    assert "exceeded resource walltime" in a["walltime"]["comment"]
    assert (f["walltime"].state, f["walltime"].exit_code) == (states.TIMEOUT, -29)
    assert "walltime" in _output(a["walltime"], "Error_Path")  # =>> PBS: job killed: walltime .. exceeded limit 5
    # qdel of a running job: 271 when the shell dies of SIGTERM, 143 when bash returns 128+15, and 0
    # when the mom force-kills a task that started a moment ago ("task ... force exited")
    assert a["running"]["Exit_status"] in (0, 143, 271), a["running"]
    assert a["running"]["substate"] == 91
    assert f["running"].state == states.CANCELLED, f["running"]
    for name in ("held", "waiting"):  # deleted before they ran: no Exit_status
        assert "Exit_status" not in a[name], a[name]
        assert (f[name].state, f[name].exit_code) == (states.CANCELLED, None), f[name]


def test_status_is_one_qstat_call_per_poll_and_maps_states(batch: Batch):
    assert batch.qstat_calls_per_poll == [1, 1, 1]
    first, running = batch.first_poll, batch.running_poll
    assert (first["held"].state_raw, first["held"].state) == ("H", states.HELD)
    assert (first["waiting"].state_raw, first["waiting"].state) == ("W", states.PENDING)
    assert (running["running"].state_raw, running["running"].state) == ("R", states.RUNNING)
    for name, status in batch.final_poll.items():
        assert status.state_raw == "F"
        if name != "running":  # 271 is a signal: exit code None, signal 15
            assert status.exit_code == batch.attrs[name].get("Exit_status"), (name, status)
    assert set(batch.final_poll) == set(batch.ids)


@pytest.fixture
def two_node_site(tmp_path: Path) -> Path:
    """The testbed's site with two nodes allowed, so multi-node examples keep their select/place lines."""
    data = yaml.safe_load(SITE.read_text())
    data["name"] = "openpbs-testbed-2nodes"
    data["partitions"]["workq"]["max_nodes"] = 2
    path = tmp_path / "openpbs-testbed-2nodes.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _expected_attribute(option: str, value: str) -> tuple[str, ...] | None:
    """Where qstat -f -F json shows a ``#PBS`` option: a key path, or None for -o/-e (checked apart)."""
    if option == "-l":
        key, _, _val = value.partition("=")
        return ("Resource_List", key)
    return {"-N": ("Job_Name",), "-q": ("queue",), "-J": ("array_indices_submitted",), "-A": ("Account_Name",),
            "-r": ("Rerunable",), "-j": ("Join_Path",), "-W": None}.get(option, ("?", option))


def test_unrunnable_examples_are_accepted_held(pbs_server: PbsServer, pbs_workdir: Path, two_node_site: Path):
    client = _client()
    submitted: dict[str, tuple[str, str]] = {}
    try:
        for example, overrides in HELD_ONLY.items():
            rendered = render_experiment(EXAMPLES / f"{example}.yaml", site=str(two_node_site),
                                         overrides=tuple(o for o in overrides if o != "--set"))
            sub = submit_rendered(rendered, client=client, submit_dir=pbs_workdir, options=SubmitOptions(hold=True))
            submitted[example] = (sub.job_id, rendered.text)
        info = server_jobs(*(jid for jid, _ in submitted.values()))
        for example, (jid, text) in submitted.items():
            attrs = next(a for j, a in info.items() if client.backend.same_job(j, jid))
            assert attrs["job_state"] == "H", (example, attrs["job_state"])
            directives = pbs_directives(text)
            assert directives, example
            for option, value in directives:
                where = _expected_attribute(option, value)
                if option in ("-o", "-e"):
                    path = attrs["Output_Path" if option == "-o" else "Error_Path"]
                    assert path.endswith("/" + value), (example, option, value, path)
                    continue
                assert where is not None and where[0] != "?", f"{example}: check for #PBS {option} {value} missing"
                got: Any = attrs
                for key in where:
                    got = got[key]
                want = value.partition("=")[2] if option == "-l" else value
                assert str(got) == want, (example, option, value, got)
    finally:
        qdel_quietly([jid for jid, _ in submitted.values()])
    wait_final([jid for jid, _ in submitted.values()], timeout=FINAL_WAIT_S)


def test_walltime_over_the_queue_limit_is_refused_before_qsub(pbs_server: PbsServer, pbs_workdir: Path):
    name = f"over-walltime-{pbs_workdir.name}"[:60]
    proc = cli(["submit", str(EXAMPLES / "hello.yaml"), "--site", str(SITE), "--set", f"name={name}",
                "--set", "resources.walltime=03:00:00"], cwd=pbs_workdir)
    assert proc.returncode == 2, proc.stderr
    assert "resources.walltime" in proc.stderr and "02:00:00" in proc.stderr, proc.stderr
    assert not (pbs_workdir / "hpcjobs-logs").exists()
    assert jobs_named(name) == []


def test_server_limit_the_site_does_not_know_is_exit_1_with_qsub_stderr(pbs_server: PbsServer,
                                                                       pbs_workdir: Path):
    data = yaml.safe_load(SITE.read_text())
    data["partitions"]["workq"]["cpus_per_node"] = 8  # the queue allows resources_max.ncpus 2
    site = pbs_workdir / "bigger.yaml"
    site.write_text(yaml.safe_dump(data))
    name = f"over-ncpus-{pbs_workdir.name}"[:60]
    proc = cli(["submit", str(EXAMPLES / "hello.yaml"), "--site", str(site), "--set", f"name={name}",
                "--set", "resources.cpus_per_task=4"], cwd=pbs_workdir)
    assert proc.returncode == 1, proc.stderr
    assert f"{PBS_EXEC}/bin/qsub" in proc.stderr
    assert "exited with code 188" in proc.stderr
    assert "qsub: Job violates queue and/or server resource limits" in proc.stderr
    assert list((pbs_workdir / "hpcjobs-logs" / "scripts").iterdir()) == []  # the refused script is removed
    assert jobs_named(name) == []


def test_json_of_a_finished_batch_is_readable_by_status(batch: Batch):
    # the same qstat -x -f -F json an outside tool saves, parsed by the status parser
    text = json.dumps({"Jobs": {jid: batch.attrs[name] for name, jid in batch.ids.items()}})
    records = {r.job_id: r for r in get_backend("pbspro").parse_status(text)}
    assert {records[jid].state for jid in batch.ids.values()} == {s.state for s in batch.final_poll.values()}
