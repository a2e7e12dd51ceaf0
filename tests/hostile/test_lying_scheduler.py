"""Exactly-once submission when the scheduler lies: late queuing, ids with errors, bogus ids, lost ledgers.

The unit tests drive the real submitter and ledger against :class:`LyingSlurm` (the subprocess seam
replaced, time moved by the injected sleep). The ``slurm`` tests put a lying ``sbatch`` in front of the
real one on the testbed and count the jobs that carry the sweep's tag.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import ConfigError, LedgerError, SubmitError
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import LEDGER_FILE, Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV, default_lookup_seconds
from hpcjobs.sweep.poll import poll_status
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger
from tests.hostile._lying_helpers import LyingSlurm, experiment

ROOT = Path(__file__).resolve().parents[2]
SITES = ROOT / "tests" / "sites"
SITE = str(SITES / "hpctest.yaml")
SMALL = str(SITES / "hpctest-small-arrays.yaml")  # chunks of 5 points


def _submitter(tmp_path: Path, fake: LyingSlurm, monkeypatch: pytest.MonkeyPatch, n: int = 5, *,
               site: str = SITE, lookup_s: float = 60.0, attempts: int = 4):
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    prepared = prepare_sweep(experiment(tmp_path, n), site=site, root=tmp_path / "sweeps")
    ledger = open_ledger(prepared)
    sub = SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")), sleep=fake.sleep,
                         retry=RetryPolicy(attempts=attempts, initial=0.5, lookup_s=lookup_s))
    return prepared, ledger, sub


def _again(prepared, ledger, fake: LyingSlurm, lookup_s: float = 60.0) -> SweepSubmitter:
    return SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")), sleep=fake.sleep,
                          retry=RetryPolicy(attempts=4, initial=0.5, lookup_s=lookup_s))


def _accepted(ledger: Ledger) -> set[str]:
    return {s.job_id for s in ledger.submissions() if s.state == "submitted"}


# ------------------------------------------------------------------------------ ambiguous answers

def test_socket_timeout_then_late_queue_is_found_not_resubmitted(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["late", "ok", "late"], delay=2.5)
    prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch, 15, site=SMALL)
    report = sub.submit()
    assert fake.sbatch_calls() == 3 and len(fake.live()) == 3
    assert ledger.summary() == {"SUBMITTED": 15}
    assert _accepted(ledger) == {j.job_id for j in fake.live()} == set(report.job_ids)
    assert ledger.check_invariants() == []
    assert fake.now >= 2.5 * 2  # it waited for each late job
    assert _again(prepared, ledger, fake).submit().points_submitted == 0  # a rerun submits nothing
    assert fake.sbatch_calls() == 3 and len(fake.jobs) == 3


def test_command_timeout_then_late_queue_is_found(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["timeout"], delay=5)
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    sub.submit()
    assert fake.sbatch_calls() == 1 and ledger.summary() == {"SUBMITTED": 5}


def test_id_printed_with_exit_1_is_checked_not_discarded(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["id-exit1"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    report = sub.submit()
    assert fake.sbatch_calls() == 1 and report.job_ids == ["100"]
    (s,) = ledger.submissions()
    assert (s.state, s.job_id) == ("submitted", "100")
    assert "printed job id 100" in s.stderr


def test_output_that_is_no_id_with_exit_0_is_looked_up(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["garbage"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    assert sub.submit().job_ids == ["100"]
    assert fake.sbatch_calls() == 1 and ledger.summary() == {"SUBMITTED": 5}


def test_never_queued_is_retried_after_the_lookup_time(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["lost", "ok"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=20)
    sub.submit()
    assert fake.sbatch_calls() == 2 and len(fake.live()) == 1
    first, second = ledger.submissions()
    assert (first.state, second.state) == ("failed", "submitted")
    assert "not in the scheduler" in first.stderr
    # backoff 1, 2, 4, 8 s (the next, 16, would pass 20 s), then one look at the history
    assert fake.now == 15  # waited 1 + 2 + 4 + 8 s; the retry wait (0.5 s) is already covered
    live_polls = [c for c in fake.calls if c[0] == "squeue" and "--format=%F|%k" in c]
    # the check that a new sweep has no job yet, 5 polls, the final look with history, one check of the printed id
    assert len(live_polls) == 1 + 5 + 1 + 1


def test_backoff_gives_up_and_says_so(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["lost", "lost"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=4, attempts=2)
    with pytest.raises(SubmitError, match="could not be submitted after 2 attempts"):
        sub.submit()
    assert fake.sbatch_calls() == 2 and not fake.jobs
    assert [s.state for s in ledger.submissions()] == ["failed", "failed"]
    assert ledger.summary() == {"PLANNED": 5}
    assert fake.now <= 2 * 4 + 0.5 + 1e-9  # bounded by the lookup time (plus the retry wait)


def test_unreadable_queue_after_ambiguous_answer_marks_nothing_failed(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["late"], delay=1, break_queue_on_sbatch=True)
    prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=5)
    with pytest.raises(SubmitError, match="could not be read"):
        sub.submit()
    assert ledger.summary() == {"SUBMITTING": 5}  # not released: it may be queued
    assert [s.state for s in ledger.submissions()] == ["unknown"]
    fake.squeue_broken = fake.break_queue_on_sbatch = False
    report = _again(prepared, ledger, fake).submit()
    assert report.recovered == 1 and report.points_submitted == 0
    assert fake.sbatch_calls() == 1 and ledger.summary() == {"SUBMITTED": 5}


# ------------------------------------------------------------------------------ wrong ids

def test_bogus_id_is_replaced_by_the_tagged_job(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["bogus"])
    prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    report = sub.submit()
    assert report.job_ids == ["100"] and fake.sbatch_calls() == 1
    (s,) = ledger.submissions()
    assert (s.state, s.job_id) == ("submitted", "100")
    assert "corrected from 990001 to 100" in s.stderr
    assert {p.array_job_id for p in ledger.points()} == {"100"}
    assert _again(prepared, ledger, fake).submit().points_submitted == 0
    assert fake.sbatch_calls() == 1


def test_bogus_id_without_a_job_is_lost_and_submitted_again(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["bogus-nojob"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=3)
    report = sub.submit()
    assert report.lost == 1 and fake.sbatch_calls() == 2
    assert [j.job_id for j in fake.live()] == ["100"] and report.job_ids == ["100"]
    lost, good = ledger.submissions()
    assert lost.state == "failed" and lost.stderr.startswith("lost: job 990001")
    assert (good.state, good.job_id) == ("submitted", "100")
    assert ledger.summary() == {"SUBMITTED": 5} and ledger.check_invariants() == []


def test_status_polls_mark_an_unknown_id_lost_after_a_grace_period(tmp_path, monkeypatch):
    monkeypatch.setenv(LOOKUP_ENV, "0")
    fake = LyingSlurm()
    _prepared, ledger, _ = _submitter(tmp_path, fake, monkeypatch)
    ids = [p.point_id for p in ledger.points()]
    token = ledger.plan_chunk(ids, 0)
    ledger.mark_submitted(token, "424242")  # an id no scheduler ever had
    client = SchedulerClient(get_backend("slurm"))
    for _ in range(2):
        poll_status(ledger, client)
        assert ledger.summary() == {"SUBMITTED": 5}
    assert poll_status(ledger, client) == 5
    assert ledger.summary() == {"PLANNED": 5} and ledger.submission(token).state == "failed"
    assert ledger.check_invariants() == []


def test_status_polls_correct_an_id_whose_tag_is_found_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv(LOOKUP_ENV, "0")
    fake = LyingSlurm(script=["bogus"])
    _prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    sub._verify_printed_ids = lambda report: 0  # as if the check after submitting could not run
    sub.submit()
    (s,) = ledger.submissions()
    assert s.job_id == "990001"
    client = SchedulerClient(get_backend("slurm"))
    poll_status(ledger, client)
    poll_status(ledger, client)
    assert ledger.submission(s.token).job_id == "990001"  # not yet: a grace of three polls
    poll_status(ledger, client)
    assert ledger.submission(s.token).job_id == "100"
    poll_status(ledger, client)
    assert ledger.summary() == {"PENDING": 5}


# ------------------------------------------------------------------------------ strays

def test_late_arrival_after_giving_up_is_cancelled_and_recorded(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["late", "ok"], delay=10)
    prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=2)
    sub.submit()  # gave up on the first after 2 s, the second is accepted
    assert fake.sbatch_calls() == 2
    fake.sleep(20)  # the first job turns up
    assert len(fake.live()) == 2
    report = _again(prepared, ledger, fake).submit()
    assert report.strays_cancelled == ["100"] and report.points_submitted == 0
    assert [j.job_id for j in fake.live()] == ["101"]
    (stray,) = ledger.strays()
    assert (stray.job_id, stray.action) == ("100", "cancelled")
    assert stray.token == ledger.submissions()[0].token
    assert _again(prepared, ledger, fake).submit().strays_cancelled == []  # recorded: not cancelled twice


def test_late_arrival_whose_points_are_still_pending_is_adopted(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["late", "refuse"], delay=10)
    prepared, ledger, sub = _submitter(tmp_path, fake, monkeypatch, lookup_s=2)
    with pytest.raises(SubmitError, match="Invalid account"):
        sub.submit()
    assert ledger.summary() == {"PLANNED": 5}
    fake.sleep(20)
    report = _again(prepared, ledger, fake).submit()
    assert report.points_submitted == 0 and report.strays_cancelled == []
    assert fake.sbatch_calls() == 2 and [j.job_id for j in fake.live()] == ["100"]
    assert ledger.summary() == {"SUBMITTED": 5} and _accepted(ledger) == {"100"}
    assert ledger.check_invariants() == []


def test_two_jobs_with_one_token_keep_one(tmp_path, monkeypatch):
    fake = LyingSlurm(script=["twice"])
    _, ledger, sub = _submitter(tmp_path, fake, monkeypatch)
    sub.submit()
    assert [j.job_id for j in fake.live()] == ["100"]
    assert [(s.job_id, s.action) for s in ledger.strays()] == [("101", "cancelled")]


# ------------------------------------------------------------------------------ configuration

def test_lookup_time_from_the_environment(monkeypatch):
    monkeypatch.delenv(LOOKUP_ENV, raising=False)
    assert default_lookup_seconds() == 60.0 and RetryPolicy().lookup_s == 60.0
    monkeypatch.setenv(LOOKUP_ENV, "7.5")
    assert RetryPolicy().lookup_s == 7.5
    for bad in ("soon", "-1", "nan", "1e9"):
        monkeypatch.setenv(LOOKUP_ENV, bad)
        with pytest.raises(ConfigError, match=LOOKUP_ENV) as err:
            default_lookup_seconds()
        assert err.value.exit_code == 2


# ------------------------------------------------------------------------------ a ledger that lost its sweep

def _first_run(tmp_path, monkeypatch) -> tuple[LyingSlurm, Path, Path]:
    fake = LyingSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = experiment(tmp_path, 5)
    prepared, _ = run_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    return fake, exp, prepared.folder


def test_zero_byte_ledger_beside_scripts_refuses_to_start(tmp_path, monkeypatch):
    fake, exp, folder = _first_run(tmp_path, monkeypatch)
    (folder / LEDGER_FILE).write_bytes(b"")
    with pytest.raises(ConfigError) as err:
        run_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    text = str(err.value)
    assert err.value.exit_code == 2
    assert "empty (0 bytes)" in text and "scripts/ (1 files)" in text and "chunks/" in text
    assert f"mv {folder} {folder}.broken" in text and f"hpcjobs:{folder.name}:" in text
    assert err.value.problems[0].file == str(folder / LEDGER_FILE)
    assert fake.sbatch_calls() == 1  # nothing submitted again
    assert (folder / LEDGER_FILE).stat().st_size == 0  # and the evidence is left as it was


def test_schemaless_ledger_beside_chunks_refuses_to_start(tmp_path, monkeypatch):
    fake, exp, folder = _first_run(tmp_path, monkeypatch)
    (folder / LEDGER_FILE).unlink()
    with contextlib.closing(sqlite3.connect(folder / LEDGER_FILE)) as con:
        con.execute("CREATE TABLE unrelated (x)")
        con.commit()
    shutil.rmtree(folder / "scripts")
    with pytest.raises(ConfigError, match=r"empty \(no sweep record\).*chunks/"):
        run_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    assert fake.sbatch_calls() == 1


def test_zero_byte_ledger_in_an_empty_folder_is_initialised(tmp_path, monkeypatch):
    fake = LyingSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = experiment(tmp_path, 5)
    prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    prepared.folder.mkdir(parents=True)
    (prepared.folder / LEDGER_FILE).write_bytes(b"")
    _, report = run_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    assert report.points_submitted == 5 and fake.sbatch_calls() == 1


def test_cli_exit_2_on_a_zero_byte_ledger(tmp_path, monkeypatch):
    _fake, exp, folder = _first_run(tmp_path, monkeypatch)
    (folder / LEDGER_FILE).write_bytes(b"")
    env = {**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(ROOT)}  # no scheduler command can run
    res = subprocess.run([sys.executable, "-m", "hpcjobs", "sweep", str(exp), "--site", SITE, "--root",
                          str(tmp_path / "sweeps")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "Refusing to start" in res.stderr.replace("\n", " ")


# ------------------------------------------------------------------------------ read-only ledger

@contextlib.contextmanager
def _read_only(path: Path):
    """Make ``path`` unwritable even for root (``chattr +i``), else by mode bits."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("chattr +i is not available here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)


