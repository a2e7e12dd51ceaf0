"""pytest fixture for the PBS stand-in (fake ``qsub``/``qstat``/``qdel``/``qrls``/``qrerun``).

Use from a conftest or test module. ``tests/`` must be on ``sys.path``: pytest's default
``prepend`` mode adds it when it collects this package; a folder without ``__init__.py`` run on
its own needs ``pythonpath = ["tests"]`` in the pytest config or
``sys.path.insert(0, str(Path(__file__).resolve().parents[1]))`` in its conftest::

    from pbs_standin.fixture import pbs_standin, wait_for_state  # noqa: F401

    def test_x(pbs_standin):
        job = pbs_standin.qsub("job.sh")            # "1.pbs-standin"
        info = wait_for_state(job, {"F"})           # qstat -x -f -F json attributes

    @pytest.mark.parametrize("pbs_standin", ["pbspro", "torque"], indirect=True)
    def test_both(pbs_standin): ...

The fixture gives each test its own ``$PBS_STANDIN_HOME``, prepends the stand-in's ``bin``
to ``PATH`` and selects the flavour through ``$PBS_STANDIN_FLAVOR``; at teardown it kills
whatever jobs and runners are still alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BIN_DIR = Path(__file__).resolve().parent / "bin"


@dataclass
class PbsStandin:
    """Handle on one stand-in PBS server (state directory, flavour, helpers)."""

    home: Path
    flavor: str
    server: str
    workdir: Path
    user_home: Path
    config: dict[str, Any] = field(default_factory=dict)

    def configure(self, **settings: Any) -> None:
        """Merge ``settings`` into ``server.json`` (queues, max_array_size, kill_delay, ...)."""
        self.config.update(settings)
        (self.home / "server.json").write_text(json.dumps(self.config, indent=1))

    def run(self, *argv: str, input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a command (``qsub``, ``qstat``...) in the work directory; capture text output."""
        return subprocess.run(
            list(argv), input=input, capture_output=True, text=True, cwd=self.workdir, check=check, timeout=60
        )

    def qsub(self, *args: str, script: str | None = None) -> str:
        """Submit; ``script`` text is written to ``job.sh`` unless args name a script. Returns the id."""
        argv = ["qsub", *args]
        if script is not None:
            path = self.workdir / f"job{len(list(self.workdir.glob('job*.sh')))}.sh"
            path.write_text(script)
            argv.append(str(path))
        result = self.run(*argv)
        if result.returncode != 0:
            raise AssertionError(f"qsub failed ({result.returncode}): {result.stderr}")
        return result.stdout.strip()

    def accounting_lines(self) -> list[str]:
        """All accounting lines written so far, in file (day) order."""
        lines: list[str] = []
        for path in sorted((self.home / "server_priv" / "accounting").glob("*")):
            lines.extend(path.read_text().splitlines())
        return lines

    def wait_for_state(self, job_id: str, states: set[str] | str, timeout: float = 30.0) -> dict[str, Any]:
        """See :func:`wait_for_state`."""
        return wait_for_state(job_id, states, timeout)

    def shutdown(self) -> None:
        """Kill every live job process group and runner of this server."""
        for path in (self.home / "server_logs").glob("runner-*.pid"):
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(path.read_text()), signal.SIGKILL)
        for path in (self.home / "jobs").glob("*.json"):
            with contextlib.suppress(ValueError, OSError):
                rec = json.loads(path.read_text())
                if rec.get("session_id") and not rec.get("done"):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(rec["session_id"]), signal.SIGKILL)


def _torque_attrs(text: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    last = None
    for line in text.splitlines():
        if line.startswith("\t") and last:
            attrs[last] += line[1:]
        elif line.startswith("    ") and " = " in line:
            last, _, value = line[4:].partition(" = ")
            attrs[last] = value
    return attrs


def job_info(job_id: str) -> dict[str, Any] | None:
    """Current attributes of a job (JSON for OpenPBS, parsed ``-f`` text for Torque), or None."""
    if os.environ.get("PBS_STANDIN_FLAVOR", "pbspro") == "torque":
        result = subprocess.run(["qstat", "-f", job_id], capture_output=True, text=True, timeout=60)
        return _torque_attrs(result.stdout) if result.returncode == 0 else None
    result = subprocess.run(["qstat", "-x", "-f", "-F", "json", job_id], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return None
    jobs = json.loads(result.stdout).get("Jobs", {})
    return next(iter(jobs.values()), None)


def wait_for_state(job_id: str, states: set[str] | str, timeout: float = 30.0) -> dict[str, Any]:
    """Poll ``qstat -x -f -F json`` (Torque: ``qstat -f``) until ``job_state`` is in ``states``.

    Args:
        job_id: the id printed by qsub.
        states: wanted state letters, e.g. ``{"F"}`` or ``"FC"``.
        timeout: seconds before giving up.

    Returns:
        The job's attributes at that moment.

    Raises:
        TimeoutError: when the state is not reached in time.
    """
    wanted = set(states)
    deadline = time.monotonic() + timeout
    info: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        info = job_info(job_id)
        if info and info.get("job_state") in wanted:
            return info
        time.sleep(0.1)
    raise TimeoutError(f"{job_id} not in {sorted(wanted)} after {timeout}s; last: {info}")


@pytest.fixture
def pbs_standin(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PbsStandin]:
    """A fresh stand-in PBS server; parametrise indirectly with ``"pbspro"`` or ``"torque"``."""
    flavor = getattr(request, "param", "pbspro")
    server = "pbs-standin" if flavor == "pbspro" else "torque-standin.cluster"
    home = tmp_path / "pbs_home"
    workdir = tmp_path / "work"
    user_home = tmp_path / "user_home"
    for path in (home, workdir, user_home):
        path.mkdir()
    monkeypatch.setenv("PBS_STANDIN_HOME", str(home))
    monkeypatch.setenv("PBS_STANDIN_FLAVOR", flavor)
    monkeypatch.setenv("PBS_STANDIN_SERVER", server)
    monkeypatch.setenv("PATH", f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}")
    # hpcjobs looks for PBS's own clients in /opt/pbs/bin before PATH: point it at the stand-in's
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(BIN_DIR))
    standin = PbsStandin(home=home, flavor=flavor, server=server, workdir=workdir, user_home=user_home)
    standin.configure(user_home=str(user_home), kill_delay=1)
    try:
        yield standin
    finally:
        standin.shutdown()
