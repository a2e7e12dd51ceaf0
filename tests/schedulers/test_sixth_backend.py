"""A sixth scheduler is one folder: copy a backend's folder, rename it, register it, and it works.

The exercise the contract promises (docs/CONTRIBUTING.md, "A scheduler backend"): the Slurm folder
is copied to a package of its own outside ``hpcjobs/``; inside the copy only its imports of itself,
its name and its template's name change; a template goes into the copy's ``templates/``. Registered
at run time, the new backend passes the whole contract, a site file may name it, an experiment
renders for it, and a sweep dry-runs on it. Nothing outside the copied folder is edited.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import invoke

from hpcjobs.schedulers import registry
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import BACKENDS, contract_problems, register

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "hpcjobs" / "schedulers" / "slurm"
PACKAGE = "hpcjobs_sixth_backend"


def _copy_folder(dest: Path) -> Path:
    """The Slurm folder copied to ``dest/PACKAGE``, made a scheduler named ``sixth`` by edits inside it only."""
    folder = dest / PACKAGE
    shutil.copytree(SOURCE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for path in folder.glob("*.py"):
        text = path.read_text(encoding="utf-8").replace("hpcjobs.schedulers.slurm", PACKAGE)
        path.write_text(text, encoding="utf-8")
    backend = folder / "backend.py"
    text, renamed = re.subn(r'^(\s+)name = "slurm"$', r'\1name = "sixth"', backend.read_text(encoding="utf-8"),
                            flags=re.M)
    assert renamed == 1, "the copied backend names itself once"
    backend.write_text(text.replace("class SlurmBackend(", "class SixthBackend("), encoding="utf-8")
    (folder / "templates").mkdir()
    template = (ROOT / "templates" / "slurm.sh.j2").read_text(encoding="utf-8")
    (folder / "templates" / "sixth.sh.j2").write_text(
        template + '{% block header %}{{ super() }}# rendered by the sixth backend\'s own template\n{% endblock %}\n',
        encoding="utf-8")
    return folder


@pytest.fixture
def sixth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BaseBackend]:
    """The copied backend, imported from its own folder and registered; unregistered afterwards."""
    _copy_folder(tmp_path / "plugins")
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    module = importlib.import_module(f"{PACKAGE}.backend")
    backend = register(module.SixthBackend())
    try:
        yield backend
    finally:
        BACKENDS.pop("sixth", None)
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def _project(folder: Path) -> tuple[Path, Path]:
    site = folder / "six.yaml"
    site.write_text("name: six\nscheduler: sixth\npartitions:\n  cpu:\n    max_nodes: 4\n    max_walltime: '2:00:00'\n"
                    "default_partition: cpu\nlimits:\n  max_array_size: 100\n", encoding="utf-8")
    experiment = folder / "exp.yaml"
    experiment.write_text("name: six-exp\ncommand: python train.py --lr {{ lr }}\nresources:\n  nodes: 1\n"
                          "  cpus_per_task: 2\n  walltime: '0:30:00'\nsweep:\n  grid:\n    lr: [0.1, 0.01, 0.001]\n",
                          encoding="utf-8")
    return site, experiment


def test_the_copy_passes_the_whole_contract(sixth: BaseBackend) -> None:
    assert contract_problems(sixth) == []
    assert registry.get_backend("sixth") is sixth
    assert sixth.template == "sixth.sh.j2" and sixth.template_dir is not None
    assert registry.capabilities_of("sixth") == BACKENDS["slurm"].capabilities


def test_a_site_names_it_and_an_experiment_renders_for_it(sixth: BaseBackend, tmp_path: Path) -> None:
    from hpcjobs.render.script import render_experiment

    site, experiment = _project(tmp_path)
    text = render_experiment(experiment, site=str(site)).text
    assert "#SBATCH --partition=cpu" in text
    assert "#SBATCH --cpus-per-task=2" in text
    assert "# rendered by the sixth backend's own template" in text  # found in the copy's templates/


def test_a_sweep_dry_runs_on_it(sixth: BaseBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, experiment = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-scheduler-here"))  # the dry run asks no live scheduler
    code, out = invoke("sweep", str(experiment), "--site", str(site), "--dry-run", "--json")
    assert code == 0, out
    plan = json.loads(out[out.index("{"):])
    assert plan["points"] == 3
    assert [argv[0] for argv in plan["commands"]] == ["sbatch"]  # the copy's own command builder
    assert "#SBATCH --array=0-2" in plan["script"]
    assert not (tmp_path / "hpcjobs-sweeps").exists() or not any((tmp_path / "hpcjobs-sweeps").rglob("ledger*"))

