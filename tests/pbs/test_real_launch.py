"""Distributed launch and preemption on the real OpenPBS testbed (one node, 2 cpus).

* ``ddp``: ``examples/torch_ddp_allreduce.py`` through the rendered torchrun template, one PBS chunk
  of 2 mpiprocs (``select=1:ncpus=2:mpiprocs=2``): the batch script starts torchrun on the chunk's
  first slot with ``pbsdsh``, torchrun starts 2 processes (gloo) that all-reduce 1 + 2 = 3.

  Two *chunks* on this one host cannot run the template: ``nodes: 2`` renders ``-l place=scatter``
  (one host per chunk), which a one-node server never satisfies, and a ``#PBS -l place=free`` added
  after it in ``directives:`` does not replace it (qsub keeps the first ``place`` of the script;
  seen here). With ``qsub -l place=free`` on the command line both chunks land on the host
  (``exec_vnode = (vm:ncpus=1)+(vm:ncpus=1)``), but ``$PBS_NODEFILE`` then names that host twice,
  the template starts one torchrun per *host* (the nodefile de-duplicated) with ``--nnodes=2``, and
  its rendezvous waits for a second launcher that never comes (the job runs into its wall time).
* ``rerun``: a preemptible job (``launch.preemptible``) whose program checkpoints on SIGTERM;
  ``qrerun`` (as root) while it runs: the server sends SIGTERM to the job's session, the batch
  shell's TERM trap forwards it and runs the checkpoint hook (all within the queue's ``kill_delay``,
  after which the mom kills what is left), and the server requeues the job (``Rerunable`` is True
  by default). The second run resumes from the checkpoint and exits 0: ``run_count`` 2 in ``qstat
  -x``, an ``R`` (rerun) and one final ``E`` record in the accounting log.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from helpers import render_spec

from hpcjobs.config.sites import load_site_file
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered
from pbs.real import PBS_EXEC, pbs

pytestmark = pytest.mark.pbs

ROOT = Path(__file__).resolve().parents[2]
SITE = load_site_file(ROOT / "tests" / "sites" / "openpbs-sweeps.yaml")
#: torchrun of the interpreter running the tests (a PBS job does not inherit this PATH).
SITE_TORCH = SITE.model_copy(update={"distributed": SITE.distributed.model_copy(
    update={"torchrun": f"{sys.executable} -m torch.distributed.run"})})

RESUMABLE = '''\
"""Counts steps; on SIGTERM writes the step to the checkpoint and stops; resumes from it."""
import signal, sys, time
from pathlib import Path

ckpt, log = Path(sys.argv[1]), Path(sys.argv[2])
resumed = ckpt.exists()
step = int(ckpt.read_text()) if resumed else 0
start = step

def on_term(*_):
    ckpt.write_text(str(step))
    with log.open("a") as f:
        f.write(f"signal TERM step={step} t={time.time():.2f}\\n")
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
with log.open("a") as f:
    f.write(f"start step={step} t={time.time():.2f}\\n")
while not (resumed and step >= start + 4):
    time.sleep(0.2)
    step += 1
with log.open("a") as f:
    f.write(f"done step={step} t={time.time():.2f}\\n")
'''


def _render(name: str, spec: dict, site=SITE):
    return render_spec(spec, site, name=f"it-{name}")


def _torch_problem() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed (pip install torch)"
    return None


@pytest.fixture(scope="module")
def launched(pbs_server_session, tmp_path_factory):
    """Submit the jobs side by side (qrerun the second while it runs); wait for both to be final."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCJOBS_PBS_BIN", str(PBS_EXEC / "bin"))
        yield _launch(pbs_server_session, tmp_path_factory)


