"""Exactly once when the scheduler's memory is not there: accounting down, a ledger deleted, a requeue.

Each case drives the real submitter, ledger and status poll against :class:`LyingSlurm` (the subprocess
seam replaced, time moved by the injected sleep) and counts what ran: a point may wait, or the command
may stop and say what it cannot decide, but no point is ever in two live jobs, and none is lost.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import SubmitError
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV
from hpcjobs.sweep.poll import poll_status
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger
from tests.hostile._lying_helpers import LyingSlurm, experiment

ROOT = Path(__file__).resolve().parents[2]
SMALL = str(ROOT / "tests" / "sites" / "hpctest-small-arrays.yaml")  # chunks of 5 points


class Crash(BaseException):
    """The submitter dies (kill -9) right after a call returned."""


def _prepare(tmp_path: Path, fake: LyingSlurm, monkeypatch: pytest.MonkeyPatch, n: int = 15):
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    return prepare_sweep(experiment(tmp_path, n), site=SMALL, root=tmp_path / "sweeps")


def _submitter(prepared, ledger: Ledger, fake: LyingSlurm) -> SweepSubmitter:
    return SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")), sleep=fake.sleep,
                          retry=RetryPolicy(attempts=4, initial=0.5, lookup_s=60.0))


def _points_run(fake: LyingSlurm, folder: Path) -> Counter[str]:
    """Point id → how many jobs the fake holds for it (cancelled ones excluded)."""
    runs: Counter[str] = Counter()
    for job in fake.live():
        chunk = int(job.comment.split(":")[2])
        runs.update((folder / "chunks" / f"{chunk}.ids").read_text().split())
    return runs


def _crash_after_sbatch(fake: LyingSlurm, monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    calls = {"n": 0}

    def crashing(argv, **kw):
        result = fake(argv, **kw)
        if argv[0] == "sbatch":
            calls["n"] += 1
            if calls["n"] == nth:
                raise Crash  # queued; the submitter dies before recording the id
        return result

    monkeypatch.setattr(process, "run_command", crashing)


def test_accounting_down_on_resume_submits_nothing_and_names_the_chunk(tmp_path, monkeypatch):
    """Killed after sbatch queued chunk 1; the job ended and left squeue; sacct fails on the rerun."""
    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch)
    ledger = open_ledger(prepared)
    _crash_after_sbatch(fake, monkeypatch, nth=2)
    with pytest.raises(Crash):
        _submitter(prepared, ledger, fake).submit()
    ledger.close()
    monkeypatch.setattr(process, "run_command", fake)
    unrecorded = max(fake.jobs, key=int)
    fake.finish(unrecorded)
    fake.purge(unrecorded)
    fake.accounting_down = True
    with Ledger.open(prepared.folder) as ledger:
        with pytest.raises(SubmitError, match="unresolved") as err:
            _submitter(prepared, ledger, fake).submit()
        assert "run the same command again" in str(err.value)
        assert fake.sbatch_calls() == 2  # nothing submitted, not even the chunk never tried
        assert ledger.check_invariants() == []
    fake.accounting_down = False  # slurmdbd is back: the rerun finds the job by its tag
    with Ledger.open(prepared.folder) as ledger:
        report = _submitter(prepared, ledger, fake).submit()
        assert report.recovered == 1
        assert ledger.check_invariants() == []
    runs = _points_run(fake, prepared.folder)
    assert set(runs) == {p.point_id for p in prepared.points} and set(runs.values()) == {1}, runs


def test_records_slurmctld_still_holds_are_not_a_no(tmp_path, monkeypatch):
    """slurmdbd is back, but slurmctld has not sent what it kept: sacct misses the purged job (sdiag says so)."""
    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch)
    ledger = open_ledger(prepared)
    _crash_after_sbatch(fake, monkeypatch, nth=2)
    with pytest.raises(Crash):
        _submitter(prepared, ledger, fake).submit()
    ledger.close()
    monkeypatch.setattr(process, "run_command", fake)
    unrecorded = max(fake.jobs, key=int)
    fake.finish(unrecorded)
    fake.purge(unrecorded)
    fake.held.add(unrecorded)  # in neither squeue nor sacct: only sdiag's DBD Agent queue says it exists
    with Ledger.open(prepared.folder) as ledger:
        with pytest.raises(SubmitError, match="unresolved"):
            _submitter(prepared, ledger, fake).submit()
        assert fake.sbatch_calls() == 2
    fake.held.clear()  # slurmctld sent it
    with Ledger.open(prepared.folder) as ledger:
        assert _submitter(prepared, ledger, fake).submit().recovered == 1
        assert ledger.check_invariants() == []
    runs = _points_run(fake, prepared.folder)
    assert set(runs) == {p.point_id for p in prepared.points} and set(runs.values()) == {1}, runs


@pytest.mark.parametrize(("capture", "held"), [("sdiag_dbd_down.txt", 5), ("sdiag.txt", 5)])
def test_sdiag_backlog_is_read_from_real_output(capture, held):
    """Real sdiag (Slurm 22.05): slurmdbd down with a job's records held, and 3 s after it came back."""
    from hpcjobs.schedulers.slurm.formats import parse_dbd_agent_queue

    text = (ROOT / "tests" / "data" / "slurm" / "testbed" / capture).read_text()
    assert parse_dbd_agent_queue(text) == held
    assert parse_dbd_agent_queue(text.replace(f"DBD Agent queue size: {held}", "DBD Agent queue size: 0")) == 0


