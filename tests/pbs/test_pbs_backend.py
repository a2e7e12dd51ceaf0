"""Render → submit → wait → status through hpcjobs' PBS Pro and Torque backends, against the stand-in.

The stand-in (tests/pbs_standin) really runs the scripts and prints what OpenPBS 23 / Torque 6
print; the same parsers pass on real recorded output (tests/data/pbs, tests/data/torque).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import render_spec

from hpcjobs import states
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import CommandError
from hpcjobs.render.script import render_job
from hpcjobs.schedulers.base import ArraySpec
from hpcjobs.schedulers.client import PollSchedule, SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered

SITES = Path(__file__).resolve().parent.parent / "sites"
FAST = PollSchedule(initial=0.2, factor=1.5, maximum=1.0)


def _site(flavor: str):
    return load_site_file(SITES / ("pbstest.yaml" if flavor == "pbspro" else "torquetest.yaml"))


def _render(flavor: str, name: str, spec: dict, **kw):
    return render_spec(spec, _site(flavor), name=name, **kw)


@pytest.mark.parametrize("pbs_standin", ["pbspro", "torque"], indirect=True)
def test_complete_fail_walltime_delete(pbs_standin):
    flavor = pbs_standin.flavor
    client = SchedulerClient(get_backend(flavor))
    work = pbs_standin.workdir
    subs = {
        "ok": submit_rendered(_render(flavor, "ok", {"command": 'echo "idx=${PBS_JOBNAME}"'}),
                              client=client, submit_dir=work),
        "exit3": submit_rendered(_render(flavor, "exit3", {"command": "exit 3"}), client=client, submit_dir=work),
        "walltime": submit_rendered(_render(flavor, "walltime", {"command": "sleep 60",
                                                                 "resources": {"walltime": "00:00:02"}}),
                                    client=client, submit_dir=work),
        "deleted": submit_rendered(_render(flavor, "deleted", {"command": "sleep 60"}),
                                   client=client, submit_dir=work),
    }
    deadline = time.monotonic() + 20
    while [r.state for r in client.status([subs["deleted"].job_id])] != [states.RUNNING]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    client.cancel([subs["deleted"].job_id])
    records = client.wait([s.job_id for s in subs.values()], timeout=60, schedule=FAST)
    by = {name: next(r for r in records if client.backend.same_job(r.job_id, s.job_id))
          for name, s in subs.items()}
    assert (by["ok"].state, by["ok"].exit_code) == (states.COMPLETED, 0)
    assert (by["exit3"].state, by["exit3"].exit_code) == (states.FAILED, 3)
    assert by["walltime"].state == states.TIMEOUT
    assert by["deleted"].state == states.CANCELLED
    # the tag travels in the variable list and comes back from qstat
    assert by["ok"].comment == subs["ok"].tag.render()
    out = work / "hpcjobs-logs" / "ok.out"
    assert out.read_text().strip() == "idx=ok"


@pytest.mark.parametrize("pbs_standin", ["pbspro", "torque"], indirect=True)
def test_array_with_throttle(pbs_standin):
    flavor = pbs_standin.flavor
    client = SchedulerClient(get_backend(flavor))
    var = "PBS_ARRAY_INDEX" if flavor == "pbspro" else "PBS_ARRAYID"
    job = _render(flavor, "arr", {"command": f'echo "task=${{{var}}}" > "task-${{{var}}}.txt"',
                                  "workdir": str(pbs_standin.workdir)}, array=ArraySpec(0, 5, throttle=2))
    sub = submit_rendered(job, client=client, submit_dir=pbs_standin.workdir)
    assert sub.job_id.split(".")[0].endswith("[]")
    records = client.wait([sub.job_id], timeout=60, schedule=FAST)
    tasks = sorted((r.array_task_id, r.state) for r in records if r.array_task_id is not None)
    assert tasks == [(i, states.COMPLETED) for i in range(6)]
    for i in range(6):
        assert (pbs_standin.workdir / f"task-{i}.txt").read_text().strip() == f"task={i}"


def test_qsub_rejection_carries_details(pbs_standin):
    client = SchedulerClient(get_backend("pbspro"))
    job = _render("pbspro", "bad", {"command": "true", "partition": "workq"})
    from dataclasses import replace

    bad = replace(job, job=replace(job.job, extra_directives=("-q nosuch",)))
    with pytest.raises(CommandError) as info:
        submit_rendered(render_job(bad.job), client=client, submit_dir=pbs_standin.workdir)
    assert Path(info.value.argv[0]).name == "qsub" and info.value.returncode != 0
    assert "Unknown queue" in info.value.stderr


def test_status_of_unknown_and_known_ids_together(pbs_standin):
    client = SchedulerClient(get_backend("pbspro"))
    sub = submit_rendered(_render("pbspro", "known", {"command": "true"}), client=client,
                          submit_dir=pbs_standin.workdir)
    records = client.wait([sub.job_id], timeout=30, schedule=FAST)
    both = client.status([sub.job_id, f"99999.{pbs_standin.server}"])
    assert [r.job_id for r in both] == [r.job_id for r in records]
