"""Packed sweeps on the real Slurm testbed: 12 points packed 4 per job, one job killed mid-way, resubmit.

Each point appends ``start`` and ``end`` to ``run.log`` in its run folder. The points of array task 1
are 1 s, 2 s, 120 s and 120 s long on their first run (1 s on a second one); that task is cancelled
once its two short points have ended. The ledger must then hold those two as ``COMPLETED`` and the
two long ones as ``CANCELLED``; ``resubmit`` must run exactly those two (packed again, one task), and
every point's log must show exactly one complete run. ``sacct`` has one step per point, named by
the point id (``srun --exact --job-name``); a step killed with its task is recorded ``CANCELLED`` or,
as seen on this testbed, ``FAILED``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_testbed import wait_for

from hpcjobs.process import run_command
from hpcjobs.sweep.api import resubmit_sweep, run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
DURATIONS = [1, 2, 3, 4, 1, 2, 120, 120, 1, 2, 3, 4]
COMMAND = ('echo start >> "$HPCJOBS_RUN_DIR/run.log"; '
           'if [ -e "$HPCJOBS_RUN_DIR/tried" ]; then sleep 1; else touch "$HPCJOBS_RUN_DIR/tried"; sleep "$DUR"; fi; '
           'echo end >> "$HPCJOBS_RUN_DIR/run.log"')


def _steps(job_ids: list[str], names: set[str]) -> list[list[str]]:
    out = run_command(["sacct", "--parsable2", "--noheader", f"--jobs={','.join(job_ids)}",
                       "--format=JobID,JobName,State,MaxRSS,TotalCPU,Elapsed"]).stdout
    return [line.split("|") for line in out.splitlines() if line.split("|")[1] in names]


def test_packed_sweep_killed_mid_way_then_resubmitted(slurm_testbed, tmp_path, monkeypatch):
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "packed.yaml"
    exp.write_text(f"name: packtest\ndescription: run in {tmp_path}\n"
                   "resources: {cpus_per_task: 4, walltime: 10m}\n"
                   f"command: '{COMMAND}'\npack: {{per_node: 4}}\n"
                   f"sweep:\n  zip:\n    DUR: {DURATIONS}\n    i: {list(range(12))}\n")
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    sweep_id = prepared.sweep_id
    assert report.chunks_submitted == 1 and report.points_submitted == 12
    first_job = report.job_ids[0]
    with Ledger.open(root / sweep_id) as ledger:
        points = ledger.points()
    ids = [p.point_id for p in points]
    assert [p.array_index for p in points] == [0] * 4 + [1] * 4 + [2] * 4  # an array of 3 tasks
    runs = [root / sweep_id / "points" / pid for pid in ids]

    def ended(i: int) -> bool:
        return any(runs[i].glob("hpcjobs-exit.*"))

    wait_for("the short points of task 1", lambda: ended(4) and ended(5), 300, every=1)
    assert (runs[6] / "tried").exists() and not ended(6)  # the long ones are running
    run_command(["scancel", f"{first_job}_1"])
    wait_for("the sweep to end", lambda: sweep_status(sweep_id, root=root).done, 300, every=1)
    with Ledger.open(root / sweep_id) as ledger:
        got = [p.state for p in ledger.points()]
        assert ledger.check_invariants() == []
    assert got == ["COMPLETED"] * 6 + ["CANCELLED"] * 2 + ["COMPLETED"] * 4, got

    _prepared, again, reset = resubmit_sweep(sweep_id, root=root)
    assert reset == 2
    assert again.points_submitted == 2 and again.chunks_submitted == 1
    second_job = again.job_ids[0]
    wait_for("the resubmitted points", lambda: sweep_status(sweep_id, root=root).done, 300, every=1)
    with Ledger.open(root / sweep_id) as ledger:
        assert ledger.summary() == {"COMPLETED": 12}
        assert [p.array_index for p in ledger.points()][6:8] == [0, 0]  # packed again: one task
    for i, run in enumerate(runs):
        log = (run / "run.log").read_text().split()
        assert log.count("end") == 1, (i, log)  # exactly one complete run
        assert log.count("start") == (2 if i in (6, 7) else 1), (i, log)

    # sacct: one step per point named by its id; 12 in the first array job, 2 more in the resubmitted one
    names = set(ids)

    def complete() -> bool:
        rows = _steps([first_job, second_job], names)
        return len(rows) == 14 and all(r[2] and r[5] for r in rows) and not any(
            r[2].startswith(("RUNNING", "PENDING", "COMPLETING")) for r in rows)

    wait_for("complete sacct step rows", complete, timeout=120, every=1)
    rows = _steps([first_job, second_job], names)
    first = [r for r in rows if r[0].startswith(f"{first_job}_")]
    assert len(first) == 12 and {r[1] for r in first} == names
    assert sum(r[2] == "COMPLETED" for r in first) == 10
    assert sorted(r[1] for r in rows if r[2] == "COMPLETED") == sorted(ids)  # each point completed once
    # the two steps killed with task 1 ended CANCELLED, or FAILED when srun saw its task die first
    assert all(r[0].split(".")[0].rsplit("_", 1)[1] == "1" for r in first if r[2] != "COMPLETED")


def test_packed_points_get_their_own_gpus(slurm_testbed, tmp_path, monkeypatch):
    """4 points packed 2 per task on the gpu partition (2 GPUs): each step gets one GPU of its own."""
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "gpus.yaml"
    exp.write_text(f"name: packgpu\ndescription: run in {tmp_path}\npartition: gpu\n"
                   "resources: {cpus_per_task: 2, gpus_per_node: 2, walltime: 5m}\n"
                   "command: 'echo \"$CUDA_VISIBLE_DEVICES\"; sleep 2'\npack: {per_node: 2}\n"
                   "sweep:\n  grid:\n    X: [0, 1, 2, 3]\n")
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    wait_for("the sweep to end", lambda: sweep_status(prepared.sweep_id, root=root).done, 300, every=1)
    with Ledger.open(root / prepared.sweep_id) as ledger:
        points = ledger.points()
        assert ledger.summary() == {"COMPLETED": 4}
    by_task: dict[int, set[str]] = {}
    for p in points:
        assert p.array_index is not None
        gpus = (root / prepared.sweep_id / "points" / p.point_id / "stdout.log").read_text().strip()
        by_task.setdefault(p.array_index, set()).add(gpus)
    assert by_task == {0: {"0", "1"}, 1: {"0", "1"}}  # the two points of a task on different GPUs
    names = {p.point_id for p in points}

    def steps() -> list[list[str]]:
        out = run_command(["sacct", "--parsable2", "--noheader", f"--jobs={report.job_ids[0]}",
                           "--format=JobID,JobName,AllocTRES"]).stdout
        return [ln.split("|") for ln in out.splitlines() if ln.split("|")[1] in names]

    wait_for("the steps' sacct rows", lambda: len(steps()) == 4 and all(s[2] for s in steps()), timeout=120, every=1)
    assert all("gres/gpu=1" in s[2] for s in steps()), steps()
