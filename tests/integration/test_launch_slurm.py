"""Distributed launch and preemption on the real Slurm testbed.

Three jobs are submitted side by side and waited for together:

* ``ddp``: ``examples/torch_ddp_allreduce.py`` through the rendered torchrun template, 1 node × 2
  processes on the CPU (gloo): both ranks join and all-reduce 1 + 2 = 3;
* ``requeue``: a 1-minute job with ``--signal=B:USR1@20``: the batch shell traps the signal,
  forwards it to the program (which writes its checkpoint), runs the checkpoint hook and requeues
  itself once; the second run (``SLURM_RESTART_COUNT=1``) resumes from the checkpoint and completes.
  slurmctld sends ``--signal`` warnings from its 30-s limit loop and, so as never to be late, as soon
  as fewer than N + 30 s remain: with ``--time=1 --signal=B:USR1@50`` it came 2 s after the start
  (58 s before the end), and would come as early in the resumed run, racing its completion. With
  ``@20`` it is due 10 s after the start and comes 10-40 s after it (measured, printed, not
  asserted); the resumed run needs about 3 s. Slurm makes a requeued job eligible again
  121 s after the requeue (EligibleTime; the job credential's lifetime), which makes this the
  slowest job of the module (about 2 min 20 s in all);
* ``ddp-preempt``: torchrun (2 workers) in a preemptible 1-minute job allowed no requeue: the
  signal travels batch shell → srun → the per-node shell → the workers (torchrun itself ignores
  it), both workers see it, the hook runs, and the job ends with the documented exit status 75;
* ``sampler``: a GPU job with the GPU sampler on: the testbed's GPUs are fake and it has no
  ``nvidia-smi``, so the job completes and writes no CSV and no error;
* ``tracked``: a one-point sweep with ``tracking:`` (W&B offline, an MLflow file store), preemptible
  as ``requeue``: the first run is signalled and requeues itself, and both runs of the point log to
  the *same* tracker run (one MLflow run with both steps; two W&B offline run folders of one run id,
  which ``wandb sync`` uploads as one run).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest
from helpers import render_spec

from hpcjobs.config.sites import load_site_file
from hpcjobs.process import run_command
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.submit import submit_rendered
from hpcjobs.sweep.api import run_sweep

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SITE = load_site_file(ROOT / "tests" / "sites" / "hpctest.yaml")
#: torchrun of the interpreter running the tests, which has torch (the job inherits PATH anyway).
SITE_TORCH = SITE.model_copy(update={"distributed": SITE.distributed.model_copy(
    update={"torchrun": f"{sys.executable} -m torch.distributed.run"})})

RESUMABLE = '''\
"""Counts steps; on SIGUSR1 writes the step to the checkpoint and stops; resumes from it."""
import os, signal, sys, time
from pathlib import Path

ckpt, log = Path(sys.argv[1]), Path(sys.argv[2])
restart = os.environ.get("SLURM_RESTART_COUNT", "0")
step = int(ckpt.read_text()) if ckpt.exists() else 0
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(time.time()))
with log.open("a") as f:
    f.write(f"start restart={restart} step={step} t={time.time():.1f}\\n")
resumed = ckpt.exists()
while not stop:
    time.sleep(0.5)
    step += 1
    if resumed and step >= int(ckpt.read_text()) + 4:
        break
with log.open("a") as f:
    if stop:
        ckpt.write_text(str(step))
        f.write(f"signal restart={restart} step={step} t={stop[0]:.1f}\\n")
    else:
        f.write(f"done restart={restart} step={step} t={time.time():.1f}\\n")
'''


SIGNALLED_WORKER = '''\
"""A torchrun worker that waits (at most 55 s) for SIGUSR1 and says whether it came."""
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(time.time()))
deadline = time.time() + 55
while not got and time.time() < deadline:
    time.sleep(0.2)
with open(f"worker-{os.environ['RANK']}.txt", "w") as f:
    f.write(f"signal={bool(got)}\\n")
'''


TRACKED = '''\
"""Joins the point's W&B and MLflow runs, logs its restart count; the first run waits for SIGUSR1."""
import json, os, signal, sys, time
stop = []
signal.signal(signal.SIGUSR1, lambda *_: stop.append(time.time()))
import mlflow, wandb
restart = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
run = wandb.init(config={"lr": -1.0})
with mlflow.start_run() as active:
    mlflow.log_metric("restart", restart, step=restart)
    run.log({"restart": restart})
    seen = {"wandb": run.id, "group": run.group, "lr": run.config["lr"], "mlflow": active.info.run_id}
    with open(os.path.join(os.environ["HPCJOBS_RUN_DIR"], f"seen-{restart}.json"), "w") as f:
        json.dump(seen, f)
    deadline = time.time() + 55
    while restart == 0 and not stop and time.time() < deadline:
        time.sleep(0.2)
