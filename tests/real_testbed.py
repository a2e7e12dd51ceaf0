"""What every real-testbed suite shares: the answer-or-skip rule, waiting, and running a client.

The Slurm, OpenPBS, Docker Swarm and Kubernetes suites each describe their testbed as a
:class:`Testbed` (its name, how a person starts it, and a probe that says why it cannot be used) and
take it through one session fixture. When the probe finds a problem, :meth:`Testbed.require` skips
with the start command on a laptop and *fails* under ``CI=true``: a missing scheduler is never a
silent skip in CI. Polls go through :func:`wait_for`, which returns the first true value the check
gives and fails with what it waited for; clients run through :func:`client`, that is through
:func:`hpcjobs.process.run_command`, the product's own subprocess seam.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import pytest

from hpcjobs.errors import HpcJobsError
from hpcjobs.process import CommandResult, run_command

T = TypeVar("T")


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``), where a testbed that does not answer is a failure."""
    return os.environ.get("CI", "").lower() == "true"


@dataclass(frozen=True)
class Testbed:
    """One real testbed: ``probe()`` returns why it cannot be used, or ``None`` when it answers."""

    name: str
    start_command: str
    probe: Callable[[], str | None]

    @property
    def start_hint(self) -> str:
        """The sentence a skip or a failure gives: which testbed, and the command that starts it."""
        return f"no {self.name} testbed: run `{self.start_command}`"

    def problem(self) -> str | None:
        """The probe's answer; a client that cannot run at all (not installed, timed out) is a problem too."""
        try:
            return self.probe()
        except HpcJobsError as exc:
            return str(exc)

    def require(self) -> None:
        """Return when the testbed answers; otherwise skip (laptop) or fail (``CI=true``) with the reason."""
        problem = self.problem()
        if problem is None:
            return
        if in_ci():
            pytest.fail(f"CI=true but the {self.name} testbed does not answer ({problem}); {self.start_hint}")
        pytest.skip(f"{self.start_hint} ({problem})")


def client(argv: Sequence[str], *, timeout: float = 60.0, check: bool = True,
           env: Mapping[str, str] | None = None) -> CommandResult:
    """Run one testbed client (``squeue``, ``qstat``, ``docker``, ``kubectl`` ...) through the subprocess seam."""
    return run_command(list(argv), timeout=timeout, check=check, env=dict(env) if env is not None else None)


def wait_for(what: str, check: Callable[[], T], timeout: float = 120.0, every: float = 0.5) -> T:
    """Call ``check()`` until it returns something true, and return that value.

    Raises:
        AssertionError: ``timeout`` seconds passed first; the message names ``what`` was awaited.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s")
        time.sleep(every)


#: The lock a test that stages a Slurm testbed outage (accounting down, MinJobAge lowered) holds exclusively,
#: and a test in another pytest process that needs the Slurm testbed whole holds shared (``scripts/test.sh``
#: runs the SSH tests beside the Slurm tests).
SLURM_STAGING_LOCK = "/tmp/hpcjobs-slurm-staging.lock"


_held: list[int] = []  # this process's descriptor of the lock, while held (flock is per open file)


@contextmanager
def slurm_staging(*, exclusive: bool) -> Iterator[None]:
    """Hold :data:`SLURM_STAGING_LOCK`: exclusive while staging an outage, shared while needing none.

    Nested uses in one process (an outage inside a lowered MinJobAge) hold it once.
    """
    import fcntl

    if _held:
        yield
        return
    fd = os.open(SLURM_STAGING_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        _held.append(fd)
        yield
    finally:
        if fd in _held:
            _held.remove(fd)
        os.close(fd)
