"""``hpcjobs why`` without a testbed: targets, the short cache, and a scheduler that explains nothing.

The scheduler's answer is a real one (OpenPBS 23.06.06, tests/data/pbs/openpbs-real), handed out by the
process seam's local runner; the real cases run on the testbeds (tests/integration/test_why_slurm.py,
tests/pbs/test_why_pbs.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import ConfigError, IdArgumentError
from hpcjobs.plan.why import explain_waiting

ROOT = Path(__file__).resolve().parents[2]
ANSWER = (ROOT / "tests" / "data" / "pbs" / "openpbs-real" / "qstat-f-json.running.json").read_text()
SITE = str(ROOT / "tests" / "sites" / "pbstest.yaml")


class Recorded:
    """The process seam's stand-in: qstat answers with the recorded JSON; every call is counted."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(list(argv))
        out = ANSWER if "-f" in argv and "-Q" not in argv else '{"Queue": {}}'
        return process.CommandResult(tuple(argv), 0, out, "", 0.0)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    seam = Recorded()
    bin_dir = tmp_path_factory.mktemp("pbs-bin")  # a PBS client folder, so the backend picks its qstat
    (bin_dir / "qstat").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "qstat").chmod(0o755)
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(bin_dir))
    monkeypatch.setattr(process, "run_here", seam)  # what a transport scope runs a command with, here
    return seam


def test_a_job_id_is_asked_once_and_answered_from_the_cache_within_seconds(recorded: Recorded, tmp_path: Path):
    report = explain_waiting("9.vm", site=SITE, cache_dir=tmp_path)
    assert report.scheduler == "pbspro" and report.job_ids == ["9.vm"]
    held = [j for j in report.query.pending if j.job_id == "9.vm"]
    assert held and held[0].reason.code == "HeldUser"
    (call,) = recorded.calls  # qstat as the PBS backend finds it ($PBS_EXEC/bin, else PATH)
    assert Path(call[0]).name == "qstat" and call[1:5] == ["-E", "-f", "-F", "json"]
    again = explain_waiting("9.vm", site=SITE, cache_dir=tmp_path)
    assert len(recorded.calls) == 1 and again.cached == 1  # the controller was not asked again
    explain_waiting("9.vm", site=SITE, cache_dir=tmp_path, fresh=True)
    assert len(recorded.calls) == 2
    (cached,) = tmp_path.iterdir()
    assert oct(cached.stat().st_mode & 0o777) == "0o600" and json.loads(cached.read_text())["argv"][0] == "qstat"


def test_a_stale_or_broken_cache_entry_is_asked_again(recorded: Recorded, tmp_path: Path):
    explain_waiting("9.vm", site=SITE, cache_dir=tmp_path)
    (cached,) = tmp_path.iterdir()
    old = json.loads(cached.read_text())
    cached.write_text(json.dumps({**old, "at": old["at"] - 3600}))
    explain_waiting("9.vm", site=SITE, cache_dir=tmp_path)
    cached.write_text("{not json")
    explain_waiting("9.vm", site=SITE, cache_dir=tmp_path)
    os.mkfifo(tmp_path / "fifo")  # a FIFO beside it is never opened
    assert len(recorded.calls) == 3


@pytest.mark.parametrize("target", ["", " ", "\x00"])
def test_an_empty_or_option_like_target_is_refused(target: str, tmp_path: Path):
    with pytest.raises(IdArgumentError):
        explain_waiting(target, root=tmp_path, site=SITE, cache_dir=tmp_path)


def test_neither_a_sweep_nor_a_job_id(tmp_path: Path):
    with pytest.raises(ConfigError, match="not a scheduler job id"):
        explain_waiting("no-such-sweep", root=tmp_path, site=SITE, cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="1517,1518"):
        explain_waiting("1517,1518", root=tmp_path, site=SITE, cache_dir=tmp_path)


def test_a_scheduler_that_explains_nothing_says_which_do(tmp_path: Path):
    with pytest.raises(ConfigError) as info:
        explain_waiting("1517", root=tmp_path, site="local", cache_dir=tmp_path)
    assert "does not explain waiting jobs on local" in str(info.value)
    assert "pbspro" in str(info.value) and "slurm" in str(info.value)
