"""Pipelines against a fake Slurm (the subprocess seam replaced): resolving upstreams, the dependency argv,
the ledger record kept on resume and resubmit, and the cancellation of jobs whose upstream failed.

The squeue and sacct answers of a job whose ``afterok`` upstream failed are the real ones recorded on the
Slurm 22.05 testbed (``tests/data/slurm/testbed/*dependency*``, see tests/data/SOURCES.md).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import FakeSlurm

from hpcjobs import process
from hpcjobs.errors import ConfigError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import JobDependency, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.pbs.backend import PbsProBackend, TorqueBackend
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.schedulers.slurm.backend import SlurmBackend
from hpcjobs.schedulers.slurm.formats import parse_squeue_status
from hpcjobs.sweep.api import resubmit_sweep, run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.pipeline import BLOCKED_STATE_RAW, parse_after_option

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")
DATA = ROOT / "tests" / "data" / "slurm" / "testbed"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeSlurm:
    f = FakeSlurm()
    monkeypatch.setattr(process, "run_command", f)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCJOBS_SUBMIT_LOOKUP_S", "0")
    return f


def _client() -> SchedulerClient:
    return SchedulerClient(get_backend("slurm"))


def _exp(tmp_path: Path, name: str, n: int, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ncommand: echo $x\n{extra}sweep:\n  grid:\n    x: {list(range(n))}\n")
    return path


def _sweep(path: Path, tmp_path: Path, **kw):  # type: ignore[no-untyped-def]
    return run_sweep(path, site=SITE, root=tmp_path / "sweeps", client=_client(), **kw)


# ----------------------------------------------------------------------------------------- argv


def test_dependency_argv_per_scheduler() -> None:
    opts = SubmitOptions(after=(JobDependency("ok", ("100", "101")), JobDependency("any", ("102",))))
    assert "--dependency=afterok:100:101,afterany:102" in SlurmBackend().submit_argv(Path("s.sh"), opts)
    pbs = SubmitOptions(after=(JobDependency("ok", ("7[].pbs", "8.pbs")),))
    assert PbsProBackend().submit_argv(Path("s.sh"), pbs)[1:3] == ["-W", "depend=afterok:7[].pbs:8.pbs"]
    assert TorqueBackend().submit_argv(Path("s.sh"), pbs)[1:3] == ["-W", "depend=afterok:8.pbs,afterokarray:7[].pbs"]
    with pytest.raises(ValueError):
        JobDependency("done", ("1",))


def test_after_option_forms() -> None:
    assert (parse_after_option("prep.yaml").ref, parse_after_option("prep.yaml").when) == ("prep.yaml", "ok")
    assert (parse_after_option("any:prep-1a2b3c4d").ref, parse_after_option("any:prep-1a2b3c4d").when) == \
        ("prep-1a2b3c4d", "any")
    assert parse_after_option("done:123").when == "done"
    with pytest.raises(ConfigError, match="--after"):
        parse_after_option("ok:")


# ----------------------------------------------------------------------------------------- resolving


def test_upstream_file_resolved_to_its_arrays_and_recorded(tmp_path: Path, fake: FakeSlurm) -> None:
    up = _exp(tmp_path, "prep", 2)
    _sweep(up, tmp_path)
    fake.running.add("100")
    down = _exp(tmp_path, "train", 3, "after: [prep.yaml]\n")
    prepared, _report = _sweep(down, tmp_path)
    assert fake.sbatch()[-1][2] == "--dependency=afterok:100"
    with Ledger.open(prepared.folder) as ledger:
        (rec,) = ledger.upstreams()
        assert (rec.ref, rec.condition, rec.job_ids) == (str(up.resolve()), "ok", ("100",))
        assert rec.sweep_id is not None and rec.sweep_id.startswith("prep-")
        sub = ledger.submissions(with_points=False)[0]
        assert "--dependency=afterok:100" in (sub.argv or [])


def test_cli_after_by_sweep_name_any_and_finished_upstream(tmp_path: Path, fake: FakeSlurm) -> None:
    _sweep(_exp(tmp_path, "prep", 2), tmp_path)          # job 100, completes
    _sweep(_exp(tmp_path, "other", 1), tmp_path)         # job 101, still running
    fake.running.add("101")
    _sweep(_exp(tmp_path, "train", 1), tmp_path, after=("prep", "any:other"))
    argv = fake.sbatch()[-1]
    # prep has ended successfully: nothing to wait for; other is running: afterany
    assert "--dependency=afterany:101" in argv and not any("afterok" in a for a in argv)


def test_failed_upstream_with_ok_refuses_and_names_the_fix(tmp_path: Path, fake: FakeSlurm) -> None:
    _sweep(_exp(tmp_path, "prep", 2), tmp_path)
    fake.failing["100"] = {1}
    with pytest.raises(ConfigError) as info:
        _sweep(_exp(tmp_path, "train", 1, "after: prep.yaml\n"), tmp_path)
    text = str(info.value)
    assert "1 FAILED" in text and "1 COMPLETED" not in text and "hpcjobs resubmit prep-" in text
    assert "after.0.sweep" in text and str(tmp_path / "train.yaml") in text
    assert not list((tmp_path / "sweeps").glob("train-*"))  # refused before anything was written
    # any ending will do
    _sweep(_exp(tmp_path, "train", 1, "after: [{sweep: prep.yaml, when: any}]\n"), tmp_path)
    assert not any(a.startswith("--dependency") for a in fake.sbatch()[-1])


def test_unsubmitted_upstream_is_an_error_with_the_hint(tmp_path: Path, fake: FakeSlurm) -> None:
    _exp(tmp_path, "prep", 2)
    with pytest.raises(ConfigError, match=r"has not been submitted .*submit it first \(hpcjobs sweep "):
        _sweep(_exp(tmp_path, "train", 1, "after: [prep.yaml]\n"), tmp_path)
    with pytest.raises(ConfigError, match="upstream 'nosuch' was not found: submit it first"):
        _sweep(_exp(tmp_path, "eval", 1), tmp_path, after=("nosuch",))
    assert fake.sbatch() == []


def test_bare_job_id_waits_as_given(tmp_path: Path, fake: FakeSlurm) -> None:
    _sweep(_exp(tmp_path, "train", 1), tmp_path, after=("4242",))
    assert "--dependency=afterok:4242" in fake.sbatch()[-1]


def test_recorded_upstream_kept_on_resubmit_with_new_ids(tmp_path: Path, fake: FakeSlurm) -> None:
    prep = _exp(tmp_path, "prep", 2)
    _sweep(prep, tmp_path)                                   # 100
    fake.running.add("100")
    prepared, _ = _sweep(_exp(tmp_path, "train", 2), tmp_path, after=("prep",))   # 101 waits for 100
    assert "--dependency=afterok:100" in fake.sbatch()[-1]
    # the upstream fails: the downstream is blocked, status cancels it (one squeue, one scancel)
    fake.running.discard("100")
    fake.failing["100"] = {0}
    before = len(fake.calls)
    st = sweep_status(prepared.sweep_id, root=tmp_path / "sweeps")
    calls = [c[0] for c in fake.calls[before:]]
    assert calls.count("scancel") == 1 and calls.count("squeue") == 1
    assert st.upstream_cancelled == ("101",) and st.counts == {"CANCELLED": 2}
    assert {p.state_raw for p in st.points} == {BLOCKED_STATE_RAW}
    # the next status asks nothing more of the cancelled job
    before = len(fake.calls)
    assert sweep_status(prepared.sweep_id, root=tmp_path / "sweeps").upstream_cancelled == ()
    assert [c[0] for c in fake.calls[before:]] == []
    # resubmit the upstream's failed point (102), then the downstream: it waits for the new job only
    fake.running.add("102")
    resubmit_sweep("prep", root=tmp_path / "sweeps", client=_client())
    _, report, reset = resubmit_sweep(prepared.sweep_id, root=tmp_path / "sweeps", client=_client())
    assert reset == 2 and report.job_ids == ["103"]
    assert "--dependency=afterok:102" in fake.sbatch()[-1]
    with Ledger.open(prepared.folder) as ledger:
        (rec,) = ledger.upstreams()
        assert rec.job_ids == ("102",) and rec.cancelled == ("101",)


def test_rerun_without_after_keeps_recorded_upstream(tmp_path: Path, fake: FakeSlurm) -> None:
    _sweep(_exp(tmp_path, "prep", 1), tmp_path)
    fake.running.add("100")
    down = _exp(tmp_path, "train", 3)
    prepared, _ = _sweep(down, tmp_path, after=("prep",))
    n = len(fake.sbatch())
    _prepared, report = _sweep(down, tmp_path)  # nothing pending: no new submission, the record stays
    assert report.points_submitted == 0 and len(fake.sbatch()) == n
    with Ledger.open(prepared.folder) as ledger:
        (rec,) = ledger.upstreams()
        assert rec.ref == "prep" and rec.job_ids == ("100",) and (rec.sweep_id or "").startswith("prep-")


def test_dry_run_shows_the_dependency_and_writes_nothing(tmp_path: Path, fake: FakeSlurm) -> None:
    _sweep(_exp(tmp_path, "prep", 1), tmp_path)
    fake.running.add("100")
    prepared, report = _sweep(_exp(tmp_path, "train", 2, "after: [prep.yaml]\n"), tmp_path, dry_run=True)
    assert "--dependency=afterok:100" in report.dry_run_commands[0]
    assert not prepared.folder.exists()


# ----------------------------------------------------------------------------------------- real output


def test_real_squeue_dependency_never_satisfied_is_read() -> None:
    records = parse_squeue_status((DATA / "squeue_dependency_never_satisfied.txt").read_text())
    blocked = [(r.job_id, r.array_job_id, r.array_task_id, r.state) for r in records
               if r.reason == "DependencyNeverSatisfied"]
    assert blocked == [("9544_0", "9544", 0, "PENDING"), ("9544_1", "9544", 1, "PENDING"),
                       ("9545", None, None, "PENDING")]
    sacct = (DATA / "sacct_status_dependency_pending.txt").read_text()
    # sacct keeps the first reason (Dependency): only squeue tells that it can never be satisfied
    assert "9544_[0-1]|9544|PENDING|0:0|Dependency|" in sacct and "DependencyNeverSatisfied" not in sacct


class RecordedSlurm:
    """Answers the status calls of one downstream array (9544) with the testbed's recorded output."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.cancelled = False

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = list(argv)
        self.calls.append(argv)
        out = ""
        keep = ("9544",)
        if argv[0] == "sacct" and any(a.startswith("--jobs=") for a in argv):
            name = "sacct_status_dependency_cancelled.txt" if self.cancelled else "sacct_status_dependency_pending.txt"
            out = "".join(line + "\n" for line in (DATA / name).read_text().splitlines()
                          if line.split("|")[1].split(".")[0] in keep)
        elif argv[0] == "squeue" and "--array" in argv:
            out = "".join(line + "\n" for line in (DATA / "squeue_dependency_never_satisfied.txt").read_text()
                          .splitlines() if line.split("|")[2] in keep)
        elif argv[0] == "scancel":
            self.cancelled = True
        return CommandResult(tuple(argv), 0, out, "", 0.0)


