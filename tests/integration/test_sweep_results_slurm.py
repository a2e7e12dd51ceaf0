"""Results and logs of a sweep on the real Slurm testbed: typed metric columns, failures' stderr in the run folder."""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from pathlib import Path

import pytest
from helpers import run_hpcjobs

import hpcjobs
from hpcjobs.sweep.api import sweep_status

pytestmark = pytest.mark.slurm

SITES = Path(__file__).resolve().parent.parent / "sites"
REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import csv, json, os, sys
lr, seed = float(os.environ["lr"]), int(os.environ["seed"])
run = os.environ["HPCJOBS_RUN_DIR"]
if lr == 0.3 and seed in (1, 2):
    print(f"diverged: loss is nan at lr={lr} seed={seed}", file=sys.stderr)
    sys.exit(3)
rows = [{"epoch": e, "loss": round(1.0 / (e * lr * 10 + seed), 4)} for e in range(1, 4)]
with open(os.path.join(run, "epochs.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, ["epoch", "loss"]); w.writeheader(); w.writerows(rows)
acc = round(lr + seed / 100, 4)
json.dump({"acc": acc, "epochs": 3}, open(os.path.join(run, "metrics.json"), "w"))
print(f"final acc={acc}")
"""




def test_results_and_logs_of_a_real_sweep(slurm_testbed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(PROGRAM)
    exp = tmp_path / "res.yaml"
    exp.write_text(
        "name: slurmres\n"
        f"description: run in {tmp_path}\n"
        "resources: {walltime: 5m}\n"
        f"command: {sys.executable} train.py\n"
        "results:\n"
        "  - {file: metrics.json}\n"
        "  - {file: epochs.csv, reduce: 'min:loss', prefix: best_}\n"
        "sweep:\n  grid:\n    lr: [0.1, 0.2, 0.3]\n    seed: [1, 2, 3, 4]\n"
    )
    root = tmp_path / "sweeps"
    done = run_hpcjobs("sweep", str(exp), "--site", str(SITES / "hpctest.yaml"), "--root", str(root), "--json",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sweep_id = json.loads(done.stdout)["sweep_id"]
    deadline = time.monotonic() + 300
    while not (st := sweep_status(sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(2)
    assert st.counts == {"COMPLETED": 10, "FAILED": 2}

    df = hpcjobs.load_sweep(sweep_id, root=root, cache=False)
    assert len(df) == 12
    assert str(df["acc"].dtype) == "Float64" and str(df["epochs"].dtype) == "Int64"
    assert str(df["best_epoch"].dtype) == "Int64" and str(df["best_loss"].dtype) == "Float64"
    ok = df[df["state"] == "COMPLETED"]
    for row in ok.itertuples():
        assert row.acc == pytest.approx(row.lr + row.seed / 100)
        assert row.best_epoch == 3 and row.best_loss == pytest.approx(round(1.0 / (30 * row.lr + row.seed), 4))
        assert pd_isna(row.result_error)
    bad = df[df["state"] == "FAILED"].sort_values("seed")
    assert bad["lr"].tolist() == [0.3, 0.3] and bad["seed"].tolist() == [1, 2]
    assert bad["acc"].isna().all() and bad["best_loss"].isna().all()
    assert bad["result_error"].str.contains("metrics.json: no such file").all()
    for row in bad.itertuples():
        assert f"diverged: loss is nan at lr=0.3 seed={row.seed}" in Path(row.log_err).read_text()
    assert (sacct := df[df["state"] == "FAILED"]["exit_code"].tolist()) == [3, 3], sacct

    top = run_hpcjobs("results", sweep_id, "--root", str(root), "--sort", "-acc", "--top", "3", "--csv", cwd=tmp_path)
    assert top.returncode == 0, top.stderr
    rows = list(csv.DictReader(io.StringIO(top.stdout)))
    assert [(float(r["lr"]), int(r["seed"])) for r in rows] == [(0.3, 4), (0.3, 3), (0.2, 4)]
    table = run_hpcjobs("results", sweep_id, "--root", str(root), "--sort", "-acc", "--top", "3", cwd=tmp_path).stdout
    lines = [ln for ln in table.splitlines() if "COMPLETED" in ln]
    assert [ln.split()[0] for ln in lines] == [str(int(r["index"])) for r in rows]

    logs = run_hpcjobs("logs", sweep_id, "--root", str(root), "--failed", cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    for seed in (1, 2):
        assert f"diverged: loss is nan at lr=0.3 seed={seed}" in logs.stdout
    assert logs.stdout.count("FAILED, exit 3") >= 2


def pd_isna(value: object) -> bool:
    import pandas as pd

    return bool(pd.isna(value))
