"""Shared test configuration: the golden-file regeneration flag and an isolated config environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# No test is timed (performance targets are checked by benchmarks/): hypothesis' per-example deadline
# would fail a property test on a loaded 2-core machine, where the suite's parts run beside builds.
settings.register_profile("hpcjobs", deadline=None)
settings.load_profile("hpcjobs")

# `python -m hpcjobs` in a test's subprocess imports this checkout, whichever checkout is installed
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT))])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite the golden rendered scripts under tests/golden/ instead of comparing against them.",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to run under a stray ``hpcjobs-sweeps/``: hpcjobs finds the nearest one in a test's folder or above
    it, so one left in /tmp (an hpcjobs command run there) would hold every test's sweeps."""
    if hasattr(session.config, "workerinput"):
        return  # the xdist controller checked
    base = Path(session.config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT") or
                os.environ.get("TMPDIR") or "/tmp").resolve()
    for folder in (base, *base.parents):
        if (folder / "hpcjobs-sweeps").is_dir():
            raise pytest.UsageError(f"{folder / 'hpcjobs-sweeps'} is above the tests' temporary folders: hpcjobs "
                                    "would find it from every test; move it away (or run with --basetemp elsewhere)")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the user config dir at an empty temp dir so a developer's own sites/templates never leak in."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    # caches (scheduler limits, accounting windows) per test: one test's stand-in limits never reach another
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.delenv("HPCJOBS_CACHE_DIR", raising=False)
    # a test machine running Slurm or PBS must not turn `local` into a discovered site: tests of
    # discovery set HPCJOBS_DISCOVER=1 themselves
    monkeypatch.setenv("HPCJOBS_DISCOVER", "0")
    monkeypatch.delenv("HPCJOBS_SITE_PATH", raising=False)
    monkeypatch.delenv("HPCJOBS_TEMPLATE_PATH", raising=False)
    monkeypatch.delenv("HPCJOBS_SITE", raising=False)
    return home


@pytest.fixture
def pbs_clients_stubbed(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$HPCJOBS_PBS_BIN`` at a folder of stub PBS clients, for tests that fake the process seam.

    Which ``qstat`` the machine holds (OpenPBS's in ``/opt/pbs/bin``, Slurm's wrapper from
    ``slurm-wlm-torque`` on ``PATH``, or none) must not change such a test's outcome; the stubs only
    exist to be found, and fail loudly if a test runs one for real.
    """
    folder = tmp_path_factory.mktemp("pbs-clients")
    for name in ("qsub", "qstat", "qdel", "qrls", "qhold", "qalter", "qmgr", "pbsnodes", "tracejob"):
        stub = folder / name
        stub.write_text(f"#!/bin/sh\necho 'stub {name}: this test fakes the process seam' >&2\nexit 127\n")
        stub.chmod(0o755)
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(folder))
    return folder