def test_status_on_a_read_only_ledger_shows_without_writing(tmp_path, monkeypatch, caplog):
    fake, _exp, folder = _first_run(tmp_path, monkeypatch)
    ledger_file = folder / LEDGER_FILE
    before = hashlib.sha256(ledger_file.read_bytes()).hexdigest()
    fake.jobs["100"].state = "COMPLETED"
    with _read_only(ledger_file):
        assert not os.access(ledger_file, os.W_OK)
        st = sweep_status(folder.name, root=tmp_path / "sweeps")
    assert st.read_only and st.as_dict()["read_only"] is True
    assert st.counts == {"COMPLETED": 5} and st.changed == 5
    assert "read-only" in caplog.text
    assert hashlib.sha256(ledger_file.read_bytes()).hexdigest() == before
    with Ledger.open(folder) as ledger:
        assert ledger.summary() == {"SUBMITTED": 5}  # nothing was recorded
    assert not sweep_status(folder.name, root=tmp_path / "sweeps").read_only


# ------------------------------------------------------------------------------ the real Slurm testbed

LYING_SBATCH = """#!/bin/bash
# A lying sbatch in front of the real one ($REAL_SBATCH). LIE: late | id-exit1 | bogus.
real=${REAL_SBATCH:?}
case "$LIE" in
  late)
    ( sleep 3; "$real" "$@" >/dev/null 2>&1 ) </dev/null >/dev/null 2>&1 &
    echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
    exit 1;;
  id-exit1)
    "$real" "$@" || exit
    echo "sbatch: error: slurm_receive_msg: Socket timed out on send/recv operation" >&2
    exit 1;;
  bogus)
    "$real" "$@" >/dev/null || exit
    echo 999999999
    exit 0;;
esac
exec "$real" "$@"
"""


