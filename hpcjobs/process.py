"""The one place hpcjobs runs external commands.

Every scheduler call (``sbatch``, ``sacct``, ``qsub`` ...) goes through
:func:`run_command`: argument lists only (never ``shell=True``), a timeout,
and a debug log line. Tests fake a scheduler by replacing this seam
(``monkeypatch.setattr(hpcjobs.process, "run_command", fake)``) or by putting
fake executables on ``PATH``.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcjobs.errors import CommandError, CommandTimeout

log = logging.getLogger("hpcjobs.process")

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CommandResult:
    """What a finished command returned."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_command(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
) -> CommandResult:
    """Run one external command and return its output.

    Args:
        argv: The command and its arguments (no shell is involved).
        timeout: Seconds before the command is killed and :class:`CommandTimeout` raised.
        input: Text sent to the command's standard input.
        env: Extra environment variables, layered over the current environment.
        cwd: Working directory.
        check: Raise :class:`CommandError` when the exit code is not 0.

    Raises:
        CommandError: The command could not be started, or exited non-zero with ``check``.
        CommandTimeout: The command ran past ``timeout``.
    """
    args = [os.fspath(a) for a in argv]
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            args,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        log.debug("timeout after %.1fs: %s", timeout, shlex.join(args))
        raise CommandTimeout(args, None, out, err, reason=f"timed out after {timeout:g} s") from exc
    except OSError as exc:
        raise CommandError(args, None, "", str(exc), reason=f"could not be started ({exc.strerror})") from exc
    seconds = time.monotonic() - start
    log.debug("rc=%d %.3fs: %s", proc.returncode, seconds, shlex.join(args))
    result = CommandResult(tuple(args), proc.returncode, proc.stdout, proc.stderr, seconds)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, proc.stdout, proc.stderr)
    return result
