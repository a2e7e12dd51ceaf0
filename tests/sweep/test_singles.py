"""Single jobs of ``hpcjobs submit`` in a ledger: exactly once per request, found by job id, lost answers.

The scheduler is a fake Slurm behind the subprocess seam (``hpcjobs.process.run_command``) that holds
plain (non-array) jobs, with a fake clock: ``sbatch`` takes the next fate from ``script`` (as the
lying scheduler of ``tests/hostile``), ``squeue``/``sacct`` answer the tag queries and the status calls
from what it holds, ``scancel`` cancels. A job "runs" when it is queued: it writes its stdout file
where its ``--output`` directive says.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs import process
from hpcjobs.cli import main
from hpcjobs.errors import CommandError, CommandTimeout, ConfigError, SubmitError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta
from hpcjobs.sweep.singles import submit_single
from hpcjobs.sweep.singles_read import (
    INDEX_FILE,
    KIND,
    SINGLES_DIR,
    find_single,
    index_job,
    job_ids_match,
    read_single,
)

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
SOCKET = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"


class Crash(BaseException):
    """A ``kill -9`` of the submitting process right after sbatch queued the job (nothing below it runs)."""


@dataclass
class FakeJob:
    job_id: str
    comment: str
    name: str
    visible_at: float
    state: str = "RUNNING"
    exit: str = "0:0"
    #: What squeue shows when it differs from accounting (a requeued job: PENDING again); None: not in squeue.
    queue_state: str | None = None


@dataclass
class PlainSlurm:
    """A fake Slurm for plain jobs. Fates: ok, refuse, lost, late, timeout, crash, id-exit1, garbage, twice."""

    script: list[str] = field(default_factory=list)
    delay: float = 3.0
    now: float = 0.0
    squeue_broken: bool = False
    #: The queue breaks at the first sbatch (the check that a new request has no job yet still answered).
    break_queue_on_sbatch: bool = False
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    next_id: int = 100

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def _queue(self, argv: list[str], at: float) -> str:
        comment = next(a.split("=", 1)[1] for a in argv if a.startswith("--comment="))
        text = Path(argv[-1]).read_text()
        name = re.search(r"^#SBATCH --job-name=(\S+)", text, re.M).group(1)
        assert not re.search(r"^#SBATCH --array", text, re.M), "a single job is a plain job"
        job_id = str(self.next_id)
        self.next_id += 1
        self.jobs[job_id] = FakeJob(job_id, comment, name, at)
        out = re.search(r"^#SBATCH --output=(\S+)", text, re.M).group(1).replace("%x", name).replace("%j", job_id)
        path = Path(self.cwd) / out
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"hello from job {job_id}\n")
        return job_id

    def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
        fate = self.script.pop(0) if self.script else "ok"
        if fate == "refuse":
            return 1, "", "sbatch: error: Batch job submission failed: Invalid account or account/partition\n"
        if fate == "lost":
            return 1, "", SOCKET
        if fate == "late":
            self._queue(argv, self.now + self.delay)
            return 1, "", SOCKET
        if fate == "timeout":
            self._queue(argv, self.now + self.delay)
            raise CommandTimeout(argv, None, "", "", reason="timed out after 60 s")
        job_id = self._queue(argv, self.now)
        if fate == "crash":
            raise Crash()
        if fate == "twice":
            self._queue(argv, self.now)
        if fate == "id-exit1":
            return 1, f"{job_id}\n", "sbatch: error: slurm_receive_msg: Zero Bytes were transmitted or received\n"
        if fate == "garbage":
            return 0, "sbatch: Submitted batch job, maybe\n", ""
        return 0, f"{job_id}\n", ""

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        self.cwd = cwd or "."
        rc, out, err = 0, "", ""
        cmd = argv[0]
        if cmd == "sbatch":
            self.squeue_broken = self.squeue_broken or self.break_queue_on_sbatch
            rc, out, err = self._sbatch(argv)
        elif cmd == "squeue" and "--format=%F|%k" in argv:
            if self.squeue_broken:
                rc, err = 1, "squeue: error: Unable to contact slurm controller (connect failure)\n"
            else:
                wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))
                out = "".join(f"{j.job_id}|{j.comment}\n" for j in self.visible() if j.name == wanted)
        elif cmd == "sacct" and "--format=JobID,Comment" in argv:
            if self.squeue_broken:
                rc, err = 1, "sacct: error: Problem talking to the database: Connection refused\n"
        elif cmd == "sacct":
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            out = "".join(f"{j}|{j}|{job.state}|{job.exit}|None|{job.name}|{job.comment}\n"
                          for j in ids if (job := self.jobs.get(j)) and job.visible_at <= self.now)
        elif cmd == "squeue" and any(a.startswith("--jobs=") for a in argv):
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            out = "".join(f"{j}|{j}|{j}|N/A|{job.queue_state}|None|{job.name}|{job.comment}\n"
                          for j in ids if (job := self.jobs.get(j)) and job.queue_state and job.visible_at <= self.now)
        elif cmd == "scancel":
            for j in argv[1:]:
                if j in self.jobs:
                    self.jobs[j].state = "CANCELLED"
        if check and rc:
            raise CommandError(argv, rc, out, err)
        return CommandResult(tuple(argv), rc, out, err, 0.0)

    def visible(self) -> list[FakeJob]:
        return [j for j in self.jobs.values() if j.visible_at <= self.now]

    def sbatch_calls(self) -> int:
        return sum(1 for c in self.calls if c[0] == "sbatch")

    def count(self, name: str) -> int:
        return sum(1 for c in self.calls if c[0] == name)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    monkeypatch.setenv("HPCJOBS_SUBMIT_LOOKUP_S", "10")
    (tmp_path / "exp.yaml").write_text("name: single\n# a comment\ncommand: echo hi\nresources: {walltime: 5m}\n")
    return tmp_path


def _fake(monkeypatch: pytest.MonkeyPatch, *fates: str, **kw) -> PlainSlurm:
    fake = PlainSlurm(list(fates), **kw)
    monkeypatch.setattr(process, "run_command", fake)
    return fake


def _submit(fake: PlainSlurm, *overrides: str, new: bool = False, **kw):
    return submit_single("exp.yaml", site=SITE, overrides=overrides, new=new, sleep=fake.sleep,
                         client=SchedulerClient(get_backend("slurm")), **kw)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# ------------------------------------------------------------------------------------- exactly once


def test_the_same_request_is_submitted_once(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    code, out = cli("submit", "exp.yaml", "--site", SITE, "--json")
    assert code == 0, out
    first = json.loads(out)
    assert first["job_id"] == "100" and first["new"] is True and first["state"] == "SUBMITTED"
    assert first["stdout"] == str(project / "hpcjobs-logs" / "single-100.out")
    folder = project / "hpcjobs-sweeps" / SINGLES_DIR / first["request_id"]
    assert (folder / "ledger.sqlite").is_file()
    assert first["tag"] == f"hpcjobs:{first['request_id']}:0:{first['tag'].rsplit(':', 1)[1]}"
    # comments and key order are not the request's meaning: the same request, nothing submitted again
    (project / "exp.yaml").write_text("resources: {walltime: 5m}\ncommand: echo hi\nname: single\n")
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 0, out
    assert "job 100 (RUNNING) was already submitted for this request" in out and "--new" in out
    assert "logs: " + str(project / "hpcjobs-logs" / "single-100.out") in out
    assert fake.sbatch_calls() == 1
    with Ledger.open(folder) as ledger:
        assert ledger.check_invariants() == []
        assert [s.state for s in ledger.submissions()] == ["submitted"]


def test_new_and_other_overrides_submit_another_job(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    a = _submit(fake)
    b = _submit(fake, new=True)
    c = _submit(fake, new=True)
    d = _submit(fake, "resources.walltime=6m")
    assert [a.job_id, b.job_id, c.job_id, d.job_id] == ["100", "101", "102", "103"]
    assert b.request_id == f"{a.request_id}-2" and c.request_id == f"{a.request_id}-3"
    assert d.request_id not in (a.request_id, b.request_id, c.request_id) and d.new
    again = _submit(fake, "resources.walltime=6m")
    assert again.job_id == "103" and not again.new and fake.sbatch_calls() == 4
    (project / "sub").mkdir()
    elsewhere = _submit(fake, submit_dir=project / "sub")  # another working directory: another request
    assert elsewhere.job_id == "104" and elsewhere.new and elsewhere.request_id != a.request_id
    assert elsewhere.stdout == project / "sub" / "hpcjobs-logs" / "single-104.out"


def test_a_refusal_is_exit_1_and_the_next_run_submits(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch, "refuse")
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 1 and "Invalid account" in out and "`sbatch --parsable" in out
    assert not list((project / "hpcjobs-logs" / "scripts").glob("*.sh"))
    code, out = cli("logs", "single")
    assert code == 2 and "never submitted" in out
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 0 and "submitted job 100" in out
    assert fake.sbatch_calls() == 2 and len(fake.jobs) == 1


def test_a_local_site_writes_nothing(project: Path):
    code, out = cli("submit", "exp.yaml", "--site", "local")
    assert code == 2 and "has no scheduler to submit to" in out
    assert not (project / "hpcjobs-sweeps").exists()


# ------------------------------------------------------------------------------------- lost answers


def test_a_crash_after_sbatch_accepted_is_found_by_token_not_submitted_again(project: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch, "crash")
    with pytest.raises(Crash):
        _submit(fake)
    (folder,) = (project / "hpcjobs-sweeps" / SINGLES_DIR).glob("single-*")
    with Ledger.open(folder) as ledger:
        (sub,) = ledger.submissions()
        assert sub.state == "submitting" and sub.job_id is None  # recorded before the call, answer never came
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 0, out
    assert "job 100 (SUBMITTED) was submitted by an earlier run whose answer was lost; found by its token" in out
    assert fake.sbatch_calls() == 1 and len(fake.jobs) == 1
    assert find_sweep("100") == folder  # the index knows the recovered id


@pytest.mark.parametrize("fate", ["timeout", "late", "id-exit1", "garbage"])
def test_an_ambiguous_answer_is_looked_up_by_token(project: Path, monkeypatch: pytest.MonkeyPatch, fate: str):
    fake = _fake(monkeypatch, fate)
    sub = _submit(fake)
    assert sub.job_id == "100" and sub.new and fake.sbatch_calls() == 1 and len(fake.jobs) == 1
    assert _submit(fake).job_id == "100" and fake.sbatch_calls() == 1


def test_a_transient_error_with_nothing_queued_is_retried(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch, "lost", "ok")
    sub = _submit(fake, lookup_s=2)
    assert sub.job_id == "100" and fake.sbatch_calls() == 2 and len(fake.jobs) == 1
    with Ledger.open(sub.folder) as ledger:
        assert [s.state for s in ledger.submissions()] == ["failed", "submitted"]


def test_a_timeout_not_queued_is_reported_and_the_next_run_submits(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    fake.script = ["timeout"]
    fake.delay = 10_000  # never shows up within the lookup
    with pytest.raises(SubmitError, match=r"was not submitted.*run the same command again") as err:
        _submit(fake, lookup_s=5)
    assert isinstance(err.value.__cause__, CommandTimeout)
    fake.jobs.clear()
    assert _submit(fake).job_id == "101" and fake.sbatch_calls() == 2


def test_an_unreadable_queue_leaves_the_submission_open_for_the_next_run(project: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch, "late", break_queue_on_sbatch=True)
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 1 and "could not be read" in out and "run the same command again" in out
    assert "caused by: command `sbatch --parsable" in out
    fake.squeue_broken = fake.break_queue_on_sbatch = False
    fake.now += 60
    code, out = cli("submit", "exp.yaml", "--site", SITE)
    assert code == 0 and "found by its token" in out
    assert fake.sbatch_calls() == 1 and len(fake.jobs) == 1


def test_a_second_job_with_the_same_token_is_cancelled(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch, "twice")
    sub = _submit(fake)
    assert sub.job_id == "100"
    assert _submit(fake).job_id == "100"  # the re-run finds the second job with the token: a stray
    assert fake.jobs["101"].state == "CANCELLED" and fake.jobs["100"].state == "RUNNING"
    with Ledger.open(sub.folder) as ledger:
        assert [(s.job_id, s.action) for s in ledger.strays()] == [("101", "cancelled")]


# ------------------------------------------------------------------------------------- status, logs, cancel


def test_status_logs_cancel_and_ls_by_job_id(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    assert _submit(fake).job_id == "100"
    before = fake.count("sacct")
    code, out = cli("status", "100", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["job"]["state"] == "RUNNING" and data["job"]["job_id"] == "100" and data["total"] == 1
    assert fake.count("sacct") == before + 1  # one batched call
    code, out = cli("status", "100")
    assert code == 0 and "job 100" in out and "RUNNING" in out and "single-100.out" in out
    code, out = cli("logs", "100")
    assert code == 0 and "==> stdout of job 100 (RUNNING): " in out and "hello from job 100" in out
    code, out = cli("ls")
    assert "no sweeps in" in out and "1 single job(s) of `hpcjobs submit` too: hpcjobs ls --jobs" in out
    before = fake.count("sacct")
    code, out = cli("ls", "--jobs", "--json")
    rows = json.loads(out)
    assert [(r["job_id"], r["state"], r["polled"]) for r in rows] == [("100", "RUNNING", True)]
    assert fake.count("sacct") == before + 1
    code, out = cli("cancel", "100")
    assert code == 0 and "cancelled 1 job(s) 100" in out
    assert fake.jobs["100"].state == "CANCELLED"
    code, out = cli("status", "single", "--json")  # by name, when one request has it
    assert json.loads(out)["job"]["state"] == "CANCELLED"
    code, out = cli("logs", "100", "--state", "COMPLETED")
    assert "no points match" in out


def test_resubmit_by_job_id_is_a_new_attempt(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    first = _submit(fake)
    code, out = cli("resubmit", "100")
    assert code == 0 and "RUNNING, not in" in out and fake.sbatch_calls() == 1
    fake.jobs["100"].state, fake.jobs["100"].exit = "FAILED", "3:0"
    code, out = cli("resubmit", "100", "--set", "resources.walltime=7m")
    assert code == 0 and "resubmitted as job 101" in out, out
    assert "--time=00:07:00" in (project / "hpcjobs-logs" / "scripts").joinpath(
        f"single.{read_single(first.folder).token}.sh").read_text()
    job = read_single(first.folder)
    assert (job.job_id, job.attempt, job.earlier) == ("101", 2, (("100", "FAILED"),))
    assert find_sweep("101") == find_sweep("100") == first.folder
    code, out = cli("logs", "100")  # the files of job 100, not of its successor
    assert "hello from job 100" in out and "FAILED, exit 3" in out
    code, out = cli("logs", "101")
    assert "hello from job 101" in out


def test_resubmit_leaves_a_job_the_scheduler_requeued(project: Path, monkeypatch: pytest.MonkeyPatch, caplog):
    fake = _fake(monkeypatch)
    _submit(fake)
    fake.jobs["100"].state, fake.jobs["100"].exit = "NODE_FAIL", "0:0"
    fake.jobs["100"].queue_state = "PENDING"  # requeued after the node failure: it runs again by itself
    with caplog.at_level(logging.WARNING, logger="hpcjobs.sweep"):
        code, out = cli("resubmit", "100")
    assert code == 0, out
    assert fake.sbatch_calls() == 1  # no second live attempt
    assert any("queued again by the scheduler" in r.getMessage() for r in caplog.records)
    fake.jobs["100"].queue_state = None  # it left the queue, failed for good
    code, out = cli("resubmit", "100")
    assert code == 0 and "resubmitted as job 101" in out, out


# ------------------------------------------------------------------------------------- resolving ids


def _fake_single(base: Path, rid: str, job_id: str) -> Path:
    """A single job's ledger recorded as submitted with ``job_id`` (no scheduler involved)."""
    from hpcjobs.sweep.points.expand import expand

    folder = base / SINGLES_DIR / rid
    meta = SweepMeta(rid, "/x/exp.yaml", "0" * 64, "pbstest", "pbspro",
                     {"kind": KIND, "name": rid.rsplit("-", 1)[0], "submit_dir": str(base), "output_dir": "logs"})
    with Ledger.create(folder, meta, expand(None)) as ledger:
        token = ledger.plan_chunk([ledger.points()[0].point_id], 0, array=False)
        ledger.mark_submitted(token, job_id)
    index_job(base / SINGLES_DIR, job_id, rid)
    return folder


