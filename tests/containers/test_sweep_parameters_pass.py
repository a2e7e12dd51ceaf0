"""A sweep's parameters reach the point's container, for runtimes that pass only the names they are told.

A chunk's task exports its point's parameters at run time (``chunks/<n>.env``), so the experiment's
own job does not know their names: Podman (``--env NAME`` each) and Apptainer/Singularity with an
``env:`` list (``--cleanenv``, ``APPTAINERENV_NAME`` per name) must get every parameter variable, in
plain and packed sweeps, for grid, zip and random parameters and dotted names (``model.lr`` is
exported as ``model_lr``). The real sweeps in Podman on the Slurm and OpenPBS testbeds run them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcjobs.sweep.prepare import chunk_script_text, prepare_sweep

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "containers-slurm.yaml")

SWEEPS = {
    "grid": ("sweep:\n  grid:\n    model.lr: [0.1, 0.2]\n    seed: [1, 2]\n", {"model_lr", "seed"}),
    "zip": ("sweep:\n  zip:\n    a: [1, 2]\n    b: [x, y]\n", {"a", "b"}),
    "random": ("sweep:\n  random:\n    samples: 3\n    seed: 7\n    parameters:\n"
               "      lr: {distribution: log_uniform, min: 0.0001, max: 0.1}\n", {"lr"}),
}
RUNTIMES = {
    "podman": ("  runtime: podman\n", lambda text, name: re.search(rf"--env {name} ", text) is not None),
    "apptainer-env-list": ("  runtime: apptainer\n  env: [OMP_NUM_THREADS]\n",
                           lambda text, name: re.search(rf"for hpcjobs_name in [^;]*\b{name}\b", text) is not None),
}


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "packed"])
@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("kind", sorted(SWEEPS))
def test_every_parameter_variable_is_passed(tmp_path: Path, kind: str, runtime: str, packed: bool):
    sweep, names = SWEEPS[kind]
    lines, passed = RUNTIMES[runtime]
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: pass\nresources: {walltime: 10m, cpus_per_task: 2}\ncommand: env\n"
                   + ("pack: {per_node: 2}\n" if packed else "")
                   + "container:\n  image: docker://python:3.12-slim\n" + lines + sweep)
    prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    text = chunk_script_text(prepared, 0, 2, None, "0" * 16)
    missing = sorted(n for n in names if not passed(text, n))
    assert not missing, f"not passed into the container: {missing}"
    # the experiment's own variables still pass too
    assert passed(text, "OMP_NUM_THREADS")
