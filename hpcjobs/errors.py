"""The typed error family of hpcjobs.

Library code raises these and never prints or exits; only :mod:`hpcjobs.cli`
turns them into messages and exit codes (2 bad input, 1 scheduler/command
failure, 3 unexpected bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


class HpcJobsError(Exception):
    """Base class of every error hpcjobs raises on purpose."""

    exit_code: int = 1


@dataclass
class ConfigProblem:
    """One problem found in a configuration file.

    Attributes:
        message: What is wrong, in words a person can act on.
        file: The file the problem is in, if known.
        line: 1-based line of the offending key or value, if known.
        column: 1-based column, if known.
        key: Dotted path of the offending key (``resources.gpus_per_node``).
        expected: What would have been accepted.
        choices: The valid choices, when there is a closed set.
    """

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    key: str | None = None
    expected: str | None = None
    choices: Sequence[str] = field(default_factory=tuple)

    def location(self) -> str:
        """``file:line:column`` as far as it is known (may be empty)."""
        parts = [p for p in (self.file, self.line, self.column) if p is not None]
        return ":".join(str(p) for p in parts)

    def __str__(self) -> str:
        head = self.location()
        text = f"{head}: " if head else ""
        if self.key:
            text += f"{self.key}: "
        text += self.message
        if self.expected:
            text += f" (expected {self.expected})"
        if self.choices:
            text += "; valid choices: " + ", ".join(self.choices)
        return text


class ConfigError(HpcJobsError):
    """Bad input: a configuration file, a command-line value or a request a site cannot satisfy."""

    exit_code = 2

    def __init__(self, problems: ConfigProblem | str | Sequence[ConfigProblem]) -> None:
        if isinstance(problems, str):
            problems = [ConfigProblem(problems)]
        elif isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class SubmitError(HpcJobsError):
    """A submission could not be made (after retries), or its outcome is unknown."""


class CommandError(HpcJobsError):
    """An external command failed: carries the argv, exit code, stdout and stderr."""

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        *,
        reason: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.reason = reason
        super().__init__(self._describe())

    def _describe(self) -> str:
        import shlex

        cmd = shlex.join(self.argv)
        if self.reason:
            head = f"command `{cmd}` {self.reason}"
        else:
            head = f"command `{cmd}` exited with code {self.returncode}"
        detail = self.stderr.strip() or self.stdout.strip()
        return f"{head}\n{detail}" if detail else head


class CommandTimeout(CommandError):
    """An external command did not finish within its timeout (it may still have had an effect)."""


class SchedulerOutputError(HpcJobsError):
    """A scheduler printed something that does not follow its documented format."""


class LedgerError(HpcJobsError):
    """The sweep ledger is missing, locked by another process, or inconsistent."""