def test_job_id_spellings():
    assert job_ids_match("1234.pbs", "1234") and job_ids_match("1234", "1234.pbs.example.org")
    assert job_ids_match("1234.pbs.example.org", "1234.pbs") and job_ids_match("12[].pbs", "12[]")
    assert not job_ids_match("1234.pbs", "1234.other") and not job_ids_match("123", "1234")
    assert not job_ids_match("12[].pbs", "12") and not job_ids_match("", "")


def test_pbs_ids_resolve_with_or_without_the_server(tmp_path: Path):
    folder = _fake_single(tmp_path, "hello-1a2b3c4d", "1234.pbsserver")
    for text in ("1234", "1234.pbsserver", "1234.pbsserver.example.org", "hello-1a2b3c4d", "hello"):
        assert find_single(text, tmp_path) == folder, text
    assert find_single("1234.elsewhere", tmp_path) is None and find_single("123", tmp_path) is None
    (tmp_path / SINGLES_DIR / INDEX_FILE).unlink()  # no index: the ledgers are read
    assert find_single("1234", tmp_path) == folder


def test_a_reused_job_id_names_the_newest_job_and_a_shared_name_is_ambiguous(tmp_path: Path):
    _fake_single(tmp_path, "hello-1a2b3c4d", "77")
    newer = _fake_single(tmp_path, "hello-5e6f7a8b", "77")
    assert find_single("77", tmp_path) == newer
    with pytest.raises(ConfigError, match="2 jobs are named 'hello'") as err:
        find_single("hello", tmp_path)
    assert "77 (hello-1a2b3c4d)" in str(err.value)


