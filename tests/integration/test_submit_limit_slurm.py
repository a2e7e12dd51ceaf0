"""A QOS submit limit on the real Slurm testbed: read by hpcjobs, enforced by Slurm, and a sweep larger
than it trickles in without one refused ``sbatch``.

The testbed enforces ``AccountingStorageEnforce=associations,limits,qos`` (without ``limits`` a
``MaxSubmitJobsPerUser`` set with sacctmgr is ignored: 200 tasks were once accepted under 150). The test
sets the limit on the ``normal`` QOS (root's default) for its own duration and removes it after.
"""

from __future__ import annotations

import getpass
import time
from pathlib import Path

import pytest

from hpcjobs.process import run_command
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import run_sweep, sweep_status

pytestmark = pytest.mark.slurm

SITE = Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml"
CHUNK_LIMIT = 12  # tasks the sweep may have queued at once, on top of what the user already has


def _queued(user: str) -> int:
    backend = get_backend("slurm")
    out = run_command(backend.queued_argv(user), timeout=30).stdout
    return int(backend.parse_queued(out))


def _set_qos_limit(value: int) -> None:
    run_command(["sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", f"MaxSubmitJobsPerUser={value}"],
                timeout=30)


def test_qos_submit_limit_is_read_and_a_larger_sweep_trickles_in(slurm_testbed, slurm_workdir, monkeypatch):
    user = getpass.getuser()
    monkeypatch.setenv("HPCJOBS_LIMITS_TTL_S", "0")
    monkeypatch.chdir(slurm_workdir)
    limit = CHUNK_LIMIT + _queued(user)  # other tests' jobs of this user still count against it
    _set_qos_limit(limit)
    try:
        client = SchedulerClient(get_backend("slurm"))
        assert client.limits(user).max_submit_jobs == limit
        # Slurm itself refuses more than the limit in one submission: the limit is real
        over = run_command(["sbatch", "--parsable", f"--array=0-{limit}", "--time=1", "--wrap=true"], timeout=30,
                           check=False)
        assert over.returncode != 0 and "MaxSubmit" in over.stderr, (over.returncode, over.stderr)
        exp = Path(slurm_workdir) / "trickle.yaml"
        n = 3 * CHUNK_LIMIT + 5
        exp.write_text("name: trickle\ncommand: sleep 1\nresources:\n  walltime: 00:02:00\n"
                       f"sweep:\n  grid:\n    x: {list(range(n))}\n")
        prepared, report = run_sweep(exp, site=str(SITE), root=Path(slurm_workdir) / "sweeps", client=client)
        assert report.points_submitted == n
        # every chunk fits the limit, and no sbatch was refused on the way (one call per chunk)
        assert report.chunks_submitted >= -(-n // limit) and client.calls["sbatch"] == report.chunks_submitted
        deadline = time.monotonic() + 300
        while not (st := sweep_status(prepared.sweep_id, root=Path(slurm_workdir) / "sweeps")).done:
            assert time.monotonic() < deadline, st.counts
            time.sleep(1)
        assert st.counts == {"COMPLETED": n}
    finally:
        _set_qos_limit(-1)
    assert SchedulerClient(get_backend("slurm")).limits(user).max_submit_jobs is None
