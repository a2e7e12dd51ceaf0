"""Which qsub runs: PBS's own before Slurm's wrappers of the same name (Debian slurm-wlm-torque)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import CommandError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers import locate
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.locate import describe_pbs_commands, is_slurm_wrapper, locate_pbs_command
from hpcjobs.schedulers.registry import get_backend

#: The head of Debian's /usr/bin/qsub from slurm-wlm-torque (Slurm 22.05), as installed on the Slurm testbed.
SLURM_WRAPPER_HEAD = """#! /usr/bin/perl -w
###############################################################################
#
# qsub - submit a batch job in familar pbs/Grid Engine format.
#
#
###############################################################################
#  Copyright (C) 2015-2016 SchedMD LLC
#  This file is part of Slurm, a resource management program.
"""


def _exe(folder: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def no_default_pbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine may hold a real PBS in /opt/pbs: move the default away from it."""
    monkeypatch.setattr(locate, "DEFAULT_PBS_EXEC", str(tmp_path / "no-opt-pbs"))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment that sees no real PBS installation (the conf file and /opt/pbs are elsewhere)."""
    return {"PATH": str(tmp_path / "empty"), "PBS_CONF_FILE": str(tmp_path / "no-pbs.conf"), **extra}


def test_slurm_wrapper_recognised(tmp_path: Path) -> None:
    assert is_slurm_wrapper(_exe(tmp_path, "qsub", SLURM_WRAPPER_HEAD))
    assert not is_slurm_wrapper(_exe(tmp_path / "b", "qsub"))
    assert not is_slurm_wrapper(_exe(tmp_path / "c", "qsub", "#!/usr/bin/perl\n# a site's own perl qsub\n"))
    assert not is_slurm_wrapper(tmp_path / "missing")


def test_explicit_folder_wins_and_must_hold_the_command(tmp_path: Path) -> None:
    pbs = tmp_path / "pbsbin"
    _exe(pbs, "qsub")
    found = locate_pbs_command("qsub", _env(tmp_path, HPCJOBS_PBS_BIN=str(pbs)))
    assert (found.path, found.source) == (str(pbs / "qsub"), "$HPCJOBS_PBS_BIN")
    with pytest.raises(CommandError, match=r"HPCJOBS_PBS_BIN=.* holds no executable qstat"):
        locate_pbs_command("qstat", _env(tmp_path, HPCJOBS_PBS_BIN=str(pbs)))


def test_pbs_exec_from_pbs_conf_before_path(tmp_path: Path) -> None:
    exec_dir = tmp_path / "site-pbs"
    _exe(exec_dir / "bin", "qstat")
    _exe(tmp_path / "path", "qstat")
    conf = tmp_path / "pbs.conf"
    conf.write_text(f"PBS_SERVER=head\nPBS_EXEC={exec_dir}\nPBS_HOME=/var/spool/pbs\n")
    env = {"PATH": str(tmp_path / "path"), "PBS_CONF_FILE": str(conf)}
    found = locate_pbs_command("qstat", env)
    assert found.path == str(exec_dir / "bin" / "qstat") and found.source == f"PBS_EXEC in {conf}"
    # PBS_EXEC in the environment (as PBS sets it inside jobs) is read before the file
    other = tmp_path / "env-pbs"
    _exe(other / "bin", "qstat")
    assert locate_pbs_command("qstat", {**env, "PBS_EXEC": str(other)}).path == str(other / "bin" / "qstat")


def test_path_skips_slurm_wrapper(tmp_path: Path) -> None:
    _exe(tmp_path / "usr-bin", "qsub", SLURM_WRAPPER_HEAD)
    real = _exe(tmp_path / "local-bin", "qsub")
    env = _env(tmp_path, PATH=f"{tmp_path / 'usr-bin'}:{tmp_path / 'local-bin'}")
    found = locate_pbs_command("qsub", env)
    assert (found.path, found.source) == (str(real), "PATH")


def test_only_slurm_wrapper_is_a_clear_error(tmp_path: Path) -> None:
    wrapper = _exe(tmp_path / "usr-bin", "qsub", SLURM_WRAPPER_HEAD)
    with pytest.raises(CommandError) as info:
        locate_pbs_command("qsub", _env(tmp_path, PATH=str(wrapper.parent)))
    text = str(info.value)
    assert "Slurm's PBS wrapper" in text and str(wrapper) in text and "HPCJOBS_PBS_BIN" in text
    assert "qsub" in describe_pbs_commands(_env(tmp_path, PATH=str(wrapper.parent)))[0]  # type: ignore[operator]


def test_client_runs_the_located_command_and_torque_keeps_path(tmp_path: Path, monkeypatch) -> None:
    pbs = tmp_path / "pbsbin"
    _exe(pbs, "qdel")
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(pbs))
    seen: list[tuple[str, ...]] = []

    def fake(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        seen.append(tuple(argv))
        return CommandResult(tuple(argv), 0, "", "", 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    client = SchedulerClient(get_backend("pbspro"))
    client.cancel(["1.server"])
    SchedulerClient(get_backend("torque")).cancel(["2.server"])
    assert seen == [(str(pbs / "qdel"), "--", "1.server"), ("qdel", "--", "2.server")]
    assert client.calls == {"qdel": 1}
