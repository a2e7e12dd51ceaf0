"""``resubmit --right-size`` against a fake Slurm: the failed points go again once, each with its advised resources."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hpcjobs import process
from hpcjobs.accounting.reports.advise import AdviceSettings
from hpcjobs.accounting.schema import conform
from hpcjobs.cli import main
from hpcjobs.plan import rightsize
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.poll import poll_status
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger
from tests.sweep.test_submitter import FakeSlurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
M = 1024**2


class FatedSlurm(FakeSlurm):
    """The fake Slurm, with the state of chosen array tasks of the first job set (TIMEOUT, OUT_OF_MEMORY)."""

    def __init__(self, fates: dict[int, str]):
        super().__init__()
        self.fates = fates

    def __call__(self, argv, **kw):
        result = super().__call__(argv, **kw)
        if argv[0] == "sacct" and any(a.startswith("--jobs=") for a in argv):
            lines = []
            for line in result.stdout.splitlines():
                task = line.split("|", 1)[0]
                job, index = task.split("_")
                fate = self.fates.get(int(index)) if job == "100" else None
                lines.append(line.replace("|COMPLETED|", f"|{fate}|") if fate else line)
            return type(result)(result.argv, result.returncode, "\n".join(lines) + "\n", result.stderr, 0.0)
        return result


def history(sweep_id: str, states: list[str], rss: int, elapsed: list[float]) -> pd.DataFrame:
    n = len(states)
    return conform(pd.DataFrame({
        "scheduler": ["slurm"] * n, "job_id": [f"100_{i}" for i in range(n)], "job_name": ["rs"] * n,
        "partition": ["debug"] * n, "state": states, "elapsed": [pd.Timedelta(seconds=e) for e in elapsed],
        "time_limit": [pd.Timedelta(minutes=10)] * n, "nodes": [1] * n, "cpus": [4] * n,
        "req_mem_bytes": [4096 * M] * n, "max_rss_bytes": [rss] * n, "mem_used_bytes": [rss] * n,
        "cpu_time": [pd.Timedelta(seconds=e) for e in elapsed], "sweep_id": [sweep_id] * n,
    }))


@pytest.fixture
def failed_sweep(tmp_path, monkeypatch):
    """A 6-point sweep (4G, 10 min, 4 CPUs) whose point at array index 5 timed out; the rest completed."""
    fake = FatedSlurm({5: "TIMEOUT"})
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "rs.yaml"
    exp.write_text("name: rs\ncommand: echo $x\nresources: {memory: 4G, walltime: 10m, cpus_per_task: 4}\n"
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5]\n")
    prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    ledger = open_ledger(prepared, how={"site_arg": SITE, "overrides": [], "sweep_args": [],
                                        "submit_dir": str(tmp_path)})
    client = SchedulerClient(get_backend("slurm"))
    SweepSubmitter(prepared, ledger, client, retry=RetryPolicy(attempts=2, initial=0.01), sleep=lambda s: None).submit()
    poll_status(ledger, client)
    assert ledger.summary() == {"COMPLETED": 5, "TIMEOUT": 1}
    ledger.close()
    frame = history(prepared.sweep_id, ["COMPLETED"] * 5 + ["TIMEOUT"], 300 * M, [60, 70, 80, 90, 100, 600])
    monkeypatch.setattr(rightsize, "history_frame", lambda *a, **k: frame)
    return prepared, fake, client


def test_the_timed_out_point_goes_again_once_with_its_raise(failed_sweep, tmp_path):
    prepared, fake, client = failed_sweep
    (timed_out,) = [p.point_id for p in prepared.points if p.params["x"] == 5]
    _got, advice, changes, report, reset = rightsize.right_size_resubmit(
        prepared.folder, settings=AdviceSettings(min_runs=5), client=client, root=tmp_path / "sweeps")
    assert advice.enough and reset == 1 and report.points_submitted == 1
    (ch,) = changes
    assert ch.point_id == timed_out and ch.state == "TIMEOUT"
    # 10 min × 1.5; p95 of 300M × 1.2 = 360M → 384M; p95 of 1 busy CPU × 1.2 → 2 CPUs per task
    assert ch.changes == {"walltime": (600, 900), "memory": (4096 * M, 384 * M), "cpus_per_task": (4, 2)}
    assert ch.why["walltime"] == "raise: TIMEOUT" and ch.why["memory"] == "advice: p95 + 20 %"
    new_job = max(fake.jobs, key=int)
    script = next((prepared.folder / "scripts").glob(f"{fake.jobs[new_job]['comment'].split(':')[2]}.*.sh"))
    text = script.read_text()
    assert re.search(r"^#SBATCH --time=00:15:00$", text, re.M), text
    assert re.search(r"^#SBATCH --mem=384M$", text, re.M) and re.search(r"^#SBATCH --cpus-per-task=2$", text, re.M)
    assert re.search(r"^#SBATCH --array=0-0$", text, re.M)
    with Ledger.open(prepared.folder) as ledger:
        rec = {p.point_id: p for p in ledger.points()}
    assert rec[timed_out].attempt == 2 and rec[timed_out].array_job_id == new_job
    assert sum(r.attempt for r in rec.values()) == 7  # the others untouched
    # nothing failed any more: a second run submits nothing (each point once)
    calls = len(fake.sbatch_calls())
    _got, _advice, changes2, report2, reset2 = rightsize.right_size_resubmit(
        prepared.folder, settings=AdviceSettings(min_runs=5), client=client, root=tmp_path / "sweeps")
    assert changes2 == [] and reset2 == 0 and report2.points_submitted == 0
    assert len(fake.sbatch_calls()) == calls


def test_too_few_runs_still_raises_the_limit_it_hit(failed_sweep, tmp_path):
    prepared, _fake, client = failed_sweep
    _got, advice, changes, _report, _reset = rightsize.right_size_resubmit(
        prepared.folder, settings=AdviceSettings(min_runs=50), client=client, root=tmp_path / "sweeps",
        dry_run=True)
    assert not advice.enough
    assert changes[0].changes == {"walltime": (600, 900)}
    with Ledger.open(prepared.folder) as ledger:  # a dry run changes nothing
        assert ledger.summary() == {"COMPLETED": 5, "TIMEOUT": 1}


def test_cli_prints_what_changed(failed_sweep, tmp_path):
    prepared, _fake, _client = failed_sweep
    r = CliRunner().invoke(main, ["resubmit", prepared.sweep_id, "--right-size", "--root", str(tmp_path / "sweeps")])
    assert r.exit_code == 0, r.output
    assert "(TIMEOUT): memory 4G -> 384M (advice: p95 + 20 %); walltime 00:10:00 -> 00:15:00 (raise: TIMEOUT)" \
        in r.output
    assert "1 point(s) reset; submitted 1 in 1 job(s)" in r.output
    bad = CliRunner().invoke(main, ["resubmit", prepared.sweep_id, "--right-size", "--set", "resources.memory=1G",
                                    "--root", str(tmp_path / "sweeps")])
    assert bad.exit_code == 2 and "--right-size" in bad.output


def test_a_raise_the_partition_blocks_is_said(tmp_path):
    from hpcjobs.plan.rightsize import plan_right_size

    exp = tmp_path / "rs.yaml"
    exp.write_text("name: rs\ncommand: echo $x\nresources: {walltime: 1h}\nsweep:\n  grid:\n    x: [0]\n")
    prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    from hpcjobs.accounting.reports.advise import advise

    advice = advise(history("rs", ["TIMEOUT"], 300 * M, [3600]))
    (ch,) = plan_right_size(prepared, [(prepared.points[0].point_id, "TIMEOUT")], advice)
    assert ch.changes == {} and "max_walltime" in ch.blocked  # hpctest's debug partition: 01:00:00 at most


def test_advise_name_reads_every_sweep_of_that_name(tmp_path, monkeypatch):
    from hpcjobs.sweep.api import run_sweep

    monkeypatch.setattr(process, "run_command", FakeSlurm())
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "sweeps"
    exp = tmp_path / "rs.yaml"
    ids = []
    for grid in ("[0, 1]", "[2, 3, 4]"):
        exp.write_text(f"name: rs\ncommand: echo $x\nsweep:\n  grid:\n    x: {grid}\n")
        prepared, _report = run_sweep(exp, site=SITE, root=root, new=True)
        ids.append(prepared.sweep_id)
    (exp.parent / "other.yaml").write_text("name: other\ncommand: echo $x\nsweep:\n  grid:\n    x: [0]\n")
    run_sweep(exp.parent / "other.yaml", site=SITE, root=root)
    asked: list = []

    def frame_of(sweep_ids, **kw):
        asked.append(tuple(sweep_ids))
        return pd.concat([history(s, ["COMPLETED"] * 3, 100 * M, [60, 60, 60]).assign(
            job_id=[f"{s}_{i}" for i in range(3)]) for s in sweep_ids], ignore_index=True)

    monkeypatch.setattr(rightsize, "history_frame", frame_of)
    r = CliRunner().invoke(main, ["advise", "--name", "rs", "--root", str(root), "--json", "--no-history"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    ids.sort()  # the sweep folder's order
    assert asked == [tuple(ids)] and doc["source"] == "2 sweeps named rs" and doc["runs"] == 6 and doc["enough"]
    assert doc["group"] == {"sweeps": ",".join(ids)}
    none = CliRunner().invoke(main, ["advise", "--name", "nope", "--root", str(root)])
    assert none.exit_code == 2 and "no sweep named 'nope'" in none.output


def test_a_local_sweep_is_advised_from_what_its_runner_measured(tmp_path, monkeypatch):
    from hpcjobs.sweep.api import run_sweep

    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "loc.yaml"
    exp.write_text("name: loc\nsite: local\ncommand: 'true'\nsweep:\n  grid:\n    x: [0]\n")
    prepared, _report = run_sweep(exp, root=tmp_path / "sweeps")
    r = CliRunner().invoke(main, ["advise", prepared.sweep_id, "--root", str(tmp_path / "sweeps")])
    assert r.exit_code == 0, r.output
    assert "1 finished runs, 1 completed" in r.output and "too few runs to advise" in r.output


def test_a_point_killed_at_its_memory_request_gets_more_memory(tmp_path, monkeypatch):
    """FAILED by SIGKILL with its peak over the request (Slurm's OverMemoryKill): the memory raise applies."""
    fake = FatedSlurm({5: "FAILED"})
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "rs.yaml"
    exp.write_text("name: rs\ncommand: echo $x\nresources: {memory: 1G, walltime: 10m}\n"
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5]\n")
    root = tmp_path / "sweeps"
    from hpcjobs.sweep.api import run_sweep

    prepared, _report = run_sweep(exp, site=SITE, root=root)
    frame = history(prepared.sweep_id, ["COMPLETED"] * 5 + ["FAILED"], 300 * M, [60] * 6)
    frame.loc[5, ["max_rss_bytes", "mem_used_bytes"]] = 5000 * M  # over the 4096M of history()
    monkeypatch.setattr(rightsize, "history_frame", lambda *a, **k: frame)
    _got, advice, changes, _report2, _reset = rightsize.right_size_resubmit(
        prepared.folder, settings=AdviceSettings(min_runs=5), root=root, dry_run=True)
    assert advice.raise_for("memory").jobs == ("100_5",)
    (ch,) = changes
    assert ch.state == "FAILED" and ch.why["memory"] == "raise: memory limit"
    assert ch.changes["memory"] == (1024 * M, 6 * 1024 * M)  # the history's raise: 4096M × 1.5 (debug: 8G at most)
