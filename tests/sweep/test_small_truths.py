"""Small truths: --dry-run shows the points, repeated grid values are errors, numbers keep their spelling,
and the README's pandas idiom shows only the states that happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import invoke

from hpcjobs.config.sweep import parse_sweep
from hpcjobs.errors import ConfigError
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import point_env_lines
from hpcjobs.sweep.prepare import prepare_sweep

EXPERIMENT = """\
name: truths
site: local
command: 'printf "%s %s\\n" "$lr" "$wd" > "$HPCJOBS_RUN_DIR/seen.txt"; test "$seed" != 2 || exit 3'
sweep:
  grid:
    lr: [0.1, 0.00005]
    wd:
      - 1.0e-3
    seed: [1, 2]
"""




@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    return tmp_path


def test_dry_run_shows_the_first_points_and_json_all_of_them(project: Path) -> None:
    big = project / "big.yaml"
    big.write_text(EXPERIMENT.replace("seed: [1, 2]", "seed: [1, 2]\n    x: [0, 1, 2, 3, 4, 5, 6]"))
    code, out = invoke("sweep", str(big), "--dry-run")
    assert code == 0, out
    assert "first 20 of 28" in out and "--json lists all" in out
    rows = [ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0].isdigit()]
    assert [r[0] for r in rows] == [str(i) for i in range(20)]
    assert rows[0][2:] == ["0.1", "1.0e-3", "1", "0"]  # lr, wd, seed, x as the file wrote them
    code, out = invoke("sweep", str(big), "--dry-run", "--json")
    assert code == 0, out
    listed = json.loads(out)["point_list"]
    assert len(listed) == 28 and listed[27]["params"] == {"lr": 0.00005, "wd": 0.001, "seed": 2, "x": 6}
    assert listed[27]["env_text"] == {"lr": "0.00005", "wd": "1.0e-3"}
    assert not (project / "hpcjobs-sweeps").exists()


def test_a_value_listed_twice_in_a_grid_is_an_error_at_its_line(project: Path) -> None:
    (project / "dup.yaml").write_text(EXPERIMENT.replace("seed: [1, 2]", "seed:\n      - 1\n      - 2\n      - 1"))
    code, out = invoke("sweep", "dup.yaml", "--dry-run")
    assert code == 2, out
    assert "dup.yaml:12:9:" in out and "listed twice" in out and "replicate" in out
    code, out = invoke("sweep", "exp.yaml", "extra=4,5,4", "--dry-run")
    assert code == 2 and "override 'extra=4,5,4'" in out and "listed twice" in out
    # 1 and 1.0 are different values (as in point ids); a zip may pair repeated values
    assert len(expand(parse_sweep({"grid": {"a": [1, 1.0]}}))) == 2
    assert len(expand(parse_sweep({"zip": {"a": [1, 1], "b": [2, 3]}}))) == 2
    with pytest.raises(ConfigError, match="listed twice"):
        expand(parse_sweep({"method": "grid", "parameters": {"a": {"values": ["x", "y", "x"]}}}))
    with pytest.raises(ConfigError, match="listed twice"):
        expand(parse_sweep({"union": [{"grid": {"a": [3, 3]}}]}))


def test_numbers_reach_the_job_as_written(project: Path) -> None:
    prepared = prepare_sweep(project / "exp.yaml")
    small = next(p for p in prepared.points if p.params["lr"] == 0.00005)
    lines = point_env_lines(small)
    assert "export lr=0.00005" in lines and "export wd=1.0e-3" in lines
    assert json.loads(small.params_json)["lr"] == 5e-05  # the data stays a number
    code, out = invoke("sweep", "exp.yaml", "--json", "--workers", "2")
    assert code == 0, out
    folder = project / "hpcjobs-sweeps" / json.loads(out)["sweep_id"]
    seen = sorted((folder / "points" / p.point_id / "seen.txt").read_text().strip() for p in prepared.points)
    assert seen == ["0.00005 1.0e-3"] * 2 + ["0.1 1.0e-3"] * 2
    # typed on the command line: the same
    cli = prepare_sweep(project / "exp.yaml", sweep_args=["extra=0.00002,1.50"])
    assert {dict(p.spelled).get("extra") for p in cli.points} == {"0.00002", "1.50"}


def test_the_readme_pandas_idiom_shows_observed_states(project: Path) -> None:
    pytest.importorskip("pandas")
    import hpcjobs

    code, out = invoke("sweep", "exp.yaml", "--json", "--workers", "2")
    assert code == 0, out
    df = hpcjobs.load_sweep(json.loads(out)["sweep_id"])
    table = df.groupby(["lr", "state"], observed=True).size().unstack(fill_value=0)  # as in the README
    assert sorted(map(str, table.columns)) == ["COMPLETED", "FAILED"]
    assert table.loc[0.1].tolist() == [1, 1] and table.loc[0.00005].tolist() == [1, 1]
