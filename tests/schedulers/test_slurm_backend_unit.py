"""The Slurm backend and the scheduler client without a cluster: the subprocess seam is faked.

Outputs fed to the parsers are the real ones captured on the testbed (tests/data/slurm/testbed/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs import process, states
from hpcjobs.errors import CommandError, HpcJobsError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import ArraySpec, JobStatus, SubmitOptions
from hpcjobs.schedulers.client import PollSchedule, SchedulerClient
from hpcjobs.schedulers.registry import get_backend

DATA = Path(__file__).resolve().parent.parent / "data" / "slurm" / "testbed"


class FakeSeam:
    """Stands in for hpcjobs.process.run_command: answers by command name, records every call."""

    def __init__(self, answers):
        self.answers = answers  # name -> list of (rc, stdout, stderr), consumed in order (last one repeats)
        self.calls: list[list[str]] = []

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        self.calls.append(list(argv))
        queue = self.answers[argv[0]]
        rc, out, err = queue.pop(0) if len(queue) > 1 else queue[0]
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return CommandResult(tuple(argv), rc, out, err, 0.01)


@pytest.fixture
def slurm():
    return get_backend("slurm")


def test_submit_argv(slurm):
    argv = slurm.submit_argv(Path("job.sh"), SubmitOptions(
        array=ArraySpec(0, 99, throttle=5), dependencies=("12", "13"), comment="hpcjobs:s:0:abcd1234", hold=True,
        extra_args=("--qos=debug",)))
    assert argv == ["sbatch", "--parsable", "--array=0-99%5", "--dependency=afterok:12:13",
                    "--comment=hpcjobs:s:0:abcd1234", "--hold", "--qos=debug", "job.sh"]


def test_parse_submit_real_outputs(slurm):
    assert slurm.parse_submit((DATA / "sbatch_parsable.txt").read_text()) == "2"
    assert slurm.parse_submit((DATA / "sbatch_parsable_cluster.txt").read_text()) == "3"


def test_limits_from_real_scontrol_show_config(slurm):
    limits = slurm.parse_limits((DATA / "scontrol_show_config.txt").read_text())
    assert (limits.max_array_size, limits.min_job_age_s) == (101, 60)
    assert slurm.parse_cluster_name((DATA / "scontrol_show_config.txt").read_text()) == "hpctest"


def test_user_limits_tightest_wins(slurm):
    assert slurm.parse_user_limits("hpctest|hpcjobs||500|\nhpctest|other||200|1000\n") == 200
    assert slurm.parse_user_limits("hpctest|hpcjobs|||\n") is None


def test_status_is_one_batched_call(monkeypatch, slurm):
    seam = FakeSeam({"sacct": [(0, "5|5|COMPLETED|0:0||j|\n6|6|FAILED|3:0||j|\n", "")]})
    monkeypatch.setattr(process, "run_command", seam)
    client = SchedulerClient(slurm)
    recs = client.status(["5", "6"])
    assert [(r.job_id, r.state, r.exit_code) for r in recs] == [("5", states.COMPLETED, 0), ("6", states.FAILED, 3)]
    assert len(seam.calls) == 1 and seam.calls[0][0] == "sacct" and "--jobs=5,6" in seam.calls[0]


def test_just_submitted_jobs_are_asked_of_squeue(monkeypatch, slurm):
    squeue_line = "7|7|7|N/A|PENDING|Priority|j|hpcjobs:s:0:abcd1234\n"
    seam = FakeSeam({"sacct": [(0, "5|5|RUNNING|0:0||j|\n", "")], "squeue": [(0, squeue_line, "")]})
    monkeypatch.setattr(process, "run_command", seam)
    recs = SchedulerClient(slurm).status(["5", "7"])
    assert {r.job_id: r.state for r in recs} == {"5": states.RUNNING, "7": states.PENDING}
    assert [c[0] for c in seam.calls] == ["sacct", "squeue"]
    assert "--jobs=7" in seam.calls[1]


def test_accounting_disabled_falls_back_to_squeue(monkeypatch, slurm):
    seam = FakeSeam({
        "sacct": [(1, "", "sacct: error: Slurm accounting storage is disabled\n")],
        "squeue": [(0, "8|8|8|N/A|RUNNING|None|j|(null)\n", "")],
    })
    monkeypatch.setattr(process, "run_command", seam)
    (rec,) = SchedulerClient(slurm).status(["8"])
    assert rec.state == states.RUNNING and rec.comment is None


def test_other_sacct_failure_raises_with_details(monkeypatch, slurm):
    seam = FakeSeam({"sacct": [(1, "", 'sacct: error: Invalid field requested: "ArrayJobID"\n')]})
    monkeypatch.setattr(process, "run_command", seam)
    with pytest.raises(CommandError) as info:
        SchedulerClient(slurm).status(["8"])
    assert info.value.returncode == 1 and "Invalid field" in info.value.stderr and info.value.argv[0] == "sacct"


def test_wait_backs_off_until_terminal(monkeypatch, slurm):
    seam = FakeSeam({"sacct": [(0, "9|9|PENDING|0:0||j|\n", ""), (0, "9|9|RUNNING|0:0||j|\n", ""),
                               (0, "9|9|RUNNING|0:0||j|\n", ""), (0, "9|9|TIMEOUT|0:0||j|\n", "")]})
    monkeypatch.setattr(process, "run_command", seam)
    slept: list[float] = []
    recs = SchedulerClient(slurm).wait(["9"], schedule=PollSchedule(initial=1, factor=2, maximum=3),
                                       sleep=slept.append)
    assert recs[0].state == states.TIMEOUT
    assert slept == [1, 2, 3]
    assert len(seam.calls) == 4


def test_wait_times_out_with_the_active_jobs(monkeypatch, slurm):
    seam = FakeSeam({"sacct": [(0, "9|9|RUNNING|0:0||j|\n", "")]})
    monkeypatch.setattr(process, "run_command", seam)
    now = [0.0]

    def sleep(d):
        now[0] += d

    with pytest.raises(HpcJobsError, match="9=RUNNING"):
        SchedulerClient(slurm).wait(["9"], timeout=10, sleep=sleep, clock=lambda: now[0])


def test_wait_needs_collapsed_pending_ranges_resolved():
    from hpcjobs.schedulers.client import all_terminal

    done = JobStatus("11_0", states.COMPLETED, "COMPLETED", array_job_id="11", array_task_id=0)
    pending = JobStatus("11_[1-3]", states.PENDING, "PENDING", array_job_id="11", array_task_spec="1-3")
    assert all_terminal([done])
    assert not all_terminal([done, pending])


def test_real_status_capture(slurm):
    """sacct_status_format.txt: the status call's real output for the integration jobs (see SOURCES.md)."""
    recs = slurm.parse_status((DATA / "sacct_status_format.txt").read_text())
    by_name = {r.name: r for r in recs if r.array_task_id is None}
    assert (by_name["it-exit3"].state, by_name["it-exit3"].exit_code) == (states.FAILED, 3)
    assert by_name["it-timeout"].state == states.TIMEOUT
    assert by_name["it-timeout"].reason == "batch CANCELLED 0:15"  # from the step, as sacct gave no reason
    assert (by_name["it-cancelled"].state, by_name["it-cancelled"].state_raw) == (states.CANCELLED, "CANCELLED by 0")
    assert (by_name["it-memhog"].state, by_name["it-memhog"].exit_signal) == (states.FAILED, 9)
    assert by_name["it-gpu"].comment == "hpcjobs:it-gpu:0:57370fab57e2e0f0"
    tasks = [r for r in recs if r.array_job_id == "30"]
    assert sorted(r.array_task_id for r in tasks) == list(range(12))
    assert {r.state for r in tasks} == {states.COMPLETED}
    assert next(r for r in tasks if r.array_task_id == 3).reason == "JobArrayTaskLimit"


