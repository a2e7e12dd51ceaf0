"""Tracker runs tied to sweep points (``tracking:``): ids, the job lines, hostile values, and real runs.

The end-to-end test runs a real local-site sweep whose command calls ``wandb.init()`` (offline) and
``mlflow.start_run()`` (a file store): every point fails once, is resubmitted, and must log both
attempts to one run of each tracker. The Slurm testbed test (``test_launch_slurm.py``) does the same
with a job Slurm requeues.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.tracking import WANDB_RUN_ID_MAX, Tracking, run_key, wandb_run_id
from hpcjobs.sweep.tracking import MLFLOW_RUN_FILE, read_mlflow_run, tracking_lines

ROOT = Path(__file__).resolve().parents[2]


def _needs(module: str) -> None:
    """Skip without the tracker on a laptop; fail under ``CI=true``, where the test extra installs it."""
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {module} is not installed (pip install '.[test]')")
        pytest.skip(f"{module} is not installed")


# ------------------------------------------------------------------------------------------ ids


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=300), st.text("0123456789abcdef", min_size=12, max_size=12))
def test_wandb_run_ids_are_short_safe_and_stable(sweep_id, point_id):
    rid = wandb_run_id(sweep_id, point_id)
    assert len(rid) <= WANDB_RUN_ID_MAX
    assert not set(rid) & set("/\\#?%:,") and rid.isascii() and rid.isprintable()
    assert rid.endswith("-" + point_id) and rid == wandb_run_id(sweep_id, point_id)


def test_wandb_run_ids_keep_plain_sweep_ids_and_tell_mangled_ones_apart():
    assert wandb_run_id("resnet-1a2b3c4d", "0123456789ab") == "resnet-1a2b3c4d-0123456789ab"
    a, b = wandb_run_id("a+b-1a2b3c4d", "0" * 12), wandb_run_id("a.b-1a2b3c4d", "0" * 12)
    assert a != b  # '+' is replaced, and a hash of the whole id keeps them apart
    long = "x" * 120 + "-1a2b3c4d"
    assert wandb_run_id(long, "0" * 12) != wandb_run_id("x" * 119 + "y-1a2b3c4d", "0" * 12)


# ------------------------------------------------------------------------------------- config


def _experiment(**tracking) -> Experiment:
    return Experiment.model_validate({"name": "t", "command": "true", "tracking": tracking})


@pytest.mark.parametrize("tracking, message", [
    ({}, "name a tracker"),
    ({"wandb": {}}, "project"),
    ({"wandb": {"project": "p", "tags": ["a,b"]}}, "comma"),
    ({"wandb": {"project": "p", "mode": "sometimes"}}, "online"),
    ({"mlflow": {"tracking_uri": "https://me:hunter2@mlflow.example.org"}}, "password"),
    ({"neptune": {}}, "neptune"),
])
def test_bad_tracking_is_refused_with_what_was_expected(tracking, message):
    with pytest.raises(ValidationError, match=message):
        _experiment(**tracking)


def test_tracking_is_reported_with_file_line_and_key(tmp_path):
    from hpcjobs.config.loading import load_experiment
    from hpcjobs.errors import ConfigError

    path = tmp_path / "exp.yaml"
    path.write_text("name: t\ncommand: 'true'\ntracking:\n  wandb:\n    project: p\n    mode: loud\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    text = str(info.value)
    assert "exp.yaml" in text and ":6" in text and "tracking.wandb.mode" in text and "offline" in text


def test_an_experiment_without_tracking_keeps_its_sweep_id():
    from hpcjobs.sweep.identity import experiment_digest

    plain = Experiment.model_validate({"name": "t", "command": "true"})
    assert experiment_digest(plain) == experiment_digest(Experiment.model_validate(
        {"name": "t", "command": "true", "tracking": None}))
    assert experiment_digest(plain) != experiment_digest(_experiment(wandb={"project": "p"}))


# ---------------------------------------------------------------------------------- job lines


HOSTILE = "$(touch pwned) `touch pwned2` ' \" ; && \\ \u00e9\u2028x"


def _run_lines(tmp_path: Path, tracking: Tracking, python: str | None = None) -> dict[str, str]:
    """Run the lines in bash as a point would (its variables set) and return the environment they leave."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    if python is not None:
        tracking = tracking.model_copy(update={"python": python})
    script = "\n".join([*tracking_lines(tracking, "sw-1a2b3c4d", "exp", "SLURM_JOB_ID"), "env -0"])
    env = {"PATH": os.environ["PATH"], "HPCJOBS_RUN_DIR": str(run_dir), "HPCJOBS_POINT_ID": "0123456789ab",
           "HPCJOBS_POINT_INDEX": "7", "HPCJOBS_SWEEP_ID": "sw-1a2b3c4d", "SLURM_JOB_ID": "42",
           "HPCJOBS_PARAMS_JSON": json.dumps({"lr": 0.5, "name": HOSTILE}, ensure_ascii=False)}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, check=True)
    out = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    out["_stderr"] = done.stderr.decode()
    return out