def test_status_maps_real_dependency_never_satisfied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(first_id=9544)
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    fake.running.add("9543")
    fake.jobs["9543"] = {"comment": "", "name": "up", "size": 2, "dep": "", "array": True}
    prepared, _ = _sweep(_exp(tmp_path, "down", 2), tmp_path, after=("9543",))
    assert "--dependency=afterok:9543" in fake.sbatch()[-1]
    recorded = RecordedSlurm()
    monkeypatch.setattr(process, "run_command", recorded)
    st = sweep_status(prepared.sweep_id, root=tmp_path / "sweeps", client=_client())
    assert [c[0] for c in recorded.calls] == ["sacct", "squeue", "scancel"]
    assert recorded.calls[-1] == ["scancel", "--", "9544"]
    assert st.upstream_cancelled == ("9544",)
    assert [(p.state, p.state_raw) for p in st.points] == [("CANCELLED", BLOCKED_STATE_RAW)] * 2
    data = json.loads(json.dumps(st.as_dict()))
    assert data["upstream_cancelled"] == ["9544"]
    assert data["upstreams"] == [{"ref": "9543", "when": "ok", "sweep_id": None, "job_ids": ["9543"],
                                  "cancelled": ["9544"]}]


# ----------------------------------------------------------------------------------------- ledger upgrade


