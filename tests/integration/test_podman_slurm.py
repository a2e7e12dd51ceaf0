"""Podman containers in a sweep on the real Slurm testbed: `hpcjobs sweep` with `container:`, end to end.

See tests/containers/real_podman.py for what each point checks; tests/containers/README.md for the
measured facts behind the rendered command line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from containers.real_podman import (
    HOSTFS,
    PODMAN,
    check_cancel_stops_the_container,
    check_pull_at_submission,
    check_sweep,
    point_ids,
    sweep,
    wait_counts,
)
from real_testbed import in_ci

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "sites" / "podman-slurm.yaml"


@pytest.fixture
def podman_folder(slurm_testbed, tmp_path: Path) -> Path:
    PODMAN.require()
    tmp_path.chmod(0o777)
    return tmp_path


def test_a_sweep_in_podman_fails_resubmits_and_gives_its_results(podman_folder: Path):
    check_sweep(podman_folder, podman_folder / "sweeps", SITE, 4)


def test_scancel_of_a_point_stops_its_container(podman_folder: Path):
    check_cancel_stops_the_container(podman_folder, podman_folder / "sweeps", SITE)


def test_an_image_fetched_at_submission_runs_every_point(podman_folder: Path):
    check_pull_at_submission(podman_folder, podman_folder / "sweeps", SITE)


def test_torchrun_two_ranks_gloo_inside_one_container(podman_folder: Path):
    """torchrun runs inside the job's container (one launcher per node) and its two ranks all-reduce.

    torch is not in the image: the host's Python prefix is mounted read-only at its own path, with the
    host's /usr and /etc, into the hostfs image (an empty root), as tests/containers/README.md measured.
    """
    torch = pytest.importorskip("torch") if not in_ci() else __import__("torch")
    # a virtual environment's python is a link into its base Python: both prefixes, at their own paths
    prefixes = sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)})
    program = podman_folder / "torch_ddp_allreduce.py"
    shutil.copy(ROOT / "examples" / "torch_ddp_allreduce.py", program)
    site = podman_folder / "podman-torch.yaml"
    site.write_text(SITE.read_text().replace("name: podman-slurm", "name: podman-torch")
                    + f"distributed:\n  torchrun: {json.dumps(sys.executable + ' -m torch.distributed.run')}\n")
    exp = podman_folder / "podddp.yaml"
    exp.write_text(
        "name: podddp\n"
        f"description: run in {podman_folder}\n"
        "resources: {nodes: 1, tasks_per_node: 2, cpus_per_task: 1, memory: 2G, walltime: 5m}\n"
        f"container: {{image: {HOSTFS}, runtime: podman, "
        f"mounts: [/usr:/usr:ro, /etc:/etc:ro, {', '.join(f'{p}:{p}:ro' for p in prefixes)}]}}\n"
        f"launch: {{launcher: torchrun, program: {program}, "
        "args: [--backend, gloo, --steps, '3', --out, ddp]}\n"  # relative: the submit folder, mounted

        "sweep:\n  grid:\n    seed: [1]\n")
    root = podman_folder / "sweeps"
    sweep_id = sweep(podman_folder, exp, site, root)
    wait_counts(sweep_id, root, podman_folder, {"COMPLETED": 1}, timeout=420)
    assert len(point_ids(root, sweep_id)) == 1
    reports = sorted((json.loads(p.read_text()) for p in (podman_folder / "ddp").glob("rank-*.json")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1], reports
    assert all(r["world_size"] == 2 and r["backend"] == "gloo" for r in reports)
    assert [r["allreduce"] for r in reports] == [3.0, 3.0]  # (0 + 1) + (1 + 1)
    assert reports[0]["loss"] == reports[1]["loss"]
    assert torch.__version__
