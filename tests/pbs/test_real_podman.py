"""Podman containers in a sweep on the real OpenPBS testbed: `hpcjobs sweep` with `container:`, end to end.

See tests/containers/real_podman.py for what each point checks; tests/containers/README.md for the
measured facts behind the rendered command line (pbs_mom's lower nofile limit among them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from containers.real_podman import PODMAN, check_cancel_stops_the_container, check_pull_at_submission, check_sweep

pytestmark = pytest.mark.pbs

SITE = Path(__file__).resolve().parents[1] / "sites" / "podman-pbs.yaml"


@pytest.fixture
def podman_folder(pbs_server, pbs_workdir: Path) -> Path:
    PODMAN.require()
    return pbs_workdir


def test_a_sweep_in_podman_fails_resubmits_and_gives_its_results(podman_folder: Path):
    check_sweep(podman_folder, podman_folder / "sweeps", SITE, 3)


def test_qdel_of_a_point_stops_its_container(podman_folder: Path):
    check_cancel_stops_the_container(podman_folder, podman_folder / "sweeps", SITE)


def test_an_image_fetched_at_submission_runs_every_point(podman_folder: Path):
    check_pull_at_submission(podman_folder, podman_folder / "sweeps", SITE)
