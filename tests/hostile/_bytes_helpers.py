"""Fake schedulers as small shell scripts first on ``PATH``, and a driver that runs the real CLI in a
child Python process and reports its exit code, its stderr and its peak memory (VmHWM).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLURM_SITE = ROOT / "tests" / "sites" / "hpctest.yaml"
HELLO = ROOT / "examples" / "hello.yaml"

#: 100 MB, as in the review that found the unbounded reads.
HUNDRED_MB = 100_000_000

#: Runs the CLI in this process, then writes the exit code and peak RSS as JSON to ``$RESULT``. The peak is
#: VmHWM of this process's own address space: ``ru_maxrss`` would also count the RSS of the (large) pytest
#: process this child was forked from, which Linux carries across fork and exec.
_DRIVER = """
import json, os, sys
import hpcjobs.schedulers.client as client
client.SUBMIT_TIMEOUT_S = float(sys.argv[1])
from hpcjobs.cli import main
try:
    main(sys.argv[2:], prog_name="hpcjobs")
    rc = 0
except SystemExit as exc:
    rc = exc.code if isinstance(exc.code, int) else 1
sys.stdout.flush(); sys.stderr.flush()
with open(os.environ["RESULT"], "w") as f:
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    json.dump({"rc": rc, "maxrss_kib": int(hwm.split()[1])}, f)
"""


def fake_bin(folder: Path, **scripts: str) -> Path:
    """Write each ``name=body`` as an executable ``#!/bin/bash`` script in ``folder/bin``; return that folder."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def path_with(bin_dir: Path) -> str:
    """``PATH`` with ``bin_dir`` first."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@dataclass
class CliRun:
    """What one CLI run in a child process did."""

    rc: int
    stdout: bytes
    stderr: bytes
    maxrss_mib: float

    @property
    def err_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def run_cli(tmp_path: Path, bin_dir: Path, *args: str, submit_timeout: float = 60.0,
            env: dict[str, str] | None = None) -> CliRun:
    """Run ``hpcjobs ARGS`` in a child Python with ``bin_dir`` first on ``PATH``, in ``tmp_path``.

    An ambiguous submit answer is looked up by its token once (``HPCJOBS_SUBMIT_LOOKUP_S=0``, unless
    ``env`` says otherwise): a fake scheduler never queues a job late.
    """
    result_file = tmp_path / "cli-result.json"
    full_env = {**os.environ, "PATH": path_with(bin_dir), "RESULT": str(result_file), "PYTHONPATH": str(ROOT),
                "COLUMNS": "120", "HPCJOBS_SWEEP_ROOT": str(tmp_path / "sweeps"), "HPCJOBS_SUBMIT_LOOKUP_S": "0",
                **(env or {})}
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(submit_timeout), *args], cwd=tmp_path, env=full_env,
                          capture_output=True, timeout=300)
    assert result_file.exists(), proc.stderr.decode("utf-8", "replace")[-3000:]
    info = json.loads(result_file.read_text())
    return CliRun(info["rc"], proc.stdout, proc.stderr, info["maxrss_kib"] / 1024)
