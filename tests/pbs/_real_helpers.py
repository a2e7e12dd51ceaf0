"""Helpers of the single-job and report tests against the real OpenPBS testbed.

The command line runs as a subprocess (``python -m hpcjobs``) of this checkout with
``$HPCJOBS_PBS_BIN`` pointing at PBS's own clients, or at a folder of wrappers that log every call
and then run PBS's client (to count scheduler calls of a command). Jobs are rendered for
``tests/sites/openpbs-testbed.yaml``, the site config of the testbed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from real_testbed import wait_for

from pbs.real import PBS_EXEC, pbs

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "tests" / "sites" / "openpbs-testbed.yaml"
EXAMPLES = REPO / "examples"
CLI_TIMEOUT_S = 120.0


def cli(args: Sequence[str], *, cwd: Path, pbs_bin: Path | None = None,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hpcjobs ARGS`` of this checkout, run in ``cwd`` (the submit directory)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "HPCJOBS_PBS_BIN": str(pbs_bin or PBS_EXEC / "bin"),
                "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, check=False)


def cli_json(args: Sequence[str], *, cwd: Path, pbs_bin: Path | None = None) -> Any:
    """The JSON a ``--json`` command printed (the command must exit 0)."""
    proc = cli(args, cwd=cwd, pbs_bin=pbs_bin)
    assert proc.returncode == 0, f"hpcjobs {shlex.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return json.loads(proc.stdout)


def logging_pbs_bin(folder: Path) -> tuple[Path, Path]:
    """A folder of ``qsub``/``qstat``/``qdel`` wrappers that log their argv and run PBS's own client.

    Returns:
        ``(bin folder, log file)``; the log holds one line per call, the arguments quoted.
    """
    bin_dir, log = folder / "logged-bin", folder / "pbs-calls.log"
    bin_dir.mkdir()
    log.touch()
    for name in ("qsub", "qstat", "qdel"):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/bash\nprintf \'%s\\n\' "{name} $*" >> {shlex.quote(str(log))}\n'
                           f'exec {shlex.quote(str(PBS_EXEC / "bin" / name))} "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir, log


def logged_calls(log: Path, name: str) -> list[str]:
    """The logged calls of client ``name``."""
    return [line for line in log.read_text().splitlines() if line.split(" ", 1)[0] == name]


def server_jobs(*job_ids: str) -> dict[str, dict[str, Any]]:
    """``qstat -E -x -f -F json -t`` of ``job_ids``: ``{id: attributes}`` of every job and subjob.

    ``-E`` asks for all ids in one request: without it OpenPBS 23.06 prints only the first id's job
    in JSON (``PbsServer.jobs`` of several ids has that problem).
    """
    out = pbs(["qstat", "-E", "-x", "-f", "-F", "json", "-t", *job_ids], check=False).stdout
    return dict(json.loads(out).get("Jobs", {})) if out.strip() else {}


def wait_final(job_ids: Sequence[str], timeout: float = 300.0) -> dict[str, dict[str, Any]]:
    """Wait until every job (and each array's subjobs) is in state F; return their attributes."""
    def final() -> dict[str, dict[str, Any]] | None:
        info = server_jobs(*job_ids)
        done = all(j in info for j in job_ids) and all(a.get("job_state") == "F" for a in info.values())
        return info if done else None

    return wait_for(f"jobs {', '.join(job_ids)} in state F", final, timeout)


def jobs_named(name: str) -> list[str]:
    """Ids of every job (history included) named ``name`` on the server."""
    out = pbs(["qstat", "-x", "-f", "-F", "json"], check=False).stdout
    jobs = json.loads(out).get("Jobs", {}) if out.strip() else {}
    return [jid for jid, attrs in jobs.items() if attrs.get("Job_Name") == name]


def pbs_directives(script: str) -> list[tuple[str, str]]:
    """``(option, value)`` of every ``#PBS`` line of a script (``-l select=...`` → ``("-l", "select=...")``)."""
    out = []
    for line in script.splitlines():
        if line.startswith("#PBS "):
            option, _, value = line[len("#PBS "):].strip().partition(" ")
            out.append((option, value.strip()))
    return out


def qdel_quietly(job_ids: Sequence[str]) -> None:
    """Delete these (our own) jobs, ignoring ids that already finished."""
    if job_ids:
        pbs(["qdel", *job_ids], check=False)
