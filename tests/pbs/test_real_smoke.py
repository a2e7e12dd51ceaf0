"""The real OpenPBS testbed answers, and hpcjobs finds PBS's own clients rather than Slurm's wrappers."""

from __future__ import annotations

import pytest

from hpcjobs.schedulers.locate import locate_pbs_command
from pbs.real import PBS_EXEC

pytestmark = pytest.mark.pbs


def test_server_answers_and_clients_are_pbs_own(pbs_server, monkeypatch):
    monkeypatch.delenv("HPCJOBS_PBS_BIN")
    found = locate_pbs_command("qsub")
    assert found.path == str(PBS_EXEC / "bin" / "qsub"), found
    assert pbs_server.server_name()
