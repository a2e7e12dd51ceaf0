"""Golden scripts of jobs in containers: every runtime × scheduler the container test sites ship.

The sites (``tests/sites/containers-slurm.yaml``, ``containers-pbs.yaml``) list every runtime hpcjobs renders
for their scheduler (``containers-*-pull.yaml``: images fetched at submission); each experiment of
``tests/data/containers/`` is rendered with each runtime (``--set container.runtime=...``): a plain GPU
command, mounts with a working folder, an ``env:`` list and a secret, torchrun on two nodes, and a packed
sweep (each point in its own container). A pair the runtime refuses has a golden ``.err`` file instead.
Regenerate with ``pytest tests/test_golden_containers.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment
from hpcjobs.sweep.prepare import render_packed

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden" / "containers"
EXPERIMENTS = sorted(p.stem for p in (ROOT / "tests" / "data" / "containers").glob("*.yaml"))
RUNTIMES = {"containers-slurm": ("apptainer", "singularity", "pyxis", "podman", "oci"),
            "containers-pbs": ("apptainer", "singularity", "podman"),
            # containers.pull: submit: the jobs run the file hpcjobs fetched into the image cache
            "containers-slurm-pull": ("apptainer", "pyxis", "podman"),
            "containers-pbs-pull": ("singularity", "podman")}
CASES = [(site, runtime, exp) for site, runtimes in RUNTIMES.items() for runtime in runtimes for exp in EXPERIMENTS]


def _render(site: str, runtime: str, example: str) -> tuple[str, str]:
    path = ROOT / "tests" / "data" / "containers" / f"{example}.yaml"
    site_file = str(ROOT / "tests" / "sites" / f"{site}.yaml")
    overrides = (f"container.runtime={runtime}",)
    try:
        packed = render_packed(path, site=site_file, overrides=overrides, root="/scratch/hpcjobs-sweeps")
        return "sh", (packed or render_experiment(path, site=site_file, overrides=overrides)).text
    except ConfigError as exc:
        return "err", str(exc).replace(str(ROOT) + "/", "") + "\n"


@pytest.mark.parametrize(("site", "runtime", "example"), CASES, ids=["-".join(c) for c in CASES])
def test_container_golden(site: str, runtime: str, example: str, update_golden: bool) -> None:
    kind, text = _render(site, runtime, example)
    path = GOLDEN / site / f"{example}.{runtime}.{kind}"
    other = path.with_suffix(".err" if kind == "sh" else ".sh")
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        other.unlink(missing_ok=True)
        return
    assert path.exists(), f"no golden file {path}; run pytest {__file__} --update-golden"
    assert not other.exists(), f"stale golden file {other}"
    assert text == path.read_text(), f"{path} differs; if intended, regenerate with --update-golden"


def test_every_runtime_renders_a_script() -> None:
    """Each runtime of each site has at least one rendered script (not only refusals)."""
    rendered = {(p.parent.name, p.name.split(".")[1]) for p in GOLDEN.glob("*/*.sh")}
    assert rendered == {(site, r) for site, runtimes in RUNTIMES.items() for r in runtimes}


def _scripts() -> list[Path]:
    return sorted(GOLDEN.glob("*/*.sh"))


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_container_goldens_pass_bash_n_and_shellcheck(script: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", "--shell=bash", "--severity=style", "--exclude=SC1091", str(script)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _runtime_lines(text: str) -> list[str]:
    starts = ("apptainer exec", "singularity exec", "podman run", "--container-image=", "--container=")
    return [line for line in text.splitlines() if any(s in line for s in starts)]


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_secret_is_in_a_container_argv(script: Path) -> None:
    """A secret reaches the container through the runtime's environment: never NAME=value, never expanded in an argv."""
    import yaml

    experiment = yaml.safe_load((ROOT / "tests" / "data" / "containers" / f"{script.name.split('.')[0]}.yaml")
                                .read_text())
    lines = _runtime_lines(script.read_text())
    assert lines, f"{script} has no container command line"
    for name in experiment.get("secrets", {}):
        for line in lines:
            assert f"{name}=" not in line and f"${name}" not in line and f"${{{name}" not in line, line