@pytest.mark.parametrize("sdiag", ["", "sdiag: error: Access/permission denied\n", "Agent queue size: 3\n"])
def test_an_sdiag_that_does_not_say_leaves_the_history_in_charge(sdiag, tmp_path, monkeypatch):
    """A site that restricts sdiag (or an answer without the line): the history's answer stands, as before."""
    from hpcjobs.schedulers.slurm.formats import parse_dbd_agent_queue

    assert parse_dbd_agent_queue(sdiag) is None
    fake = LyingSlurm(accounting_knows=True)
    real = fake.__call__

    def restricted(argv, **kw):
        if argv[0] == "sdiag":
            return process.CommandResult(tuple(argv), 1 if "error" in sdiag else 0, "" if "error" in sdiag else sdiag,
                                         sdiag if "error" in sdiag else "", 0.0)
        return real(argv, **kw)

    prepared = _prepare(tmp_path, fake, monkeypatch, n=10)
    monkeypatch.setattr(process, "run_command", restricted)
    client = SchedulerClient(get_backend("slurm"))
    from hpcjobs.sweep.lookup import tagged_jobs

    assert tagged_jobs(client, prepared.sweep_id, prepared.experiment.name, "me").conclusive


def test_history_failing_after_an_ambiguous_answer_is_not_a_no(tmp_path, monkeypatch):
    """A lost sbatch answer, the job already gone from squeue, sacct down: the chunk is not sent again."""
    fake = LyingSlurm(script=["ok", "timeout"], delay=0.0, accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch, n=10)
    ledger = open_ledger(prepared)
    real = fake._queue

    def queued_and_gone(*args, **kw):  # the second job runs at once and leaves squeue before anyone looks
        job_id = real(*args, **kw)
        if len(fake.jobs) == 2:
            fake.finish(job_id)
            fake.purge(job_id)
            fake.accounting_down = True
        return job_id

    fake._queue = queued_and_gone
    with pytest.raises(SubmitError, match="ambiguous"):
        _submitter(prepared, ledger, fake).submit()
    assert fake.sbatch_calls() == 2
    fake.accounting_down = False
    _submitter(prepared, ledger, fake).submit()
    assert fake.sbatch_calls() == 2 and ledger.summary() == {"SUBMITTED": 10}
    ledger.close()


