"""Helpers shared by the names/policy and secrets tests: run the CLI, check a refusal, run bash."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from hpcjobs.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
SITES = ROOT / "tests" / "sites"


@dataclass
class CliResult:
    """Exit code and everything the command printed (stdout and stderr together)."""

    code: int
    output: str


def cli(*args: str) -> CliResult:
    """Run ``hpcjobs ARGS`` in this process (real exit codes through ``sys.exit``)."""
    result = CliRunner().invoke(main, list(args))
    return CliResult(result.exit_code, result.output)


def assert_refused(result: CliResult, file: Path | str, *needles: str) -> None:
    """Exit 2, a ``file:line`` location, no traceback, and each needle in the message."""
    assert result.code == 2, result.output
    assert "Traceback" not in result.output and "unexpected error" not in result.output, result.output
    assert re.search(re.escape(str(file)) + r":\d+", result.output), result.output
    for needle in needles:
        assert needle in result.output, (needle, result.output)


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` and return the path."""
    path.write_text(text, encoding="utf-8")
    return path


def bash_n(text: str) -> subprocess.CompletedProcess[str]:
    """``bash -n`` on a script's text (a real bash)."""
    return subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, check=False)


def run_bash(script: Path, *, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a rendered script with a real bash."""
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False, env=env, cwd=cwd,
                          timeout=120)


def sbatch_directives(text: str) -> list[str]:
    """The ``#SBATCH`` lines sbatch reads: those before the first line that is neither comment nor blank."""
    out = []
    for line in text.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            out.append(line)
        elif line.strip() and not line.startswith("#"):
            break
    return out