def _tagged_on_testbed(sweep_id: str, name: str) -> list[tuple[str, str]]:
    """(job id, state) of every job carrying the sweep's tag, from squeue and sacct."""
    out = process.run_command(["sacct", "-n", "-P", "-X", f"--name={name}", "-S", "now-1hour",
                               "--format=JobID,Comment,State"]).stdout
    jobs = {line.split("|")[0].split("_")[0]: line.split("|")[2] for line in out.splitlines()
            if f"hpcjobs:{sweep_id}:" in line}
    queue = process.run_command(["squeue", "--noheader", "--states=all", f"--name={name}", "--format=%F|%k|%T"],
                                check=False).stdout
    for line in queue.splitlines():
        if f"hpcjobs:{sweep_id}:" in line:
            jobs.setdefault(line.split("|")[0], line.split("|")[2])
    return sorted(jobs.items())


@pytest.mark.slurm
@pytest.mark.parametrize("lie", ["late", "id-exit1", "bogus"])
def test_lying_sbatch_on_the_testbed_ends_with_one_job_per_chunk(lie, tmp_path, monkeypatch):
    from tests.integration.conftest import testbed_problem

    problem = testbed_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Slurm testbed does not answer ({problem})")
        pytest.skip(f"no Slurm testbed ({problem})")
    real = shutil.which("sbatch")
    assert real is not None
    tmp_path.chmod(0o777)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "sbatch"
    wrapper.write_text(LYING_SBATCH)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("REAL_SBATCH", real)
    monkeypatch.setenv("LIE", lie)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv(LOOKUP_ENV, "20")  # small, and still far above the 3 s of the late queue
    monkeypatch.chdir(tmp_path)
    name = f"lie{lie.replace('-', '')}"
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: {name}\ndescription: run in {tmp_path}\nresources: {{walltime: 5m}}\n"
                   "command: 'true'\nsweep:\n  grid:\n    x: [0, 1, 2, 3, 4]\n")
    site = tmp_path / "tiny.yaml"  # one point per array: 5 points, 5 submissions, 5 lies
    site.write_text(Path(SMALL).read_text().replace("name: hpctest-small-arrays", "name: hpctest-tiny-arrays")
                    .replace("max_array_size: 6", "max_array_size: 2"))
    prepared, report = run_sweep(exp, site=str(site), root=tmp_path / "sweeps")
    assert report.points_submitted == 5 and report.chunks_submitted == 5
    jobs = _tagged_on_testbed(prepared.sweep_id, name)
    live = [j for j, state in jobs if not state.startswith("CANCELLED")]
    assert len(live) == 5, jobs
    with Ledger.open(prepared.folder) as ledger:
        assert _accepted(ledger) == set(live) == set(report.job_ids)
        assert ledger.summary() == {"SUBMITTED": 5}
        assert ledger.check_invariants() == []
    _, again = run_sweep(exp, site=str(site), root=tmp_path / "sweeps")  # a rerun submits nothing
    assert again.points_submitted == 0 and again.strays_cancelled == []
    assert [j for j, _ in _tagged_on_testbed(prepared.sweep_id, name)] == [j for j, _ in jobs]


