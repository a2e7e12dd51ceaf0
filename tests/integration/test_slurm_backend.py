"""Render → submit → wait → sacct on the real Slurm testbed, through hpcjobs' own backend.

All jobs are submitted first and waited for together (one ``sacct`` call per poll), so the
module costs about as long as its slowest job: the time-out, which Slurm 22.05 enforces
60-90 s after the limit (slurmctld checks limits every 30 s).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import render_spec

from hpcjobs import states
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import CommandError
from hpcjobs.process import run_command
from hpcjobs.schedulers.base import ArraySpec, SubmitOptions
from hpcjobs.schedulers.client import PollSchedule, SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered

pytestmark = pytest.mark.slurm

SITE = load_site_file(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")

JOBS: dict[str, dict] = {
    "timeout": {"command": "sleep 600", "resources": {"walltime": "1m"}},
    "completes": {"command": "echo done"},
    "exit3": {"command": "echo failing; exit 3"},
    "cancelled": {"command": "sleep 600"},
    "memhog": {"command": "python3 -c 'b = bytearray(700 * 1024 * 1024); import time; time.sleep(5)'",
               "resources": {"memory": "100M"}},
    "gpu": {"command": 'echo "CVD=$CUDA_VISIBLE_DEVICES"', "partition": "gpu",
            "resources": {"gpus_per_node": 1}},
}


def _render(name: str, spec: dict, **kw):
    return render_spec(spec, SITE, name=f"it-{name}", **kw)


@pytest.fixture(scope="module")
def client() -> SchedulerClient:
    return SchedulerClient(get_backend("slurm"))


@pytest.fixture(scope="module")
def outcome(slurm_testbed, client, tmp_path_factory):
    """Submit every job (and a throttled array) side by side; wait once; return records and submissions."""
    workdir = tmp_path_factory.mktemp("backend")
    workdir.chmod(0o777)
    subs = {name: submit_rendered(_render(name, spec), client=client, submit_dir=workdir)
            for name, spec in JOBS.items()}
    array_job = _render("array", {"command": "sleep 2; echo task=$SLURM_ARRAY_TASK_ID"},
                        array=ArraySpec(0, 11, throttle=3))
    subs["array"] = submit_rendered(array_job, client=client, submit_dir=workdir)

    # cancel one job once it runs
    deadline = time.monotonic() + 60
    while [r.state for r in client.status([subs["cancelled"].job_id])] != [states.RUNNING]:
        assert time.monotonic() < deadline, "the job to cancel never started"
        time.sleep(0.5)
    client.cancel([subs["cancelled"].job_id])

    before = dict(client.calls)
    records = client.wait([s.job_id for s in subs.values()], timeout=240,
                          schedule=PollSchedule(initial=1, factor=1.3, maximum=5))
    polls = client.calls.get("sacct", 0) - before.get("sacct", 0)
    by_id = {r.job_id: r for r in records}
    return subs, by_id, polls, workdir


def test_completed(outcome):
    subs, by_id, _, workdir = outcome
    rec = by_id[subs["completes"].job_id]
    assert (rec.state, rec.exit_code, rec.exit_signal) == (states.COMPLETED, 0, 0)
    assert rec.comment == subs["completes"].tag.render()
    out = workdir / "hpcjobs-logs" / f"it-completes-{subs['completes'].job_id}.out"
    assert out.read_text().strip() == "done"


def test_failed_with_exit_code_3(outcome):
    subs, by_id, _, _ = outcome
    rec = by_id[subs["exit3"].job_id]
    assert (rec.state, rec.exit_code, rec.exit_signal) == (states.FAILED, 3, 0)


def test_timeout(outcome):
    subs, by_id, _, _ = outcome
    assert by_id[subs["timeout"].job_id].state == states.TIMEOUT


def test_cancelled(outcome):
    subs, by_id, _, _ = outcome
    rec = by_id[subs["cancelled"].job_id]
    assert rec.state == states.CANCELLED
    assert rec.state_raw.startswith("CANCELLED by ")


def test_memory_hog_is_killed(outcome):
    # This testbed has no cgroups: JobAcctGatherParams=OverMemoryKill kills the job, which Slurm 22.05
    # records as FAILED with signal 9 (not OUT_OF_MEMORY, which needs the cgroup plugin).
    subs, by_id, _, _ = outcome
    rec = by_id[subs["memhog"].job_id]
    assert rec.state in (states.FAILED, states.OUT_OF_MEMORY)
    assert rec.exit_signal == 9 or rec.state == states.OUT_OF_MEMORY


def test_gpu_job_sees_cuda_visible_devices(outcome):
    subs, by_id, _, workdir = outcome
    sub = subs["gpu"]
    assert by_id[sub.job_id].state == states.COMPLETED
    out = workdir / "hpcjobs-logs" / f"it-gpu-{sub.job_id}.out"
    assert out.read_text().strip() == "CVD=0"


def test_throttled_array_runs_every_task_at_most_three_at_once(outcome, slurm_testbed):
    subs, by_id, _, workdir = outcome
    array_id = subs["array"].job_id
    tasks = {r.array_task_id: r for r in by_id.values() if r.array_job_id == array_id}
    assert sorted(tasks) == list(range(12))
    assert all(r.state == states.COMPLETED for r in tasks.values())
    for i in range(12):
        out = workdir / "hpcjobs-logs" / f"it-array-{array_id}_{i}.out"
        assert out.read_text().strip() == f"task={i}"
    rows = slurm_testbed.sacct_rows([array_id], fields=("JobID", "Start", "End"))
    spans = [(r["Start"], r["End"]) for r in rows]
    for start, _ in spans:  # at any task's start, at most 3 tasks are running
        running = sum(1 for s, e in spans if s <= start < e)
        assert running <= 3, spans


def test_one_sacct_call_per_poll(outcome):
    _, _, polls, _ = outcome
    # every poll asked about all seven jobs at once; the time-out alone takes 60-90 s
    assert 1 <= polls <= 200


def test_limits_and_cluster_name(slurm_testbed, client):
    limits = client.limits()
    assert limits.max_array_size == 101
    assert limits.min_job_age_s == 60
    assert client.cluster_name() == "hpctest"


def test_rejected_submission_carries_argv_rc_and_stderr(slurm_testbed, client, tmp_path):
    bad = _render("bad", {"command": "true", "account": "other"})
    with pytest.raises(CommandError) as info:
        submit_rendered(bad, client=client, submit_dir=tmp_path,
                        options=SubmitOptions(extra_args=("--partition=nosuch",)))
    err = info.value
    assert err.argv[0] == "sbatch" and err.returncode == 1
    assert "invalid partition specified: nosuch" in err.stderr
    assert "exited with code 1" in str(err)


def test_array_over_max_array_size_is_rejected(slurm_testbed, client, tmp_path):
    job = _render("toobig", {"command": "true"}, array=ArraySpec(0, 101))
    with pytest.raises(CommandError, match="Invalid job array specification"):
        submit_rendered(job, client=client, submit_dir=tmp_path)


def test_unknown_job_status_is_empty(slurm_testbed, client):
    assert client.status(["999999"]) == []


def test_squeue_fallback_parses_live_jobs(slurm_testbed, client, tmp_path):
    os.chmod(tmp_path, 0o777)
    sub = submit_rendered(_render("fallback", {"command": "sleep 30"}), client=client, submit_dir=tmp_path)
    try:
        backend = client.backend
        res = client.run(backend.fallback_status_argv([sub.job_id]))
        (rec,) = backend.parse_fallback_status(res.stdout)
        assert rec.job_id == sub.job_id and rec.state in (states.PENDING, states.RUNNING)
        assert rec.comment == sub.tag.render()
    finally:
        client.cancel([sub.job_id])


def test_user_submit_limit_is_read_from_the_association(slurm_testbed, client, monkeypatch):
    """sacctmgr gets ``where`` and ``user=`` as separate words (one word: 'Unknown condition', exit 1)."""
    import getpass

    monkeypatch.setenv("HPCJOBS_LIMITS_TTL_S", "0")  # each call asks sacctmgr (no cached limits)

    user = getpass.getuser()
    set_limit = ["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "account=hpcjobs", "set"]
    run_command([*set_limit, "MaxSubmitJobs=4321"], timeout=30.0)
    try:
        assert client.limits().max_submit_jobs == 4321
    finally:
        run_command([*set_limit, "MaxSubmitJobs=-1"], timeout=30.0)
    assert client.limits().max_submit_jobs is None