def test_accounting_down_while_polling_loses_nothing_and_says_so(tmp_path, monkeypatch, caplog):
    """Arrays end and leave squeue while sacct fails: the points keep their state, none goes again."""
    monkeypatch.setenv(LOOKUP_ENV, "0")  # no grace period: only the scheduler's answers decide
    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch)
    ledger = open_ledger(prepared)
    _submitter(prepared, ledger, fake).submit()
    assert ledger.summary() == {"SUBMITTED": 15}
    for job_id in fake.jobs:
        fake.finish(job_id)
        fake.purge(job_id)
    fake.accounting_down = True
    client = SchedulerClient(get_backend("slurm"))
    with caplog.at_level(logging.WARNING, logger="hpcjobs"):
        for _ in range(6):
            caplog.clear()
            poll_status(ledger, client)
            assert ledger.summary() == {"SUBMITTED": 15}
            # every poll says why nothing moves, from the first one on
            assert any("accounting did not answer" in r.getMessage() and "keep their last known state"
                       in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert _submitter(prepared, ledger, fake).submit().points_submitted == 0
    assert fake.sbatch_calls() == 3
    fake.accounting_down = False
    poll_status(ledger, client)
    assert ledger.summary() == {"COMPLETED": 15}
    assert ledger.check_invariants() == []
    ledger.close()


def test_a_cluster_without_accounting_still_decides_from_its_queue(tmp_path, monkeypatch):
    """sacct saying accounting storage is disabled is no outage: squeue is the whole truth there."""
    fake = LyingSlurm(script=["lost"], accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch, n=5)
    real = fake.__call__

    def no_accounting(argv, **kw):
        if argv[0] == "sacct":
            from hpcjobs.process import CommandResult

            return CommandResult(tuple(argv), 1, "", "sacct: error: Slurm accounting storage is disabled\n", 0.0)
        return real(argv, **kw)

    monkeypatch.setattr(process, "run_command", no_accounting)
    with open_ledger(prepared) as ledger:
        _submitter(prepared, ledger, fake).submit()  # lost, looked up (not queued), submitted again
        assert fake.sbatch_calls() == 2 and ledger.summary() == {"SUBMITTED": 5}


@pytest.mark.parametrize("removed", ["ledger", "sweep folder"])
def test_a_deleted_ledger_does_not_submit_its_queued_jobs_again(tmp_path, monkeypatch, removed):
    """The ledger (or the whole sweep folder) removed while 3 arrays are queued: the rerun refuses."""
    import shutil

    from hpcjobs.sweep.ledger.store import LEDGER_FILE

    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch)
    with open_ledger(prepared) as ledger:
        _submitter(prepared, ledger, fake).submit()
    fake.finish("100")
    fake.purge("100")  # one of them already ran and left the queue: accounting still knows it
    if removed == "ledger":
        for f in prepared.folder.glob(LEDGER_FILE + "*"):
            f.unlink()
    else:
        shutil.rmtree(prepared.folder)
    again = prepare_sweep(experiment(tmp_path, 15), site=SMALL, root=tmp_path / "sweeps")
    assert again.sweep_id == prepared.sweep_id
    with open_ledger(again) as ledger, pytest.raises(SubmitError, match="3 job") as err:
        _submitter(again, ledger, fake).submit()
    assert "100 101 102" in str(err.value) and "twice" in str(err.value)
    assert fake.sbatch_calls() == 3
    fake.accounting_down = True  # the live queue alone still shows two of them: refused
    with open_ledger(again) as ledger, pytest.raises(SubmitError, match="2 job"):
        _submitter(again, ledger, fake).submit()
    for job_id in ("101", "102"):
        fake.finish(job_id)
        fake.purge(job_id)
    with open_ledger(again) as ledger, pytest.raises(SubmitError, match="could not be asked"):
        _submitter(again, ledger, fake).submit()  # nothing to see, and no history to ask: refused
    assert fake.sbatch_calls() == 3


def test_a_new_sweep_asks_once_and_starts(tmp_path, monkeypatch):
    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch, n=5)
    with open_ledger(prepared) as ledger:
        _submitter(prepared, ledger, fake).submit()
        assert ledger.summary() == {"SUBMITTED": 5}
    first = next(i for i, c in enumerate(fake.calls) if c[0] == "sbatch")
    before = [c[0] for c in fake.calls[:first] if "--format=%F|%k" in c or "--format=JobID,Comment" in c]
    assert before == ["squeue", "sacct"]  # one tag query of the live queue and the history