def test_an_exact_sweep_name_beats_a_job_id_which_beats_a_prefix(tmp_path: Path):
    meta = SweepMeta("77-0a0b0c0d", "/x/e.yaml", "0" * 64, "hpctest", "slurm", {"name": "77"})
    from hpcjobs.sweep.points.expand import expand

    with Ledger.create(tmp_path / "77-0a0b0c0d", meta, expand(None)):
        pass
    with Ledger.create(tmp_path / "770-0a0b0c0d", replace_id(meta, "770-0a0b0c0d"), expand(None)):
        pass
    single = _fake_single(tmp_path, "hello-1a2b3c4d", "77")
    assert find_sweep("77", tmp_path) == tmp_path / "77-0a0b0c0d"  # the sweep named 77
    _fake_single(tmp_path, "other-1a2b3c4d", "7")
    assert find_sweep("7", tmp_path) == tmp_path / SINGLES_DIR / "other-1a2b3c4d"  # job 7, not the prefix of 77-...
    assert find_sweep("hello", tmp_path) == single
    assert find_sweep("770", tmp_path) == tmp_path / "770-0a0b0c0d"
    with pytest.raises(ConfigError, match=r"no sweep .999.*no job of `hpcjobs submit`"):
        find_sweep("999", tmp_path)


def replace_id(meta: SweepMeta, sweep_id: str) -> SweepMeta:
    from dataclasses import replace

    return replace(meta, sweep_id=sweep_id, extra={"name": sweep_id.split("-")[0]})