def test_wandb_lines_export_the_points_run_and_never_run_a_value(tmp_path):
    tracking = Tracking.model_validate({"wandb": {"project": HOSTILE, "entity": "team", "mode": "offline",
                                                  "tags": ["nightly"]}})
    env = _run_lines(tmp_path, tracking, python=sys.executable)
    assert not list(tmp_path.glob("pwned*"))
    assert env["WANDB_PROJECT"] == HOSTILE and env["WANDB_ENTITY"] == "team" and env["WANDB_MODE"] == "offline"
    assert env["WANDB_RUN_ID"] == wandb_run_id("sw-1a2b3c4d", "0123456789ab") and env["WANDB_RESUME"] == "allow"
    assert env["WANDB_RUN_GROUP"] == "sw-1a2b3c4d" and env["WANDB_NAME"] == "sw-1a2b3c4d/7"
    assert env["WANDB_TAGS"] == "hpcjobs,nightly,point-0123456789ab,job-42"
    assert env["WANDB_DIR"] == str(tmp_path / "run")
    params = json.loads(Path(env["WANDB_SWEEP_PARAM_PATH"]).read_text())
    assert params == {"lr": {"value": 0.5}, "name": {"value": HOSTILE}}


def test_without_a_working_python_wandb_gets_no_parameter_file_and_the_job_goes_on(tmp_path):
    tracking = Tracking.model_validate({"wandb": {"project": "p"}, "mlflow": {"experiment": "e"}})
    env = _run_lines(tmp_path, tracking, python="false")
    assert "WANDB_SWEEP_PARAM_PATH" not in env  # wandb.init() would stop on a missing file
    assert "MLFLOW_RUN_ID" not in env and env["MLFLOW_EXPERIMENT_NAME"] == "e"
    assert "wandb.config gets no parameters" in env["_stderr"] and "no MLflow run for point" in env["_stderr"]


def test_a_link_where_the_parameter_file_goes_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "wandb-params.json").symlink_to(victim)
    (tmp_path / "run" / MLFLOW_RUN_FILE).symlink_to(victim)
    env = _run_lines(tmp_path, Tracking.model_validate({"wandb": {"project": "p"}, "mlflow": {}}),
                     python=sys.executable)
    assert victim.read_text() == "keep"
    assert not Path(env["WANDB_SWEEP_PARAM_PATH"]).is_symlink()
    assert not (tmp_path / "run" / MLFLOW_RUN_FILE).is_symlink()  # removed before the run is looked up


def test_the_mlflow_experiment_defaults_to_the_experiments_name(tmp_path):
    env = _run_lines(tmp_path, Tracking.model_validate({"mlflow": {}}), python="false")
    assert env["MLFLOW_EXPERIMENT_NAME"] == "exp" and "MLFLOW_TRACKING_URI" not in env


def test_rendered_sweep_script_runs_the_lines_after_setup(tmp_path, monkeypatch):
    from hpcjobs.sweep.prepare import chunk_script_text, prepare_sweep

    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: t\nsetup: ['source venv/bin/activate']\ncommand: python3 train.py\n"
                   "sweep: {grid: {lr: [1, 2]}}\ntracking: {wandb: {project: p}}\n")
    site = ROOT / "tests" / "sites" / "hpctest.yaml"
    prepared = prepare_sweep(exp, site=str(site), root=tmp_path / "sweeps")
    text = chunk_script_text(prepared, 0, 2, None, "tok")
    assert text.index("source venv/bin/activate") < text.index("export WANDB_RUN_ID=") < text.index("train.py")
    assert subprocess.run(["bash", "-n"], input=text.encode(), check=False).returncode == 0


