"""Per-point resources on the real Slurm testbed: a grid over cpus_per_task × lr is one array per CPU count."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hpcjobs.process import run_command
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITE = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")


def test_a_grid_over_cpus_per_task_gives_one_array_per_cpu_count(slurm_testbed, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "shapes.yaml"
    exp.write_text(
        "name: cpushapes\n"
        f"description: run in {tmp_path}\n"
        "resources: {walltime: 2m}\n"
        'command: echo "lr=$lr cpus=$SLURM_CPUS_PER_TASK" > "$HPCJOBS_RUN_DIR/out.txt"\n'
        "sweep:\n  grid:\n    resources.cpus_per_task: [1, 2]\n    lr: [0.1, 0.00005]\n"
    )
    root = tmp_path / "sweeps"
    prepared, report = run_sweep(exp, site=SITE, root=root)
    assert report.chunks_submitted == 2 and len(report.job_ids) == 2
    deadline = time.monotonic() + 300
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(2)
    assert st.counts == {"COMPLETED": 4}, st.counts
    with Ledger.open(prepared.folder) as ledger:
        points = ledger.points()
    by_array: dict[str, set[int]] = {}
    for p in points:
        by_array.setdefault(p.array_job_id or "", set()).add(p.params["resources.cpus_per_task"])
    assert sorted(by_array.values(), key=min) == [{1}, {2}]  # one array per CPU count
    rows = run_command(["sacct", "-n", "-P", "-X", f"--jobs={','.join(report.job_ids)}",
                        "--format=JobID,AllocCPUS,State"]).stdout.splitlines()
    alloc = {r.split("|")[0]: int(r.split("|")[1]) for r in rows if r.strip()}
    for p in points:
        assert alloc[p.job_id] == p.params["resources.cpus_per_task"], (p.job_id, alloc)
        out = (prepared.folder / "points" / p.point_id / "out.txt").read_text()
        assert f"cpus={p.params['resources.cpus_per_task']}" in out
