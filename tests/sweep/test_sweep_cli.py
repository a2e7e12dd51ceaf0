"""The sweep commands on the `local` site: points run on this machine with the same ledger and outputs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import invoke

import hpcjobs

EXPERIMENT = """\
name: localsweep
command: 'echo "x=$x tag=$tag" > "$HPCJOBS_RUN_DIR/out.txt"; test "$x" != 2 || exit 4'
sweep:
  grid:
    x: [1, 2, 3]
  zip:
    tag: ["a $(touch PWNED)", "b"]
"""


@pytest.fixture
def local_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT)
    return exp




def test_sweep_status_resubmit_ls(local_sweep: Path, tmp_path: Path):
    code, out = invoke("sweep", str(local_sweep), "--json", "--workers", "2")
    assert code == 0, out
    info = json.loads(out)
    assert info["points"] == 6 and info["points_submitted"] == 6
    sweep_id = info["sweep_id"]

    code, out = invoke("status", sweep_id, "--json")
    st = json.loads(out)
    assert st["counts"] == {"COMPLETED": 4, "FAILED": 2}
    failed = [p for p in st["points"] if p["state"] == "FAILED"]
    assert {p["params"]["x"] for p in failed} == {2} and {p["exit_code"] for p in failed} == {4}
    # the hostile value stayed data; every point got its run folder
    assert not list(tmp_path.rglob("PWNED"))
    outs = sorted((tmp_path / "hpcjobs-sweeps" / sweep_id / "points").glob("*/out.txt"))
    assert len(outs) == 6 and "tag=a $(touch PWNED)" in "".join(o.read_text() for o in outs)

    # the same command again submits nothing
    code, out = invoke("sweep", str(local_sweep), "--json")
    assert json.loads(out)["points_submitted"] == 0

    # resubmit only the failures, with the experiment changed for the retry
    code, out = invoke("resubmit", sweep_id, "--set", "command=true")
    assert code == 0, out
    assert "2 point(s) reset" in out
    st = json.loads(invoke("status", sweep_id, "--json")[1])
    assert st["counts"] == {"COMPLETED": 6}
    assert max(p["attempt"] for p in st["points"]) == 2

    code, out = invoke("ls", "--json")
    (row,) = json.loads(out)
    assert row["sweep_id"] == sweep_id and row["counts"] == {"COMPLETED": 6}

    df = hpcjobs.load_sweep(sweep_id)
    assert len(df) == 6 and set(df["state"].astype(str)) == {"COMPLETED"}
    assert str(df["x"].dtype) == "Int64"


def test_dry_run_and_bad_input(local_sweep: Path, tmp_path: Path):
    code, out = invoke("sweep", str(local_sweep), "--dry-run", "--json")
    assert code == 0 and json.loads(out)["points"] == 6
    assert not (tmp_path / "hpcjobs-sweeps").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXPERIMENT.replace("zip:", "zipp:"))
    code, out = invoke("sweep", str(bad))
    assert code == 2 and "did you mean 'zip'" in out
    code, out = invoke("status", "nosuchsweep")
    assert code == 2 and "no sweep" in out


def test_hydra_overrides_make_a_new_sweep(local_sweep: Path):
    code, out = invoke("sweep", str(local_sweep), "x=5,6", "--json")
    assert code == 0, out
    assert json.loads(out)["points"] == 4


def test_detach_runs_in_the_background(local_sweep: Path):
    code, out = invoke("sweep", str(local_sweep), "--detach", "--json")
    assert code == 0, out
    sweep_id = json.loads(out)["sweep_id"]
    deadline = time.monotonic() + 60
    while True:
        st = json.loads(invoke("status", sweep_id, "--json")[1])
        if sum(st["counts"].get(s, 0) for s in ("COMPLETED", "FAILED")) == 6:
            break
        assert time.monotonic() < deadline, st["counts"]
        time.sleep(0.3)
    assert st["counts"] == {"COMPLETED": 4, "FAILED": 2}