# -------------------------------------------------------------------------------- read back


def test_the_mlflow_record_is_read_only_when_it_is_this_points(tmp_path, caplog):
    run_dir = tmp_path / "p"
    run_dir.mkdir()
    good = {"run_id": "a" * 32, "experiment_id": "123", "run_key": run_key("sw", "p1"), "resumed": False}
    (run_dir / MLFLOW_RUN_FILE).write_text(json.dumps(good))
    assert read_mlflow_run(run_dir, "sw", "p1") == good
    assert read_mlflow_run(run_dir, "sw", "p2") is None  # another point's record copied here
    for bad in ({**good, "run_id": "../../x"}, {**good, "experiment_id": 5}, [good], "x"):
        (run_dir / MLFLOW_RUN_FILE).write_text(json.dumps(bad))
        assert read_mlflow_run(run_dir, "sw", "p1") is None
    (run_dir / MLFLOW_RUN_FILE).write_text("[" * 100_000)
    assert read_mlflow_run(run_dir, "sw", "p1") is None
    (run_dir / MLFLOW_RUN_FILE).unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(good))
    (run_dir / MLFLOW_RUN_FILE).symlink_to(target)
    assert read_mlflow_run(run_dir, "sw", "p1") is None
    (run_dir / MLFLOW_RUN_FILE).unlink()
    os.mkfifo(run_dir / MLFLOW_RUN_FILE)
    assert read_mlflow_run(run_dir, "sw", "p1") is None  # a FIFO is not opened (it would block)


# ----------------------------------------------------------------------------- real trackers


TRAIN = """\
import os, sys, json
import mlflow, wandb
run = wandb.init(config={"lr": -1.0, "epochs": 3})
attempt = int(os.path.exists("failed-" + os.environ["HPCJOBS_POINT_ID"]))
with mlflow.start_run() as active:
    mlflow.log_metric("attempt", attempt, step=attempt)
    run.log({"attempt": attempt})
    print(json.dumps({"wandb": run.id, "group": run.group, "config": dict(run.config),
                      "tags": list(run.tags), "mlflow": active.info.run_id}))
run.finish()
if not attempt:
    open("failed-" + os.environ["HPCJOBS_POINT_ID"], "w").close()
    sys.exit(3)
"""