def test_a_finished_job_without_an_exit_code_is_asked_again(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    _submit(fake)
    fake.jobs["100"].state, fake.jobs["100"].exit = "COMPLETED", ""  # as squeue reports a job sacct lacks yet
    code, out = cli("status", "100", "--json")
    assert code == 0 and (json.loads(out)["job"]["state"], json.loads(out)["job"]["exit_code"]) == ("COMPLETED", None)
    fake.jobs["100"].exit = "0:0"  # accounting caught up
    before = fake.count("sacct")
    code, out = cli("status", "100", "--json")
    assert code == 0 and json.loads(out)["job"]["exit_code"] == 0 and fake.count("sacct") == before + 1
    cli("status", "100", "--json")
    assert fake.count("sacct") == before + 1  # known now: no more calls


def test_a_job_id_is_found_from_another_folder(project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory):
    fake = _fake(monkeypatch)
    sub = _submit(fake)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)  # no hpcjobs-sweeps/ here or above: the user's index knows the job
    assert find_sweep("100") == sub.folder.resolve()
    code, out = cli("status", "100", "--json")
    assert code == 0 and json.loads(out)["job"]["job_id"] == "100"
    assert find_single("single", elsewhere) is None  # names are looked up in the project only
    import shutil

    shutil.rmtree(sub.folder)  # a ledger that is gone is not found
    assert cli("status", "100")[0] == 2