def test_the_same_experiment_in_another_folder_is_another_sweep(tmp_path, monkeypatch):
    """Two folders, one experiment (one sweep id): the second starts beside the first's queued jobs."""
    fake = LyingSlurm(accounting_knows=True)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = _prepare(one, fake, monkeypatch, n=5)
    with open_ledger(first) as ledger:
        _submitter(first, ledger, fake).submit()
    second = _prepare(two, fake, monkeypatch, n=5)
    assert second.sweep_id == first.sweep_id and second.folder != first.folder
    with open_ledger(second) as ledger:
        _submitter(second, ledger, fake).submit()
        assert ledger.summary() == {"SUBMITTED": 5}
    assert fake.sbatch_calls() == 2
    tokens = [c.split(":")[3] for c in (j.comment for j in fake.live())]
    assert len({t[:6] for t in tokens}) == 2  # each folder's mark starts its tokens


def test_tokens_carry_their_folder_and_stay_random(tmp_path):
    from hpcjobs.states import made_for, new_token

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    tokens = {new_token(a) for _ in range(200)}
    assert len(tokens) == 200 and all(len(t) == 16 and made_for(t, a) and not made_for(t, b) for t in tokens)
    (tmp_path / "link").symlink_to(a)
    assert all(made_for(t, tmp_path / "link") for t in tokens)  # the resolved path decides
    assert len(new_token()) == 16


def test_resubmit_leaves_points_whose_job_the_scheduler_requeued(tmp_path, monkeypatch, caplog):
    """Accounting says chunk 0's job ended NODE_FAIL, but the scheduler requeued it: it is PENDING in the
    queue. Resubmitting the failures must not give those points a second live job; the others go."""
    from hpcjobs.sweep.api import resubmit_sweep

    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch)
    ledger = open_ledger(prepared)
    _submitter(prepared, ledger, fake).submit()
    first, second, third = sorted(fake.jobs, key=int)
    fake.finish(first, "NODE_FAIL")
    fake.jobs[first].queue_state = "PENDING"  # requeued: waiting to run again
    fake.finish(second, "FAILED")
    fake.finish(third)
    fake.purge(second)
    fake.purge(third)
    poll_status(ledger, SchedulerClient(get_backend("slurm")))
    assert ledger.summary() == {"NODE_FAIL": 5, "FAILED": 5, "COMPLETED": 5}
    ledger.close()
    with caplog.at_level(logging.WARNING, logger="hpcjobs.sweep"):
        _, report, reset = resubmit_sweep(prepared.folder, client=SchedulerClient(get_backend("slurm")))
    assert reset == 5 and report.points_submitted == 5
    assert any("queued again by the scheduler" in r.getMessage() for r in caplog.records)
    runs = _points_run(fake, prepared.folder)
    assert max(runs.values()) == 1 and len(runs) == 15, runs  # no point in two live jobs


def test_resubmit_stops_when_the_queue_cannot_be_asked(tmp_path, monkeypatch):
    from hpcjobs.errors import CommandError
    from hpcjobs.sweep.api import resubmit_sweep

    fake = LyingSlurm(accounting_knows=True)
    prepared = _prepare(tmp_path, fake, monkeypatch, n=5)
    ledger = open_ledger(prepared)
    _submitter(prepared, ledger, fake).submit()
    (job,) = fake.jobs
    fake.finish(job, "FAILED")
    poll_status(ledger, SchedulerClient(get_backend("slurm")))
    ledger.close()
    broken = fake.__call__

    def no_squeue(argv, **kw):
        if argv[0] == "squeue":
            raise CommandError(list(argv), 1, "", "squeue: error: Unable to contact slurm controller\n")
        return broken(argv, **kw)

    monkeypatch.setattr(process, "run_command", no_squeue)
    with pytest.raises(CommandError, match="squeue"):
        resubmit_sweep(prepared.folder, client=SchedulerClient(get_backend("slurm")))
    assert fake.sbatch_calls() == 1
    with Ledger.open(prepared.folder) as again:
        assert again.summary() == {"FAILED": 5}  # nothing reset, nothing submitted


def test_a_new_sweep_starts_while_slurmctld_holds_records(tmp_path, monkeypatch):
    """A busy cluster's backlog (sdiag) does not stop a new sweep: only a chunk in doubt waits for it."""
    fake = LyingSlurm(accounting_knows=True, held={"1"})
    prepared = _prepare(tmp_path, fake, monkeypatch, n=10)
    with open_ledger(prepared) as ledger:
        assert _submitter(prepared, ledger, fake).submit().points_submitted == 10
    assert not any(argv[0] == "sdiag" for argv in fake.calls)