run.finish()
'''


def _tracked_sweep(workdir: Path):
    """Submit the one-point tracked sweep (see the module's docstring); returns (prepared, job id)."""
    (workdir / "tracked.py").write_text(TRACKED)
    for sub in ("wandb-config", "wandb-cache", "mlruns"):
        (workdir / sub).mkdir(mode=0o777)
        (workdir / sub).chmod(0o777)
    env = {"WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(workdir / "wandb-config"),
           "WANDB_CACHE_DIR": str(workdir / "wandb-cache"), "WANDB_DATA_DIR": str(workdir / "wandb-cache"),
           "MLFLOW_ALLOW_FILE_STORE": "true"}
    exp = workdir / "tracked.yaml"
    exp.write_text(json.dumps({
        "name": "it-tracked", "resources": {"walltime": "1m"}, "environment": env,
        "command": f"{sys.executable} tracked.py",
        "launch": {"preemptible": True, "signal_seconds": 20, "max_requeues": 1},
        "sweep": {"grid": {"lr": [0.25]}},
        "tracking": {"python": sys.executable, "wandb": {"project": "hpcjobs-it", "mode": "offline"},
                     "mlflow": {"experiment": "hpcjobs-it", "tracking_uri": (workdir / "mlruns").as_uri()}},
    }))
    with contextlib.chdir(workdir):
        prepared, report = run_sweep(exp, site=str(ROOT / "tests" / "sites" / "hpctest.yaml"),
                                     root=workdir / "sweeps")
    return prepared, report.job_ids[0]


def _render(name: str, spec: dict, site=SITE):
    return render_spec(spec, site, name=f"it-{name}")


@pytest.fixture(scope="module")
def launched(slurm_testbed, tmp_path_factory):
    """Submit the three jobs side by side; wait for all; return submissions, rows and the work dir."""
    workdir = tmp_path_factory.mktemp("launch")
    workdir.chmod(0o777)
    client = SchedulerClient(get_backend("slurm"))
    (workdir / "resumable.py").write_text(RESUMABLE)
    (workdir / "signalled_worker.py").write_text(SIGNALLED_WORKER)
    jobs = {
        "requeue": _render("requeue", {
            "resources": {"walltime": "1m"},
            "command": 'python3 resumable.py ckpt.txt progress.log; echo "restart=${SLURM_RESTART_COUNT:-0}"',
            "launch": {"preemptible": True, "signal_seconds": 20, "max_requeues": 1,
                       "checkpoint_command": 'echo "hook restart=${SLURM_RESTART_COUNT:-0} t=$(date +%s)" >>hook.log'},
            "setup": ['echo "batch restart=${SLURM_RESTART_COUNT:-0} t=$(date +%s)" >>progress.log'],
        }),
        "sampler": _render("sampler", {
            "partition": "gpu", "resources": {"gpus_per_node": 1},
            "command": 'echo "CVD=$CUDA_VISIBLE_DEVICES"',
            "launch": {"gpu_sampler": True, "gpu_sampler_interval": 1},
        }),
    }
    try:
        import torch  # noqa: F401
    except ImportError:
        torch_problem = "torch is not installed (pip install torch==2.13.0)"
    else:
        torch_problem = None
        jobs["ddp"] = _render("ddp", {
            "resources": {"nodes": 1, "tasks_per_node": 2, "cpus_per_task": 1, "memory": "2G"},
            "launch": {"launcher": "torchrun", "program": str(ROOT / "examples" / "torch_ddp_allreduce.py"),
                       "args": ["--backend", "gloo", "--steps", "3", "--out", str(workdir / "ddp")]},
        }, site=SITE_TORCH)
        jobs["ddp-preempt"] = _render("ddp-preempt", {
            "resources": {"nodes": 1, "tasks_per_node": 2, "cpus_per_task": 1, "memory": "2G", "walltime": "1m"},
            "launch": {"launcher": "torchrun", "program": "signalled_worker.py", "preemptible": True,
                       "signal_seconds": 20, "max_requeues": 0, "checkpoint_command": "echo hook >ddp-hook.txt"},
        }, site=SITE_TORCH)
    start = time.monotonic()
    subs = {name: submit_rendered(job, client=client, submit_dir=workdir) for name, job in jobs.items()}
    tracked = _tracked_sweep(workdir)
    rows = slurm_testbed.wait_terminal(*[s.job_id for s in subs.values()], f"{tracked[1]}_0", timeout=420)
    print(f"launch jobs finished in {time.monotonic() - start:.0f} s")
    return subs, rows, workdir, torch_problem, tracked


def _need_torch(problem: str | None) -> None:
    """Skip without torch on a laptop; fail under ``CI=true``, where the proof must run."""
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {problem}")
    pytest.skip(problem)


def _log(workdir: Path, name: str, job_id: str, ext: str) -> str:
    return (workdir / "hpcjobs-logs" / f"it-{name}-{job_id}.{ext}").read_text()


def test_torchrun_ddp_two_ranks_allreduce(launched):
    subs, rows, workdir, torch_problem, _ = launched
    _need_torch(torch_problem)
    job_id = subs["ddp"].job_id
    out = _log(workdir, "ddp", job_id, "out")
    assert rows[job_id]["State"] == "COMPLETED", out + _log(workdir, "ddp", job_id, "err")
    reports = sorted((json.loads(p.read_text()) for p in (workdir / "ddp").glob("rank-*.json")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in reports)
    assert [r["allreduce"] for r in reports] == [3.0, 3.0]  # (0 + 1) + (1 + 1)
    assert all(r["job_id"] == job_id for r in reports)
    assert reports[0]["loss"] == reports[1]["loss"]  # DDP keeps the replicas identical
    err = _log(workdir, "ddp", job_id, "err")
    port = 20000 + int(job_id) % 10000
    assert f"hpcjobs: torchrun on 1 node(s), rendezvous {reports[0]['host']}:{port}" in err


def test_signal_checkpoint_requeue_resume(launched, slurm_testbed):
    subs, rows, workdir, _, _ = launched
    job_id = subs["requeue"].job_id
    out, err = _log(workdir, "requeue", job_id, "out"), _log(workdir, "requeue", job_id, "err")
    assert rows[job_id]["State"] == "COMPLETED", out + err
    progress = (workdir / "progress.log").read_text().splitlines()
    kinds = [line.split()[0] + " " + line.split()[1] for line in progress]
    assert kinds == ["batch restart=0", "start restart=0", "signal restart=0",
                     "batch restart=1", "start restart=1", "done restart=1"], progress
    fields = [dict(w.split("=", 1) for w in line.split()[1:]) for line in progress]
    checkpointed = int(fields[2]["step"])
    assert checkpointed > 0 and (workdir / "ckpt.txt").read_text() == str(checkpointed)
    assert int(fields[4]["step"]) == checkpointed  # resumed from the checkpoint
    assert int(fields[5]["step"]) == checkpointed + 4
    assert (workdir / "hook.log").read_text().startswith("hook restart=0 ")
    assert "hpcjobs: SIGUSR1 at " in err and f"hpcjobs: requeueing job {job_id} (restart 1 of 1)" in err
    assert out.splitlines()[-1] == "restart=1"  # --open-mode=append kept both runs' output
    # sacct --duplicates: the first run REQUEUED, the second COMPLETED, same job id
    dup = slurm_testbed.sacct_rows([job_id], fields=("JobID", "State", "Start", "End", "Elapsed"))
    assert len(dup) == 1  # without --duplicates only the last run
    runs = run_command(["sacct", "-X", "--duplicates", "--parsable2", "--noheader", f"--jobs={job_id}",
                        "--format=JobID,State"], check=True).stdout.split()
    assert runs == [f"{job_id}|REQUEUED", f"{job_id}|COMPLETED"], runs
    lead = float(fields[2]["t"]) - float(fields[0]["t"])
    restart_gap = float(fields[3]["t"]) - float(fields[2]["t"])
    print(f"signal {lead:.1f} s after the start (due at 10 s: --time=1 --signal=B:USR1@20); "
          f"second run started {restart_gap:.1f} s after the signal")


def test_signal_reaches_torchrun_workers_through_srun(launched):
    subs, rows, workdir, torch_problem, _ = launched
    _need_torch(torch_problem)
    job_id = subs["ddp-preempt"].job_id
    err = _log(workdir, "ddp-preempt", job_id, "err")
    assert (rows[job_id]["State"], rows[job_id]["ExitCode"]) == ("FAILED", "75:0"), err
    assert [(workdir / f"worker-{r}.txt").read_text() for r in (0, 1)] == ["signal=True\n"] * 2, err
    assert (workdir / "ddp-hook.txt").read_text() == "hook\n"
    assert "hpcjobs: not requeueing: 0 restart(s), the limit is 0" in err


def test_gpu_sampler_without_nvidia_smi_does_nothing(launched):
    subs, rows, workdir, _, _ = launched
    job_id = subs["sampler"].job_id
    assert rows[job_id]["State"] == "COMPLETED"
    assert _log(workdir, "sampler", job_id, "out").strip() == "CVD=0"
    assert _log(workdir, "sampler", job_id, "err") == ""
    assert not list((workdir / "hpcjobs-logs").glob("*.gpu.csv"))
    assert not os.path.exists(workdir / "hpcjobs-logs" / f"it-sampler-{job_id}.gpu.csv")


def test_requeued_point_resumes_its_tracker_runs(launched, monkeypatch):
    """Both runs of a requeued point log to one MLflow run and one W&B run id; load_sweep names them."""
    from mlflow.tracking import MlflowClient

    import hpcjobs
    from hpcjobs.config.tracking import wandb_run_id

    _subs, rows, workdir, _, (prepared, job_id) = launched
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it to read a file store
    row = rows[f"{job_id}_0"]
    (point,) = prepared.points
    run_dir = prepared.folder / "points" / point.point_id
    err = (run_dir / "stderr.log").read_text()
    assert row["State"] == "COMPLETED", err
    seen = [json.loads((run_dir / f"seen-{r}.json").read_text()) for r in (0, 1)]
    expected = wandb_run_id(prepared.sweep_id, point.point_id)
    assert [s["wandb"] for s in seen] == [expected, expected]
    assert [s["group"] for s in seen] == [prepared.sweep_id] * 2
    assert [s["lr"] for s in seen] == [0.25, 0.25]  # the point's value, not the code's default
    assert seen[0]["mlflow"] == seen[1]["mlflow"]
    client = MlflowClient((workdir / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("hpcjobs-it")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [seen[0]["mlflow"]]
    assert [(m.step, m.value) for m in client.get_metric_history(seen[0]["mlflow"], "restart")] == [(0, 0), (1, 1)]
    assert runs[0].data.params == {"lr": "0.25"}
    tags = runs[0].data.tags
    assert tags["hpcjobs.run_key"] == f"{prepared.sweep_id}/{point.point_id}"
    assert tags["hpcjobs.job_id"].isdigit()  # SLURM_JOB_ID of the array task, set again by the second run
    offline = sorted(p.name for p in (run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(name.endswith("-" + expected) for name in offline), offline
    frame = hpcjobs.load_sweep(prepared.folder)
    assert list(frame["wandb_run_id"]) == [expected]
    assert list(frame["mlflow_run_id"]) == [seen[0]["mlflow"]]