# ------------------------------------------------------------------------------ the ledger's own guards

def test_ledger_never_releases_or_adopts_what_it_cannot(tmp_path, monkeypatch):
    fake = LyingSlurm()
    _prepared, ledger, _ = _submitter(tmp_path, fake, monkeypatch)
    ids = [p.point_id for p in ledger.points()]
    seen = ledger.plan_chunk(ids[:2], 0)
    ledger.mark_submitted(seen, "100")
    from hpcjobs.schedulers.base import JobStatus

    ledger.record_status([JobStatus(job_id="100_0", state="RUNNING", state_raw="RUNNING", array_job_id="100",
                                    array_task_id=0)])
    with pytest.raises(LedgerError, match="has had a status"):
        ledger.mark_lost(seen, "test")  # the scheduler did know this job
    failed = ledger.plan_chunk(ids[2:4], 1)
    ledger.mark_failed(failed, "refused")
    taken = ledger.plan_chunk(ids[2:4], 2)  # its points went again
    assert not ledger.adopt_late_submission(failed, "105")  # its points are in flight under another token
    ledger.mark_failed(taken, "refused")
    assert ledger.adopt_late_submission(taken, "106")  # points pending again: the late job is taken back
    assert not ledger.adopt_late_submission(failed, "105")  # ... and only once
    assert (ledger.submission(taken).state, ledger.submission(taken).job_id) == ("submitted", "106")
    assert ledger.submission(failed).state == "failed"
    assert {p.point_id: (p.state, p.array_job_id, p.array_index) for p in ledger.points()[2:4]} == {
        ids[2]: ("SUBMITTED", "106", 0), ids[3]: ("SUBMITTED", "106", 1)}
    assert ledger.check_invariants() == []