@pytest.mark.parametrize(("recorded", "typed"), [("1300", "1300"), ("1300", "1300_4"), ("12[].pbs", "12[]"),
                                                 ("12[].pbs", "12[3].pbs.example.org")])
def test_a_sweeps_job_id_names_the_sweep_instead_of_resolving_to_it(tmp_path: Path, recorded: str, typed: str):
    from hpcjobs.sweep.points.expand import expand

    meta = SweepMeta("grid-0a0b0c0d", "/x/e.yaml", "0" * 64, "hpctest", "slurm", {"name": "grid"})
    points = expand(None, ["x=1,2"])
    with Ledger.create(tmp_path / meta.sweep_id, meta, points) as ledger:
        token = ledger.plan_chunk([p.point_id for p in points], 0)
        ledger.mark_submitted(token, recorded)
    # `cancel 1300_4` must not cancel the whole sweep: the message names the sweep instead
    with pytest.raises(ConfigError, match=rf"job {re.escape(typed)} is of sweep grid-0a0b0c0d \(chunk 0\)"):
        find_sweep(typed, tmp_path)


def test_logs_of_a_job_whose_directives_name_its_files(project: Path, monkeypatch: pytest.MonkeyPatch):
    fake = _fake(monkeypatch)
    (project / "own.yaml").write_text("name: own\ncommand: echo hi\ndirectives: ['--output=elsewhere.txt']\n")
    sub = submit_single("own.yaml", site=SITE, client=SchedulerClient(get_backend("slurm")), sleep=fake.sleep)
    assert sub.stdout is None
    code, out = cli("logs", sub.job_id)
    assert code == 2 and "own directives" in out
