"""Fixtures of the PBS tests: the stand-in (fast, both flavours) and the real OpenPBS testbed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pbs_standin.fixture import pbs_standin  # noqa: F401

from pbs.real import PBS_EXEC, PbsServer, require_server


@pytest.fixture(scope="session")
def pbs_server_session() -> PbsServer:
    return require_server()


@pytest.fixture
def pbs_server(pbs_server_session: PbsServer, monkeypatch: pytest.MonkeyPatch) -> PbsServer:
    """The real OpenPBS testbed; hpcjobs is pointed at its clients (not Slurm's wrappers on PATH)."""
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(PBS_EXEC / "bin"))
    return pbs_server_session


@pytest.fixture
def pbs_workdir(tmp_path: Path) -> Path:
    """A folder for scripts and job output that the mom (running the job as its owner) can write."""
    os.chmod(tmp_path, 0o777)
    return tmp_path
