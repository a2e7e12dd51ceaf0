"""Helpers for tests against the real one-node OpenPBS testbed (``tests/pbs/testbed.sh``).

Tests that need it are marked ``@pytest.mark.pbs`` and take the ``pbs_server`` fixture. When the
server does not answer, the fixture skips with the reason on a laptop and *fails* under ``CI=true``.

What the helpers know about this OpenPBS (23.06, see ``tests/pbs/README.md``):

* ``qstat -x -f -F json`` lists finished jobs while ``job_history_enable`` is set; its ``Jobs`` key is
  absent when there are none;
* a job is final at ``job_state`` F; ``Exit_status`` is absent for a job deleted while queued;
* the accounting log of the day is ``/var/spool/pbs/server_priv/accounting/YYYYMMDD`` (local time),
  its ``E`` record written when the job ends; a ``qdel`` gives ``D`` then ``E``.

Every call goes through :func:`hpcjobs.process.run_command` with PBS's own clients (``/opt/pbs/bin``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from real_testbed import Testbed, client

from hpcjobs.process import CommandResult

PBS_EXEC = Path(os.environ.get("HPCJOBS_TEST_PBS_EXEC", "/opt/pbs"))
PBS_HOME = Path("/var/spool/pbs")
ACCOUNTING_DIR = PBS_HOME / "server_priv" / "accounting"
#: The unprivileged user the testbed creates (tests/pbs/testbed.sh).
PBS_USER = os.environ.get("PBS_USER", "hpcpbs")
#: The server's max_array_size as the testbed sets it.
MAX_ARRAY_SIZE = 20
DEFAULT_WAIT_S = 120.0


def pbs(argv: Sequence[str], *, timeout: float = 30.0, check: bool = True) -> CommandResult:
    """Run one PBS client (``qstat``, ``qmgr`` ...) from ``$PBS_EXEC/bin`` through the subprocess seam."""
    name = argv[0]
    path = PBS_EXEC / "bin" / name
    return client([str(path), *argv[1:]], timeout=timeout, check=check)


def server_problem() -> str | None:
    """Why the OpenPBS testbed cannot be used, or ``None`` when the server answers with a free node."""
    if not (PBS_EXEC / "bin" / "qstat").exists():
        return f"{PBS_EXEC}/bin/qstat does not exist"
    server = pbs(["qstat", "-B"], timeout=15.0, check=False)
    nodes = pbs(["pbsnodes", "-a"], timeout=15.0, check=False)
    if server.returncode != 0:
        return f"qstat -B exited {server.returncode}: {server.stderr.strip()[:300]}"
    if "state = free" not in nodes.stdout and "job-busy" not in nodes.stdout:
        return f"no usable node: {nodes.stdout.strip()[:300]}"
    return None


#: The OpenPBS testbed as the shared real-testbed helper sees it.
PBS_TESTBED = Testbed("OpenPBS", "sudo bash tests/pbs/testbed.sh start", server_problem)
START_HINT = PBS_TESTBED.start_hint


@dataclass
class PbsServer:
    """The running testbed: queries that wait for complete records."""

    exec_dir: Path = PBS_EXEC

    def jobs(self, *job_ids: str, subjobs: bool = False) -> dict[str, dict[str, Any]]:
        """``qstat -E -x -f -F json [-t]`` of ``job_ids`` (all jobs when none), as ``{id: attributes}``.

        ``-E``: without it, OpenPBS 23.06 prints only the first of several ids in ``-F json``.
        """
        argv = ["qstat", *(["-E"] if job_ids else []), "-x", "-f", "-F", "json", *(["-t"] if subjobs else []),
                *job_ids]
        result = pbs(argv, check=False)
        if not result.stdout.strip():
            return {}
        return dict(json.loads(result.stdout).get("Jobs", {}))

    def server_name(self) -> str:
        """The server's name (the suffix of its job ids)."""
        data = json.loads(pbs(["qstat", "-B", "-f", "-F", "json"]).stdout)
        return str(next(iter(data["Server"])))

    def wait_final(self, job_ids: Sequence[str], timeout: float = DEFAULT_WAIT_S) -> dict[str, dict[str, Any]]:
        """Wait until every job (and each array's subjobs) is in state F; return their attributes."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.jobs(*job_ids, subjobs=True)
            pending = [j for j, a in info.items() if a.get("job_state") != "F"]
            missing = [j for j in job_ids if j not in info]
            if info and not pending and not missing:
                return info
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs not final after {timeout:.0f} s: pending {pending}, missing {missing}")
            time.sleep(0.5)

    def accounting_records(self, *, since: float = 0.0) -> list[str]:
        """Every accounting line of today's and yesterday's logs written at or after ``since`` (epoch)."""
        lines: list[str] = []
        for day in sorted({time.strftime("%Y%m%d", time.localtime(t)) for t in (since or time.time(), time.time())}):
            path = ACCOUNTING_DIR / day
            if path.exists():
                lines += path.read_text(errors="replace").splitlines()
        out = []
        for line in lines:
            stamp = line.split(";", 1)[0]
            try:
                t = time.mktime(time.strptime(stamp, "%m/%d/%Y %H:%M:%S"))
            except ValueError:
                continue
            if t >= int(since):
                out.append(line)
        return out

    def wait_accounting(self, job_id: str, record: str = "E", timeout: float = 60.0, since: float = 0.0) -> str:
        """Wait for the accounting record (``E`` by default) of ``job_id``; return its line."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.accounting_records(since=since):
                parts = line.split(";", 3)
                if len(parts) >= 3 and parts[1] == record and parts[2] == job_id:
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"no accounting record {record} for {job_id} after {timeout:.0f} s")
            time.sleep(0.5)


def require_server() -> PbsServer:
    """The testbed, or a skip (laptop) / failure (``CI=true``) with the reason."""
    PBS_TESTBED.require()
    return PbsServer()