def test_a_resubmitted_local_point_logs_to_the_same_runs(tmp_path, monkeypatch):
    _needs("wandb")
    _needs("mlflow")
    from mlflow.tracking import MlflowClient

    import hpcjobs
    from hpcjobs.sweep.api import resubmit_sweep, run_sweep

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it to read a file store
    (tmp_path / "train.py").write_text(TRAIN)
    store = (tmp_path / "mlruns").as_uri()
    exp = tmp_path / "exp.yaml"
    exp.write_text(json.dumps({
        "name": "tracked", "command": f"{sys.executable} train.py",
        "environment": {"WANDB_SILENT": "true", "MLFLOW_ALLOW_FILE_STORE": "true",
                        "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
                        "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache")},
        "sweep": {"grid": {"lr": [0.1, 0.2]}},
        "tracking": {"python": sys.executable, "wandb": {"project": "demo", "entity": "team", "mode": "offline"},
                     "mlflow": {"experiment": "demo", "tracking_uri": store}},
    }))
    root = tmp_path / "sweeps"
    prepared, _ = run_sweep(exp, site="local", root=root)
    _, _, reset = resubmit_sweep(prepared.sweep_id, root=root)
    assert reset == 2
    frame = hpcjobs.load_sweep(prepared.folder)
    assert list(frame["state"]) == ["COMPLETED", "COMPLETED"]
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name("demo")
    runs = {r.data.tags["hpcjobs.point_id"]: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted(frame["point_id"])  # one run per point, not per attempt
    for point in prepared.points:
        run_dir = prepared.folder / "points" / point.point_id
        seen = [json.loads(line) for line in (run_dir / "stdout.log").read_text().splitlines() if line.startswith("{")]
        expected = wandb_run_id(prepared.sweep_id, point.point_id)
        assert [s["wandb"] for s in seen] == [expected, expected]
        assert [s["config"] for s in seen] == [{"lr": point.params["lr"], "epochs": 3}] * 2
        assert {s["mlflow"] for s in seen} == {runs[point.point_id].info.run_id}
        assert seen[0]["tags"][:3] == ["hpcjobs", f"point-{point.point_id}", seen[0]["tags"][2]]
        assert seen[0]["tags"] != seen[1]["tags"]  # job-<id>: each attempt's own job
        history = client.get_metric_history(seen[0]["mlflow"], "attempt")
        assert [(m.step, m.value) for m in history] == [(0, 0), (1, 1)]
        assert runs[point.point_id].data.params == {"lr": repr(point.params["lr"])}
        assert len(list((run_dir / "wandb").glob(f"offline-run-*-{expected}"))) == 2
        row = frame[frame["point_id"] == point.point_id].iloc[0]
        assert row["wandb_run_id"] == expected
        assert row["wandb_url"] == f"https://wandb.ai/team/demo/runs/{expected}"
        assert row["mlflow_run_id"] == seen[0]["mlflow"] and row["mlflow_url"] is pd_na()
    assert str(frame["mlflow_run_id"].dtype) == "string"


def pd_na():
    import pandas as pd

    return pd.NA


def test_one_job_of_hpcjobs_submit_is_told_it_gets_no_tracker_run(tmp_path, monkeypatch, caplog):
    import hpcjobs.sweep.singles as singles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(singles, "_submit_new", lambda request, **kw: request)  # stop before the scheduler
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\ncommand: 'true'\ntracking: {wandb: {project: p}}\n")
    with caplog.at_level("WARNING", logger="hpcjobs.sweep"):
        request = singles.submit_single(exp, site=str(ROOT / "tests" / "sites" / "hpctest.yaml"),
                                        root=tmp_path / "sweeps")
    assert any("gets none" in r.getMessage() and "hpcjobs sweep" in r.getMessage() for r in caplog.records)
    assert "WANDB_RUN_ID" not in request.rendered.text


def test_two_points_that_both_find_no_experiment_share_the_one_made_first(tmp_path, monkeypatch):
    """The first start of a sweep's points races to create the MLflow experiment; the loser must use it,
    not fail (its training script's ``mlflow.start_run()`` would then make an untagged run of its own)."""
    _needs("mlflow")
    from mlflow.tracking import MlflowClient

    from hpcjobs.sweep import tracking as tracking_module

    store = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    client = MlflowClient(store)
    made_first = client.create_experiment("demo")  # by the other point's job, after this one looked
    looks: list[str] = []
    real_get = MlflowClient.get_experiment_by_name

    def get_late(self, name):
        looks.append(name)
        return None if len(looks) == 1 else real_get(self, name)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", get_late)
    run_dir = tmp_path / "point"
    run_dir.mkdir()
    for name, value in {"HPCJOBS_TRACKING_KEY": "s1/p1", "HPCJOBS_RUN_DIR": str(run_dir),
                        "MLFLOW_EXPERIMENT_NAME": "demo", "HPCJOBS_SWEEP_ID": "s1", "HPCJOBS_POINT_ID": "p1",
                        "HPCJOBS_POINT_INDEX": "0", "HPCJOBS_PARAMS_JSON": '{"lr": 0.1}'}.items():
        monkeypatch.setenv(name, value)
    exec(compile(tracking_module._MLFLOW_RUN_PY, "mlflow-run", "exec"), {"__name__": "__main__"})
    record = json.loads((run_dir / MLFLOW_RUN_FILE).read_text())
    assert looks == ["demo", "demo"] and record["experiment_id"] == made_first
    run = real_get(client, "demo")
    assert [r.data.tags["hpcjobs.point_id"] for r in client.search_runs([run.experiment_id])] == ["p1"]