def test_ledger_without_upstreams_table_reads_empty_and_gets_it(tmp_path: Path, fake: FakeSlurm) -> None:
    prepared, _ = _sweep(_exp(tmp_path, "prep", 1), tmp_path)
    con = sqlite3.connect(prepared.folder / "ledger.sqlite")
    con.execute("DROP TABLE upstreams")  # as a ledger written before the table existed
    con.commit()
    con.close()
    with Ledger.open(prepared.folder) as ledger:
        assert ledger.upstreams() == []
        ledger.record_upstream_cancelled(["1"])  # nothing to note it on: no table made for it
        assert ledger.upstreams() == []
        from hpcjobs.sweep.ledger.store import UpstreamRecord

        ledger.record_upstreams([UpstreamRecord("x.yaml", "any", "x-1", "/f", ("7",))])
        assert [(r.ref, r.condition, r.job_ids) for r in ledger.upstreams()] == [("x.yaml", "any", ("7",))]
        assert ledger.check_invariants() == []


def test_version_1_ledger_upgrade_reads_no_upstreams_then_records(tmp_path: Path) -> None:
    """A version 1 ledger (before schema 2 and the upstreams table) is upgraded on open; its upstreams read empty."""
    from hpcjobs.sweep.ledger.store import LEDGER_FILE, UpstreamRecord

    folder = tmp_path / "old"
    folder.mkdir()
    con = sqlite3.connect(folder / LEDGER_FILE)
    con.executescript((ROOT / "tests" / "data" / "sweep" / "constructed_ledger_v1.sql").read_text())
    con.close()
    with Ledger.open(folder) as ledger:
        assert ledger.upstreams() == []
        ledger.record_upstreams([UpstreamRecord("prep", "ok", "prep-1a2b3c4d", "/s/prep-1a2b3c4d", ("41",))])
        ledger.record_upstream_cancelled(["42", "42"])
        ledger.record_upstreams([UpstreamRecord("prep", "ok", "prep-1a2b3c4d", "/s/prep-1a2b3c4d", ("43",))])
        (rec,) = ledger.upstreams()
        assert (rec.job_ids, rec.cancelled) == (("43",), ("42",))  # a new record keeps what was cancelled
        assert ledger.check_invariants() == []


