"""A packed sweep on the real OpenPBS testbed: points as background processes of one subjob.

6 points packed 2 per subjob (``pack: {per_node: 2}``: an array of 3 subjobs), each point with one of
the subjob's 2 CPUs and one of its 2 GPUs (``CUDA_VISIBLE_DEVICES`` sliced from the job's list; the
testbed sets none, so ``0,1``). Point ``x=3`` exits 3: it alone is ``FAILED`` with that code, its
subjob's other point is ``COMPLETED`` although the subjob failed.
"""

from __future__ import annotations

import pytest

from hpcjobs.sweep.api import run_sweep
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.pack import read_exit
from pbs._sweep_helpers import SITE, wait_done

pytestmark = pytest.mark.pbs


def test_packed_sweep_on_openpbs(pbs_server, pbs_workdir, monkeypatch):
    monkeypatch.chdir(pbs_workdir)
    exp = pbs_workdir / "packpbs.yaml"
    exp.write_text(f"name: packpbs\ndescription: run in {pbs_workdir}\n"
                   "resources: {cpus_per_task: 2, gpus_per_node: 2, walltime: 2m}\n"
                   "command: |\n  echo \"x=$x cpus=$OMP_NUM_THREADS gpus=$CUDA_VISIBLE_DEVICES\"; "
                   "[ \"$x\" != 3 ] || exit 3\n"
                   "pack: {per_node: 2}\nsweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5]\n")
    root = pbs_workdir / "sweeps"
    prepared, report = run_sweep(exp, site=str(SITE), root=root)
    assert report.points_submitted == 6 and report.chunks_submitted == 1
    counts = wait_done(prepared.sweep_id, root)
    assert counts == {"COMPLETED": 5, "FAILED": 1}, counts
    with Ledger.open(root / prepared.sweep_id) as ledger:
        points = ledger.points()
        token = points[0].submission_token
        assert token is not None
        assert [p.array_index for p in points] == [0, 0, 1, 1, 2, 2]
        assert [(p.state, p.exit_code) for p in points][2:4] == [("COMPLETED", 0), ("FAILED", 3)]
    for i, p in enumerate(points):
        run = root / prepared.sweep_id / "points" / p.point_id
        assert (run / "stdout.log").read_text() == f"x={i} cpus=1 gpus={i % 2}\n"
        assert read_exit(run, token) == (3 if i == 3 else 0)
