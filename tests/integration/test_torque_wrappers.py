"""A script rendered for Torque, submitted through Slurm's PBS wrappers (Debian ``slurm-wlm-torque``).

The wrappers are not a PBS oracle (tests/slurm/README.md; Slurm's contribs/torque wrappers):
``qsub`` prints a bare id (no ``.server``), ``-o``/``-e`` are overridden by the wrapper, ``-A`` and
``-j oe`` are ignored, ``qstat`` has no ``-x`` (so no history: hpcjobs reads the outcome from
``sacct``), shows ``C`` for every finished state and has no exit status. What this proves is that
the ``#PBS`` lines hpcjobs writes for Torque (``-N``, ``-q``, ``-l nodes=1:ppn=P``, ``-l mem=``,
``-l walltime=``) are accepted and honoured by a real scheduler.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpcjobs import states
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.sites import load_site_file
from hpcjobs.output import atomic_write_text
from hpcjobs.process import run_command
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve
from hpcjobs.schedulers.client import PollSchedule, SchedulerClient
from hpcjobs.schedulers.registry import get_backend

pytestmark = pytest.mark.slurm

SITE = load_site_file(Path(__file__).resolve().parent.parent / "sites" / "torque-on-slurm.yaml")


def test_torque_script_runs_through_slurm_pbs_wrappers(slurm_testbed, tmp_path):
    os.chmod(tmp_path, 0o777)
    exp = Experiment.model_validate({
        "name": "torquewrap", "resources": {"cpus_per_task": 2, "memory": "300M", "walltime": "00:05:00"},
        "command": 'echo "jobid=$PBS_JOBID ncpus=$SLURM_CPUS_ON_NODE" > wrapped.txt',
    })
    script = tmp_path / "job.sh"
    text = render_job(resolve(exp, SITE)).text
    assert "#PBS -l nodes=1:ppn=2" in text and "#PBS -l walltime=00:05:00" in text
    atomic_write_text(script, text)
    (tmp_path / "hpcjobs-logs").mkdir()
    out = run_command(["/usr/bin/qsub", str(script)], cwd=tmp_path).stdout.strip()
    assert out.isdigit(), f"the wrapper prints a bare Slurm id, got {out!r}"
    # qstat of the wrappers has no history; the outcome comes from Slurm's accounting
    # (a finished job's sacct row is incomplete for ~5 s, JobName "allocation": wait for the full row)
    records = SchedulerClient(get_backend("slurm")).wait(
        [out], timeout=120, schedule=PollSchedule(initial=0.5, factor=1.5, maximum=3),
        is_done=lambda recs: all(r.state in states.TERMINAL_STATES and r.name != "allocation" for r in recs))
    assert [r.state for r in records] == [states.COMPLETED]
    assert records[0].name == "torquewrap"
    text = (tmp_path / "wrapped.txt").read_text()
    assert f"jobid={out}" in text  # spank_pbs sets PBS_JOBID
    assert "ncpus=2" in text  # ppn=2 became two CPUs
    # the state is final before the rest of the row: Timelimit and ReqMem come seconds later
    (row,) = slurm_testbed.wait_complete_rows([out], ["Timelimit", "ReqMem"])
    assert row["Timelimit"] == "00:05:00"
    assert row["ReqMem"] == "300M"
