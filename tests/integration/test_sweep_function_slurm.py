"""A Python function swept through submitit on the real Slurm, sharing the ledger and `hpcjobs status`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from hpcjobs.process import run_command
from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.functions import sweep_function

pytestmark = pytest.mark.slurm

HERE = Path(__file__).resolve().parent
SITE = str(HERE.parent / "sites" / "hpctest-small-arrays.yaml")


def test_function_sweep_through_submitit(slurm_testbed, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE) + ":" + ":".join(sys.path))
    from sweep_functions_mod import scaled

    tmp_path.chmod(0o777)
    root = tmp_path / "sweeps"
    fs = sweep_function(scaled, {"grid": {"x": [1, 2, 3, 4], "model.depth": [10]}}, name="fnsweep",
                        site=SITE, resources={"walltime": "5m"}, max_array_size=3, root=root)
    # 4 points in chunks of 2 (max_array_size 3 → 2 tasks): two arrays
    assert len({str(j.job_id).split("_")[0] for j in fs.jobs}) == 2
    assert fs.wait() == {"COMPLETED": 3, "FAILED": 1}
    values = {p.params["x"]: j for p, j in zip(fs.points, fs.jobs, strict=True)}
    assert values[1].result() == 10 and values[4].result() == 40
    with pytest.raises(Exception, match="x=3 fails on purpose"):
        values[3].result()
    # the same sweep seen by `hpcjobs status` (sacct), and the hpcjobs tag in every job's comment
    st = sweep_status(fs.sweep_id, root=root)
    assert st.counts == {"COMPLETED": 3, "FAILED": 1}
    arrays = {str(j.job_id).split("_")[0] for j in fs.jobs}
    deadline = time.monotonic() + 30  # a finished job's sacct row is complete a few seconds later
    while True:
        comments = run_command(["sacct", "-n", "-P", "-X", "-j", ",".join(arrays),
                                "--format=Comment"]).stdout.split("\n")[:-1]
        if len(comments) == 4 and all(c.startswith(f"hpcjobs:{fs.sweep_id}:") for c in comments):
            break
        assert time.monotonic() < deadline, comments
        time.sleep(1)