def test_single_job_after_a_sweep_and_a_sweep_after_the_job(tmp_path: Path, fake: FakeSlurm) -> None:
    from hpcjobs.sweep.singles import submit_single

    _sweep(_exp(tmp_path, "prep", 2), tmp_path)                       # 100
    fake.running.add("100")
    job = tmp_path / "evaluate.yaml"
    job.write_text("name: evaluate\ncommand: 'true'\n")
    sub = submit_single(job, site=SITE, root=tmp_path / "sweeps", client=_client(), after=("prep",))
    assert sub.job_id == "101" and "--dependency=afterok:100" in fake.sbatch()[-1]
    fake.running.add("101")
    _sweep(_exp(tmp_path, "report", 1), tmp_path, after=("101",))    # the job of hpcjobs submit, by its id
    assert "--dependency=afterok:101" in fake.sbatch()[-1]
    # the same request again: already submitted, nothing new, the record kept
    again = submit_single(job, site=SITE, root=tmp_path / "sweeps", client=_client())
    assert again.job_id == "101" and len(fake.sbatch()) == 3


class RecordedPbs:
    """qsub and qstat of an OpenPBS server whose answers for the downstream array 4008[].vm are the testbed's
    recorded ones: the server deleted it because its ``afterok`` upstream 4007[].vm failed."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = [Path(argv[0]).name, *argv[1:]]
        self.calls.append(argv)
        out = ""
        if argv[0] == "qsub":
            out = "4008[].vm\n"
        elif argv[0] == "qstat" and "-t" in argv:
            out = (ROOT / "tests" / "data" / "pbs" / "openpbs-23.06_qstat-x-f-F-json_dependency_deleted.json"
                   ).read_text()
        elif argv[0] == "qstat":
            out = '{"timestamp": 1, "pbs_version": "23.06.06", "pbs_server": "vm", "Jobs": {}}\n'
        return CommandResult(tuple(argv), 0, out, "", 0.0)


def test_pbs_server_deleted_downstream_is_cancelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "pbsbin"
    bin_dir.mkdir()
    for name in ("qsub", "qstat", "qdel"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(bin_dir))
    fake = RecordedPbs()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCJOBS_SUBMIT_LOOKUP_S", "0")
    client = SchedulerClient(get_backend("pbspro"))
    site = str(ROOT / "tests" / "sites" / "openpbs-sweeps.yaml")
    prepared, report = run_sweep(_exp(tmp_path, "down", 2), site=site, root=tmp_path / "sweeps", client=client,
                                 after=("4007[].vm",))
    qsub = next(c for c in fake.calls if c[0] == "qsub")
    assert qsub[1:3] == ["-W", "depend=afterok:4007[].vm"] and report.job_ids == ["4008[].vm"]
    st = sweep_status(prepared.sweep_id, root=tmp_path / "sweeps", client=SchedulerClient(get_backend("pbspro")))
    assert st.counts == {"CANCELLED": 2} and st.upstream_cancelled == ("4008[].vm",)
    from hpcjobs.sweep.pipeline import PBS_DELETED_STATE_RAW

    assert [p.state_raw for p in st.points] == [PBS_DELETED_STATE_RAW] * 2


def test_local_site_runs_after_an_ended_upstream_and_refuses_a_failed_one(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "sweeps"
    ok = tmp_path / "ok.yaml"
    ok.write_text("name: okup\ncommand: 'true'\nsweep: {grid: {x: [0]}}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: badup\ncommand: 'exit 3'\nsweep: {grid: {x: [0]}}\n")
    run_sweep(ok, site="local", root=root)
    run_sweep(bad, site="local", root=root)
    down = tmp_path / "down.yaml"
    down.write_text("name: down\ncommand: 'true'\nafter: [ok.yaml]\nsweep: {grid: {x: [0]}}\n")
    prepared, _ = run_sweep(down, site="local", root=root)
    assert sweep_status(prepared.sweep_id, root=root).counts == {"COMPLETED": 1}
    with pytest.raises(ConfigError, match="ended without success"):
        run_sweep(down, site="local", root=root, after=("badup",), new=True)


def test_upstream_file_planned_with_overrides_found_by_its_path(tmp_path: Path, fake: FakeSlurm) -> None:
    prep = _exp(tmp_path, "prep", 1)
    first, _ = run_sweep(prep, site=SITE, root=tmp_path / "sweeps", client=_client(), overrides=("description=a",))
    fake.running.add("100")
    prepared, _ = _sweep(_exp(tmp_path, "train", 1, "after: [prep.yaml]\n"), tmp_path)
    assert "--dependency=afterok:100" in fake.sbatch()[-1]
    with Ledger.open(prepared.folder) as ledger:
        assert [r.sweep_id for r in ledger.upstreams()] == [first.sweep_id]


def test_status_command_shows_what_it_waits_for_and_what_it_cancelled(tmp_path: Path, fake: FakeSlurm) -> None:
    from click.testing import CliRunner

    from hpcjobs.cli import main

    _sweep(_exp(tmp_path, "prep", 1), tmp_path)
    fake.running.add("100")
    prepared, _ = _sweep(_exp(tmp_path, "train", 2), tmp_path, after=("prep",))
    root = str(tmp_path / "sweeps")
    waiting = CliRunner().invoke(main, ["status", prepared.sweep_id, "--root", root])
    assert waiting.exit_code == 0, waiting.output
    assert "after: prep-" in waiting.output and "(ok: job 100)" in waiting.output
    fake.running.discard("100")
    fake.failing["100"] = {0}
    blocked = CliRunner().invoke(main, ["status", prepared.sweep_id, "--root", root])
    assert blocked.exit_code == 0, blocked.output
    assert "cancelled 1 job(s) 101: an upstream failed" in blocked.output
    assert f"hpcjobs resubmit {prepared.sweep_id}" in blocked.output