def _launch(pbs_server_session, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("pbslaunch")
    workdir.chmod(0o777)
    (workdir / "resumable.py").write_text(RESUMABLE)
    client = SchedulerClient(get_backend("pbspro"))
    jobs = {"rerun": _render("rerun", {
        "resources": {"walltime": "2m"},
        "command": f"{sys.executable} resumable.py ckpt.txt progress.log",
        "launch": {"preemptible": True, "signal_seconds": 60, "max_requeues": 1,
                   "checkpoint_command": 'echo "hook t=$(date +%s.%N)" >>hook.log'},
        "setup": ['echo "batch t=$(date +%s.%N)" >>progress.log'],
    })}
    torch_problem = _torch_problem()
    if torch_problem is None:
        jobs["ddp"] = _render("ddp", {
            "resources": {"nodes": 1, "tasks_per_node": 2, "cpus_per_task": 1, "walltime": "5m"},
            "launch": {"launcher": "torchrun", "program": str(ROOT / "examples" / "torch_ddp_allreduce.py"),
                       "args": ["--backend", "gloo", "--steps", "3", "--out", str(workdir / "ddp")]},
        }, site=SITE_TORCH)
    subs = {name: submit_rendered(job, client=client, submit_dir=workdir) for name, job in jobs.items()}
    rerun = subs["rerun"].job_id
    deadline = time.monotonic() + 240
    progress = workdir / "progress.log"
    while not (progress.exists() and "start step=0" in progress.read_text()):
        assert time.monotonic() < deadline, "the preemptible job did not start"
        time.sleep(0.3)
    time.sleep(1.0)  # a few steps before the checkpoint (not a synchronisation: any step count will do)
    asked = time.time()
    pbs(["qrerun", rerun])
    final = {}
    for name, sub in subs.items():
        final[name] = pbs_server_session.wait_final([sub.job_id], timeout=300)[sub.job_id]
    return subs, final, workdir, torch_problem, asked


def test_torchrun_two_processes_in_one_pbs_chunk(launched):
    subs, final, workdir, torch_problem, _ = launched
    if torch_problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {torch_problem}")
        pytest.skip(torch_problem)
    job_id = subs["ddp"].job_id
    attrs = final["ddp"]
    err = (workdir / "hpcjobs-logs" / "it-ddp.err").read_text()
    assert (attrs["substate"], attrs["Exit_status"]) == (92, 0), err
    assert attrs["Resource_List"]["select"] == "1:ncpus=2:mpiprocs=2:ompthreads=1"
    reports = sorted((json.loads(p.read_text()) for p in (workdir / "ddp").glob("rank-*.json")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in reports)
    assert [r["allreduce"] for r in reports] == [3.0, 3.0]
    assert all(r["job_id"] == job_id for r in reports)
    port = 20000 + int(job_id.split(".")[0]) % 10000
    assert f"hpcjobs: torchrun on 1 node(s), rendezvous {reports[0]['host']}:{port}" in err


def test_qrerun_checkpoints_requeues_and_resumes(launched, pbs_server_session):
    subs, final, workdir, _, asked = launched
    job_id = subs["rerun"].job_id
    attrs = final["rerun"]
    progress = (workdir / "progress.log").read_text().splitlines()
    assert (attrs["substate"], attrs["Exit_status"], attrs["run_count"]) == (92, 0, 2), (attrs, progress)
    kinds = [line.split()[0] for line in progress if not line.startswith("signal")]
    assert kinds == ["batch", "start", "batch", "start", "done"], progress
    signalled = [line for line in progress if line.startswith("signal TERM")]
    assert signalled, progress  # the program got SIGTERM (from the mom, and forwarded by the batch shell)
    fields = [dict(w.split("=", 1) for w in line.split() if "=" in w) for line in progress]
    checkpoint = int((workdir / "ckpt.txt").read_text())
    starts = [f for line, f in zip(progress, fields, strict=True) if line.startswith("start")]
    assert int(starts[0]["step"]) == 0 and int(starts[1]["step"]) == checkpoint > 0  # resumed from it
    assert int(fields[-1]["step"]) == checkpoint + 4
    assert (workdir / "hook.log").read_text().startswith("hook t=")  # the checkpoint hook ran
    err = (workdir / "hpcjobs-logs" / "it-rerun.err").read_text()
    assert "hpcjobs: SIGTERM at " in err and "hpcjobs: running the checkpoint command" in err, err
    # the server's record: a rerun record, then one E for the whole job
    since = asked - 5
    pbs_server_session.wait_accounting(job_id, "R", since=since)
    end = pbs_server_session.wait_accounting(job_id, "E", since=since)
    assert "Exit_status=0 " in end and "run_count=2" in end, end
    # measured, printed: the signal's delay after qrerun, the grace before SIGKILL, the restart gap
    term = min(float(f["t"]) for line, f in zip(progress, fields, strict=True) if line.startswith("signal"))
    second = float(starts[1]["t"])
    queue = json.loads(pbs(["qstat", "-Q", "-f", "-F", "json", "workq"]).stdout)["Queue"]["workq"]
    print(f"qrerun -> SIGTERM {term - asked:.1f} s; kill_delay {queue.get('kill_delay', 'unset (default)')}; "
          f"second run started {second - term:.1f} s after the signal")
