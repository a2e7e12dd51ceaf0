"""The sweep submitter against a fake Slurm (the subprocess seam replaced): chunking, lost answers, resumption."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import CommandError, CommandTimeout, LedgerError, SubmitError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger

SITES = Path(__file__).resolve().parent.parent / "sites"


class FakeSlurm:
    """A fake sbatch/squeue/sacct/scontrol that remembers submitted jobs and their comments.

    ``script`` decides the fate of each sbatch call: "ok", "refuse", "timeout-after" (accepted, then
    the answer is lost), "timeout-before" (lost and not accepted), "transient" (socket error, not accepted).
    """

    def __init__(self, script=(), max_array_size=101):
        self.script = list(script)
        self.max_array_size = max_array_size
        self.jobs: dict[str, dict] = {}
        self.next_id = 100
        self.calls: list[list[str]] = []

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = list(argv)
        self.calls.append(argv)
        name = argv[0]
        rc, out, err = 0, "", ""
        if name == "sbatch":
            fate = self.script.pop(0) if self.script else "ok"
            comment = next(a.split("=", 1)[1] for a in argv if a.startswith("--comment="))
            text = Path(argv[-1]).read_text()
            array = re.search(r"^#SBATCH --array=(\S+)", text, re.M).group(1)
            jobname = re.search(r"^#SBATCH --job-name=(\S+)", text, re.M).group(1)
            if fate in ("ok", "timeout-after"):
                job_id = str(self.next_id)
                self.next_id += 1
                self.jobs[job_id] = {"comment": comment, "array": array, "name": jobname}
                out = f"{job_id}\n"
            if fate == "refuse":
                rc, err = 1, "sbatch: error: Batch job submission failed: Invalid account\n"
            elif fate == "transient":
                rc, err = 1, "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
            elif fate.startswith("timeout"):
                raise CommandTimeout(argv, None, "", "", reason="timed out after 60 s")
        elif name == "scontrol":
            out = f"ClusterName = fake\nMaxArraySize = {self.max_array_size}\nMinJobAge = 300 sec\n"
        elif name == "sacctmgr":
            out = ""
        elif name == "squeue" and "--format=%F|%k" in argv:
            wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))
            out = "".join(f"{j}|{d['comment']}\n" for j, d in self.jobs.items() if d["name"] == wanted)
        elif name == "sacct" and "--format=JobID,Comment" in argv:
            out = ""
        elif name == "sacct":
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            lines = []
            for j in ids:
                d = self.jobs.get(j)
                if d:
                    start, end = d["array"].split("%")[0].split("-")
                    for i in range(int(start), int(end) + 1):
                        lines.append(f"{j}_{i}|{j}|COMPLETED|0:0|None|{d['name']}|{d['comment']}")
            out = "\n".join(lines) + "\n"
        if check and rc:
            raise CommandError(argv, rc, out, err)
        return CommandResult(tuple(argv), rc, out, err, 0.0)

    def sbatch_calls(self):
        return [c for c in self.calls if c[0] == "sbatch"]


def _experiment(tmp_path: Path, n: int, extra: str = "") -> Path:
    f = tmp_path / "exp.yaml"
    f.write_text(f"name: fake\ncommand: echo $x\n{extra}sweep:\n  grid:\n    x: {list(range(n))}\n")
    return f


@pytest.fixture
def site():
    return str(SITES / "hpctest.yaml")


def _run(tmp_path, fake, monkeypatch, site, n=250, **kw):
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    prepared = prepare_sweep(_experiment(tmp_path, n), site=site, root=tmp_path / "sweeps")
    ledger = open_ledger(prepared)
    sub = SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")),
                         retry=RetryPolicy(attempts=4, initial=0.01), sleep=lambda s: None, **kw)
    return prepared, ledger, sub


def _submitted_points(fake: FakeSlurm, tmp_path: Path) -> list[str]:
    """Point ids of every task of every job the fake scheduler holds (duplicates show twice)."""
    out = []
    for d in fake.jobs.values():
        chunk = int(d["comment"].split(":")[2])
        ids = (next((tmp_path / "sweeps").glob("*")) / "chunks" / f"{chunk}.ids").read_text().split()
        start, end = d["array"].split("%")[0].split("-")
        assert int(end) - int(start) + 1 == len(ids)
        out += ids
    return out


def test_chunks_under_max_array_size(tmp_path, monkeypatch, site):
    fake = FakeSlurm(max_array_size=101)
    prepared, ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=250)
    report = sub.submit()
    assert report.chunks_submitted == 3  # ceil(250 / (101 - 1))
    assert [len(d["array"].split("-")) and d["array"] for d in fake.jobs.values()] == ["0-99", "0-99", "0-49"]
    assert sorted(_submitted_points(fake, tmp_path)) == sorted(p.point_id for p in prepared.points)
    assert len(fake.sbatch_calls()) == 3
    assert ledger.summary() == {"SUBMITTED": 250}


def test_throttle_goes_into_the_array(tmp_path, monkeypatch, site):
    fake = FakeSlurm()
    _, _, sub = _run(tmp_path, fake, monkeypatch, site, n=5, throttle=2)
    sub.submit()
    assert [d["array"] for d in fake.jobs.values()] == ["0-4%2"]


def test_lost_answer_after_acceptance_is_found_not_resubmitted(tmp_path, monkeypatch, site):
    fake = FakeSlurm(script=["ok", "timeout-after", "ok"])
    prepared, _ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=250)
    sub.submit()
    assert len(fake.jobs) == 3 and len(fake.sbatch_calls()) == 3
    assert sorted(_submitted_points(fake, tmp_path)) == sorted(p.point_id for p in prepared.points)


def test_lost_answer_before_acceptance_is_retried(tmp_path, monkeypatch, site):
    fake = FakeSlurm(script=["timeout-before", "transient", "ok"])
    prepared, ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=10)
    sub.submit()
    assert len(fake.jobs) == 1 and len(fake.sbatch_calls()) == 3
    assert sorted(_submitted_points(fake, tmp_path)) == sorted(p.point_id for p in prepared.points)
    assert ledger.check_invariants() == []


def test_refusal_raises_and_keeps_points_pending(tmp_path, monkeypatch, site):
    fake = FakeSlurm(script=["ok", "refuse"])
    _, ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=150)
    with pytest.raises(SubmitError, match="Invalid account"):
        sub.submit()
    assert ledger.summary() == {"SUBMITTED": 100, "PLANNED": 50}
    sub.submit()  # the same command again submits only what is missing
    assert ledger.summary() == {"SUBMITTED": 150}
    assert len(fake.jobs) == 2


def test_crash_between_plan_and_answer_resumes_without_duplicates(tmp_path, monkeypatch, site):
    fake = FakeSlurm()
    prepared, ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=250)

    class Crash(BaseException):
        pass

    real = fake.__call__
    calls = {"n": 0}

    def crashing(argv, **kw):
        result = real(argv, **kw)
        if argv[0] == "sbatch":
            calls["n"] += 1
            if calls["n"] == 2:
                raise Crash  # the job is queued, the submitter dies before recording its id
        return result

    monkeypatch.setattr(process, "run_command", crashing)
    with pytest.raises(Crash):
        sub.submit()
    ledger.close()
    monkeypatch.setattr(process, "run_command", fake)
    ledger = Ledger.open(prepared.folder)
    report = SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm"))).submit()
    assert report.recovered == 1
    assert len(fake.jobs) == 3
    assert sorted(_submitted_points(fake, tmp_path)) == sorted(p.point_id for p in prepared.points)


def test_second_submitter_is_locked_out(tmp_path, monkeypatch, site):
    fake = FakeSlurm()
    prepared, ledger, _sub = _run(tmp_path, fake, monkeypatch, site, n=3)
    with ledger.lock():
        other = Ledger.open(prepared.folder)
        with pytest.raises(LedgerError, match="being submitted"):
            SweepSubmitter(prepared, other, SchedulerClient(get_backend("slurm"))).submit()


def test_run_sweep_is_idempotent_and_status_is_one_call(tmp_path, monkeypatch, site):
    fake = FakeSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = _experiment(tmp_path, 250)
    prepared, _report = run_sweep(exp, site=site, root=tmp_path / "sweeps")
    again, report2 = run_sweep(exp, site=site, root=tmp_path / "sweeps")
    assert again.sweep_id == prepared.sweep_id and report2.points_submitted == 0
    before = len(fake.calls)
    st = sweep_status(prepared.sweep_id, root=tmp_path / "sweeps")
    assert [c[0] for c in fake.calls[before:]] == ["sacct"]
    assert st.counts == {"COMPLETED": 250} and st.done


def test_dry_run_prints_commands_and_submits_nothing(tmp_path, monkeypatch, site):
    fake = FakeSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    _prepared, report = run_sweep(_experiment(tmp_path, 250), site=site, root=tmp_path / "sweeps", dry_run=True)
    assert len(report.dry_run_commands) == 3
    assert all(c[0] == "sbatch" for c in report.dry_run_commands)
    assert "#SBATCH --array=0-99" in report.dry_run_script
    assert {c[0] for c in fake.calls} <= {"scontrol", "sacctmgr"}  # read-only questions, no submission
    assert not (tmp_path / "sweeps").exists()


class LimitedSlurm(FakeSlurm):
    """The fake scheduler with a QOS submit limit: sacctmgr reports it, squeue counts the queued tasks."""

    def __init__(self, limit: int, **kw):
        super().__init__(**kw)
        self.limit = limit

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        if argv[0] == "sacctmgr" and "qos" in argv:
            return CommandResult(tuple(argv), 0, f"normal|{self.limit}\n", "", 0.0)
        if argv[0] == "sacctmgr":
            return CommandResult(tuple(argv), 0, "fake|hpcjobs||||normal|normal\n", "", 0.0)
        return super().__call__(argv, timeout=timeout, input=input, env=env, cwd=cwd, check=check)


def test_chunks_fit_the_qos_submit_limit(tmp_path, monkeypatch, site):
    """A chunk above the user's submit limit could never be queued: chunks shrink to the QOS limit."""
    fake = LimitedSlurm(limit=40, max_array_size=101)
    _prepared, ledger, sub = _run(tmp_path, fake, monkeypatch, site, n=100)
    report = sub.submit()
    assert [d["array"] for d in fake.jobs.values()] == ["0-39", "0-39", "0-19"]
    assert report.chunks_submitted == 3 and ledger.summary() == {"SUBMITTED": 100}
