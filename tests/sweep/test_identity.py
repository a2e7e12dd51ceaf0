"""A sweep's identity: the id follows the experiment's meaning, names in use, exact names, the root lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import invoke

from hpcjobs.cli import main
from hpcjobs.errors import ConfigError
from hpcjobs.sweep.api import run_sweep
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.identity import find_sweep_root, legacy_sweep_id, name_of
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, experiment_sha256
from hpcjobs.sweep.prepare import prepare_sweep

EXPERIMENT = """\
name: ident
site: local
resources: {cpus_per_task: 1, walltime: 10m}
command: 'echo "$x" > "$HPCJOBS_RUN_DIR/x.txt"'
sweep:
  grid: {x: [1, 2]}
"""

# the same meaning: comments, key order, flow/block style, quoting and blank lines differ
SAME_MEANING = """\
# a comment that was not there before
command: "echo \\"$x\\" > \\"$HPCJOBS_RUN_DIR/x.txt\\""

sweep:
  grid:
    x:
      - 1
      - 2   # still two points
resources:
  walltime: 10m
  cpus_per_task: 1
site: local
name: ident
"""




@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    return tmp_path


def test_comments_key_order_and_formatting_keep_the_id(project: Path) -> None:
    a = prepare_sweep(project / "exp.yaml")
    (project / "other.yaml").write_text(SAME_MEANING)
    b = prepare_sweep(project / "other.yaml")
    assert a.sweep_id == b.sweep_id and a.sweep_id.startswith("ident-")
    # what the sweep means does change it: a value, a --set override, a sweep argument
    (project / "changed.yaml").write_text(EXPERIMENT.replace("x: [1, 2]", "x: [1, 3]"))
    assert prepare_sweep(project / "changed.yaml").sweep_id != a.sweep_id
    assert prepare_sweep(project / "exp.yaml", overrides=["resources.cpus_per_task=2"]).sweep_id != a.sweep_id
    with_args = prepare_sweep(project / "exp.yaml", sweep_args=["y=1,2"]).sweep_id
    assert with_args != a.sweep_id
    assert prepare_sweep(project / "exp.yaml", sweep_args=["y=1, 2"]).sweep_id == with_args


def test_editing_comments_continues_the_same_sweep(project: Path) -> None:
    code, out = invoke("sweep", "exp.yaml", "--json")
    assert code == 0, out
    first = json.loads(out)
    assert first["points_submitted"] == 2
    (project / "exp.yaml").write_text(SAME_MEANING)
    code, out = invoke("sweep", "exp.yaml", "--json")
    assert code == 0, out
    again = json.loads(out)
    assert again["sweep_id"] == first["sweep_id"] and again["points_submitted"] == 0
    assert [d.name for d in (project / "hpcjobs-sweeps").iterdir()] == [first["sweep_id"]]


def test_a_name_in_use_with_other_content_asks_for_new_or_force(project: Path) -> None:
    code, out = invoke("sweep", "exp.yaml", "--json")
    assert code == 0, out
    old_id = json.loads(out)["sweep_id"]
    (project / "exp.yaml").write_text(EXPERIMENT.replace("x: [1, 2]", "x: [1, 2, 3]"))
    code, out = invoke("sweep", "exp.yaml")
    assert code == 2, out
    assert old_id in out and "--new" in out and "--force" in out and "exp.yaml" in out
    assert [d.name for d in (project / "hpcjobs-sweeps").iterdir()] == [old_id]  # nothing started
    code, out = invoke("sweep", "exp.yaml", "trial=1", "--json")  # another command line: another sweep
    assert code == 0, out
    assert json.loads(out)["sweep_id"] != old_id

    code, out = invoke("sweep", "exp.yaml", "--force", "--json")  # continue the existing sweep: one new point
    assert code == 0, out
    forced = json.loads(out)
    assert forced["sweep_id"] == old_id and forced["points_submitted"] == 1

    (project / "exp.yaml").write_text(EXPERIMENT.replace("x: [1, 2]", "x: [4]"))
    code, out = invoke("sweep", "exp.yaml", "--new", "--json")
    assert code == 0, out
    fresh = json.loads(out)
    assert fresh["sweep_id"] != old_id and fresh["points_submitted"] == 1
    # --new on content that already has a sweep starts another one beside it
    code, out = invoke("sweep", "exp.yaml", "--new", "--json")
    assert code == 0, out
    assert json.loads(out)["sweep_id"] == f"{fresh['sweep_id']}-2"
    assert name_of(f"{fresh['sweep_id']}-2") == "ident"
    code, out = invoke("sweep", "exp.yaml", "--new", "--force")
    assert code == 2 and "exclude each other" in out


def test_an_exact_name_beats_a_prefix(project: Path) -> None:
    for name in ("big", "bigger"):
        (project / f"{name}.yaml").write_text(EXPERIMENT.replace("name: ident", f"name: {name}"))
        code, out = invoke("sweep", f"{name}.yaml", "--json")
        assert code == 0, out
    ids = sorted(d.name for d in (project / "hpcjobs-sweeps").iterdir())
    big = next(i for i in ids if name_of(i) == "big")
    bigger = next(i for i in ids if name_of(i) == "bigger")
    assert find_sweep("big") == project / "hpcjobs-sweeps" / big
    assert find_sweep(bigger[:8]) == project / "hpcjobs-sweeps" / bigger  # a unique prefix still works
    code, out = invoke("status", "big", "--json")
    assert code == 0, out
    assert json.loads(out)["sweep_id"] == big
    code, out = invoke("status", "bi")
    assert code == 2 and "ambiguous" in out
    (project / "big.yaml").write_text(EXPERIMENT.replace("name: ident", "name: big").replace("[1, 2]", "[7]"))
    assert invoke("sweep", "big.yaml", "--new")[0] == 0
    code, out = invoke("status", "big")  # two sweeps named big: say which ids there are
    assert code == 2 and "ambiguous" in out and big in out


def test_the_root_is_found_upward_like_git(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = invoke("sweep", "exp.yaml", "--json")
    assert code == 0, out
    sweep_id = json.loads(out)["sweep_id"]
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert find_sweep_root().path == project / "hpcjobs-sweeps"
    code, out = invoke("status", "ident", "--json")
    assert code == 0, out
    assert json.loads(out)["sweep_id"] == sweep_id
    code, out = invoke("ls", "--json")
    assert code == 0 and [s["sweep_id"] for s in json.loads(out)] == [sweep_id]
    # a sweep started from the sub-folder goes into the same root
    code, out = invoke("sweep", str(project / "exp.yaml"), "--json")
    assert code == 0 and json.loads(out)["sweep_id"] == sweep_id
    assert not (deep / "hpcjobs-sweeps").exists()


def test_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    monkeypatch.setenv("HPCJOBS_SWEEP_ROOT", str(tmp_path / "env-root"))
    assert find_sweep_root().how == "$HPCJOBS_SWEEP_ROOT"
    assert find_sweep_root().path == tmp_path / "env-root"
    (tmp_path / "a" / "hpcjobs-sweeps").mkdir()
    assert find_sweep_root().path == tmp_path / "a" / "hpcjobs-sweeps"  # the nearest one upward wins
    assert find_sweep_root(tmp_path / "explicit").path == tmp_path / "explicit"
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT")
    (tmp_path / "a" / "hpcjobs-sweeps").rmdir()
    where = find_sweep_root()
    assert where.how == "default" and where.path == here / "hpcjobs-sweeps"
    with pytest.raises(ConfigError, match=r"no hpcjobs-sweeps/ in .* or its parents"):
        find_sweep("anything")


def test_a_ledger_with_an_id_from_the_file_text_is_still_continued(project: Path) -> None:
    prepared = prepare_sweep(project / "exp.yaml")
    text = prepared.experiment_text
    old_id = legacy_sweep_id("ident", text, (), (), prepared.site.name)
    assert old_id != prepared.sweep_id
    meta = SweepMeta(sweep_id=old_id, experiment_path=str(prepared.experiment_path),
                     experiment_sha256=experiment_sha256(text), site=prepared.site.name, scheduler="local",
                     extra={"name": "ident", "overrides": [], "sweep_args": [], "site_arg": None})
    with Ledger.create(project / "hpcjobs-sweeps" / old_id, meta, prepared.points):
        pass
    again, report = run_sweep(project / "exp.yaml")
    assert again.sweep_id == old_id and report.points_submitted == 2
    with Ledger.open(again.folder) as ledger:
        assert ledger.meta.experiment_sha256 == experiment_sha256(text)  # recorded as it was
        assert ledger.summary() == {"COMPLETED": 2}


def test_ls_from_a_folder_without_sweeps_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    result = CliRunner().invoke(main, ["ls"])
    assert result.exit_code == 0
    assert "no sweeps in" in result.output and str(tmp_path) in result.output and "or its parents" in result.output
    assert json.loads(CliRunner().invoke(main, ["ls", "--json"]).output) == []


def test_ls_polls_every_sweep_in_one_scheduler_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs import process
    from hpcjobs.sweep.listing import list_sweeps
    from tests.sweep.test_submitter import FakeSlurm

    fake = FakeSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    site = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
    for name in ("one", "two", "three"):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\ncommand: echo $x\nsweep:\n  grid:\n    x: [1, 2]\n")
        run_sweep(tmp_path / f"{name}.yaml", site=site)
    fake.calls.clear()
    listing = list_sweeps(poll=True)
    status_calls = [c for c in fake.calls if c[0] == "sacct" and any(a.startswith("--jobs=") for a in c)]
    assert len(status_calls) == 1 and listing.scheduler_calls == 1
    assert len(status_calls[0][[a.startswith("--jobs=") for a in status_calls[0]].index(True)].split(",")) == 3
    assert [s.counts for s in listing.sweeps] == [{"COMPLETED": 2}] * 3 and all(s.polled for s in listing.sweeps)
    fake.calls.clear()
    again = list_sweeps(poll=True)  # nothing live any more: no scheduler call at all
    assert again.scheduler_calls == 0 and not fake.calls
    result = CliRunner().invoke(main, ["ls", "--no-poll"])
    assert result.exit_code == 0 and "ago" in result.output and "one-" in result.output