def test_unreadable_user_limit_is_logged_with_the_command(monkeypatch, caplog):
    seam = FakeSeam({
        "scontrol": [(0, (DATA / "scontrol_show_config.txt").read_text(), "")],
        "sacctmgr": [(1, "", "sacctmgr: error: Problem talking to the database: Connection refused\n")],
    })
    monkeypatch.setattr(process, "run_command", seam)
    with caplog.at_level("WARNING", logger="hpcjobs.schedulers"):
        limits = SchedulerClient(get_backend("slurm")).limits(user="alice")
    assert limits.max_submit_jobs is None
    sacctmgr = next(c for c in seam.calls if c[0] == "sacctmgr")
    assert sacctmgr[sacctmgr.index("where") + 1] == "user=alice"
    assert any("could not read MaxSubmitJobs" in r.message and "Connection refused" in r.message
               and "exited 1" in r.message for r in caplog.records)


def test_user_limit_includes_the_default_qos_submit_limit(slurm):
    # sacctmgr --noheader --parsable2 show qos format=Name,MaxSubmitJobsPerUser (a QOS without a limit prints '')
    qos = slurm.parse_qos_limits("normal|20\nlong|\ngpu|4\n")
    assert qos == {"normal": 20, "gpu": 4}
    # format=Cluster,Account,Partition,MaxSubmitJobs,GrpSubmitJobs,DefaultQOS,QOS
    assocs = "hpctest|hpcjobs||||normal|normal\nhpctest|other||||normal|normal\n"
    assert slurm.parse_user_limits(assocs, qos) == 20
    assert slurm.parse_user_limits(assocs, {}) is None
    assert slurm.parse_user_limits("hpctest|gpuacct||500||gpu|gpu,normal\n", qos) == 4  # DefaultQOS wins
    assert slurm.parse_user_limits("hpctest|a||500|||long,normal\n", qos) == 20  # no DefaultQOS: normal
    assert slurm.parse_user_limits("hpctest|a||500|||long\n", qos) == 500  # only 'long', which sets none

