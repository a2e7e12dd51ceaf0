"""A packed sweep's points joined to their own sacct steps (``srun --exact --job-name=<point id>``).

The capture ``tests/data/slurm/testbed/sacct_packed_sweep.txt`` (tests/data/SOURCES.md) is the sweep of
``tests/integration/test_pack_slurm.py``: 12 points packed 4 per task in array 9599, task 9599_1
cancelled while its last two points ran, those two resubmitted as array 9611 (one task).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from hpcjobs.accounting import read_sacct_parsable2
from hpcjobs.accounting.reports.sweeps import sweep_frame

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed" / "sacct_packed_sweep.txt"
SWEEP = "packtest-e72efb09"


@pytest.fixture(scope="module")
def jobs() -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_sacct_parsable2(CAPTURE, None)


def test_the_capture_has_one_step_per_point(jobs: pd.DataFrame) -> None:
    steps = jobs[jobs["step"].notna() & ~jobs["step"].isin(["batch", "extern"])]
    assert len(steps[steps["array_job_id"] == "9599"]) == 12
    assert steps["job_name"].nunique() == 12  # the resubmitted two ran again under their ids


def test_points_take_their_own_step(jobs: pd.DataFrame) -> None:
    points = pd.DataFrame({
        "point_id": ["ca0228c67ef4", "0def8ba704a6", "e08ac251d05a", "cc886cb9c8b8", "unpacked"],
        "index": [0, 2, 4, 7, 12],
        "params": [{"DUR": 1}, {"DUR": 3}, {"DUR": 1}, {"DUR": 120}, {"DUR": 0}],
        "array_job_id": ["9599", "9599", "9599", "9611", "9599"],
        "array_index": [0, 0, 1, 0, 2],
    })
    frame = sweep_frame(points, jobs, sweep_id=SWEEP)
    got = frame[["point_id", "job_id", "state", "max_rss_bytes"]].astype(object).values.tolist()
    # values from the capture: 9599_0.0 6772K, 9599_0.2 6556K, 9599_1.0 6964K, 9611_0.0 6604K
    assert got == [["ca0228c67ef4", "9599_0", "COMPLETED", 6772 * 1024],
                   ["0def8ba704a6", "9599_0", "COMPLETED", 6556 * 1024],
                   ["e08ac251d05a", "9599_1", "COMPLETED", 6964 * 1024],  # its task was CANCELLED
                   ["cc886cb9c8b8", "9611_0", "COMPLETED", 6604 * 1024],
                   ["unpacked", "9599_2", "COMPLETED", 48136 * 1024]]  # no step of its name: the task's
    assert [s.total_seconds() for s in frame["elapsed"][:4]] == [2.0, 1.0, 1.0, 1.0]
    # TotalCPU 00:00.011 over 2 s on 1 CPU
    assert frame["cpu_efficiency"][0] == pytest.approx(0.011 / 2)
    # 6772K of the task's 1G shared among its 4 points
    assert frame["mem_efficiency"][0] == pytest.approx(6772 * 1024 / (1 << 30) * 4)
