"""The typed error family of hpcjobs.

Library code raises these and never prints or exits; only :mod:`hpcjobs.cli`
turns them into messages and exit codes (2 bad input, 1 scheduler/command
failure, 3 unexpected bug).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Most bytes (UTF-8) of a command's stderr, and likewise of its stdout, that an error keeps and shows.
MESSAGE_EXCERPT_BYTES = 64 * 1024

#: Most bytes of a scheduler's unreadable output shown with a parse error.
PARSE_EXCERPT_BYTES = 4 * 1024

#: Unicode categories :func:`terminal_text` shows escaped: controls (C0, DEL, C1), format characters (bidi
#: overrides and isolates, zero-width joiners, soft hyphen...), lone surrogates, line and paragraph separators.
TERMINAL_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def excerpt(text: str, limit: int = MESSAGE_EXCERPT_BYTES, *, omitted: int = 0) -> str:
    """``text`` cut to about ``limit`` bytes of UTF-8: its head and tail around ``... N bytes omitted ...``.

    Args:
        text: The text to shorten (a command's output, possibly already shortened).
        limit: Most bytes of ``text`` kept (half from the start, half from the end).
        omitted: Bytes already dropped from the middle of ``text`` before it got here (by
            :func:`hpcjobs.process.run_command`); added to the count in the marker.

    Returns:
        ``text`` itself when it fits, else the head, a marker line and the tail. The head and tail
        are cut on character boundaries, so the result is never longer than ``limit`` bytes plus
        the marker.
    """
    return _cut(text, limit, omitted)[0]


def _cut(text: str, limit: int, omitted: int = 0) -> tuple[str, int]:
    """:func:`excerpt` and the number of bytes it dropped (0 when ``text`` fits)."""
    if len(text) <= limit // 4:  # at most 4 bytes a character: surely fits, no need to encode
        return text, 0
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, 0
    half = limit // 2
    head = data[:half].decode("utf-8", "ignore")  # "ignore" drops only a character cut in two
    tail = data[len(data) - (limit - half):].decode("utf-8", "ignore")
    dropped = len(data) - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode("utf-8", "surrogatepass"))
    return f"{head}\n... {dropped + omitted} bytes omitted ...\n{tail}", dropped


def terminal_text(value: object, *, keep: str = "") -> str:
    """``str(value)`` as it may be shown on a terminal: every control or format character written as an escape.

    An escape sequence, a carriage return or a backspace in a value (a parameter, a metric, a job name
    from a saved sacct file, a scheduler's error text) could redraw the screen, hide what was printed
    before it or fake another line; a bidi override (U+202E) or isolate reorders what follows it. Each
    character of :data:`TERMINAL_ESCAPED_CATEGORIES` is shown as Python writes it in a string literal:
    ``\\x1b`` below U+0100, ``\\u202e`` below U+10000, ``\\U000e0001`` above. Everything else (letters of
    every script, emoji, spaces of every kind) is kept.

    Args:
        value: What is shown (``str()`` of it).
        keep: Characters kept as they are where the layout puts them (``"\\n"`` in a message of
            several lines); a table cell keeps none.

    Returns:
        The text, unchanged when it holds nothing to escape (the common case costs one
        :meth:`str.isprintable`).
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return _MAYBE_ESCAPED_RE.sub(lambda m: _escaped(m.group(), keep), text)


#: Every character that may be escaped (ASCII controls and DEL, and all of non-ASCII): the callback decides.
_MAYBE_ESCAPED_RE = re.compile("[\x00-\x1f\x7f-\U0010ffff]")


def _escaped(ch: str, keep: str) -> str:
    """``ch`` escaped when :func:`terminal_text` shows it escaped, else ``ch``."""
    import unicodedata

    if ch in keep or ch.isprintable() or unicodedata.category(ch) not in TERMINAL_ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with control and format characters other than newline and tab shown escaped (:func:`terminal_text`).

    Scheduler output is shown on a terminal: an escape sequence or a carriage return in it must
    not redraw the screen or hide the lines before it.
    """
    return terminal_text(text, keep="\n\t")


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


class IdArgumentError(ConfigError):
    """An id given on the command line that cannot name one thing: empty, blank, a prefix too short
    (:data:`hpcjobs.ids.MIN_PREFIX`) or ambiguous (the candidates are the problem's ``choices``)."""

    def __init__(self, message: str, *, key: str | None = None, choices: Sequence[str] = ()) -> None:
        super().__init__(ConfigProblem(message, key=key, choices=tuple(choices)))


class UnsafeValueError(ConfigError):
    """A value read from a file or a command's output (a ledger's job id, a cache, an index) that does not
    follow its grammar, so it is not passed to a command: it could be taken as an option.

    Attributes:
        value: The value (shown with ``repr``).
        what: What it should have been (``Slurm job id``).
        source: The file (or command) it came from, when known.
    """

    def __init__(self, value: object, *, what: str, expected: str, source: str | None = None) -> None:
        self.value = value
        self.what = what
        self.source = source
        super().__init__(ConfigProblem(f"{excerpt(repr(value), 512)} is not a {what}: not passed to any command",
                                       file=source, expected=expected))


class SubmitError(HpcJobsError):
    """A submission could not be made (after retries), or its outcome is unknown."""


class CommandError(HpcJobsError):
    """An external command failed: carries the argv, exit code, stdout and stderr.

    ``stdout`` and ``stderr`` are kept to :data:`MESSAGE_EXCERPT_BYTES` each (head and tail around
    a ``... N bytes omitted ...`` line), so an error (and whatever stores it, such as the sweep
    ledger) stays small whatever the command printed; a job id on the last line of stdout is kept.

    Attributes:
        argv: The command and its arguments.
        returncode: Its exit code; ``None`` when it could not be started or was killed at its timeout.
        stdout: Its standard output (an excerpt when long).
        stderr: Its standard error (an excerpt when long).
        reason: Why it failed when not an exit code ("timed out after 60 s", "could not be started").
        stdout_omitted: Bytes of stdout not kept (0 when all of it is there).
        stderr_omitted: Bytes of stderr not kept.
    """

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        *,
        reason: str | None = None,
        stdout_omitted: int = 0,
        stderr_omitted: int = 0,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.returncode = returncode
        self.stdout, out_dropped = _cut(stdout, MESSAGE_EXCERPT_BYTES, stdout_omitted)
        self.stderr, err_dropped = _cut(stderr, MESSAGE_EXCERPT_BYTES, stderr_omitted)
        self.stdout_omitted = stdout_omitted + out_dropped
        self.stderr_omitted = stderr_omitted + err_dropped
        self.reason = reason
        super().__init__(self._describe())

    @property
    def command(self) -> str:
        """The command line, shell-quoted (as one would type it)."""
        return shlex.join(self.argv)

    @property
    def stderr_excerpt(self) -> str:
        """Stderr as stored in records such as the sweep ledger (at most :data:`MESSAGE_EXCERPT_BYTES`)."""
        return self.stderr

    def _describe(self) -> str:
        if self.reason:
            head = f"command `{printable(self.command)}` {self.reason}"
        else:
            head = f"command `{printable(self.command)}` exited with code {self.returncode}"
        err, out = self.stderr.strip(), self.stdout.strip()
        parts = [head]
        if err:
            parts.append(f"stderr:\n{printable(err)}")
        if out:
            parts.append(f"stdout:\n{printable(out)}")
        return "\n".join(parts)


class CommandTimeout(CommandError):
    """An external command did not finish within its timeout (it may still have had an effect)."""


class ContainerPullError(SubmitError):
    """``containers.pull: submit`` could not fetch a job's image; nothing was submitted.

    Attributes:
        reference: The registry image.
        runtime: The runtime that fetched it.
        path: The image cache's file it was fetched into.
        error: The failed command (its exit status, stdout and stderr).
    """

    def __init__(self, reference: str, runtime: str, path: str, error: CommandError) -> None:
        self.reference, self.runtime, self.path, self.error = reference, runtime, path, error
        status = error.reason or f"exited with code {error.returncode}"
        parts = [f"could not fetch image {printable(reference)} with {runtime} into {printable(path)} before "
                 f"submitting (the site's containers.pull is submit): the fetch {status}; nothing was submitted"]
        if error.stderr.strip():
            parts.append(f"stderr:\n{printable(error.stderr.strip())}")
        super().__init__("\n".join(parts))


class SchedulerOutputError(HpcJobsError):
    """A scheduler printed something that does not follow its documented format.

    The parsers raise it knowing only the text; whoever ran the command attaches it with
    :meth:`with_command` (or the :func:`reading_output_of` context), and the message then shows
    the command line, its exit code and the start and end of what it printed.

    Attributes:
        problem: What is wrong with the output.
        argv: The command that printed it, once known.
        returncode: That command's exit code, once known.
        output: An excerpt of what it printed (at most :data:`PARSE_EXCERPT_BYTES`).
    """

    def __init__(self, problem: str, *, argv: Sequence[str] | None = None, returncode: int | None = None,
                 output: str | None = None) -> None:
        self.problem = problem
        self.argv: list[str] | None = None
        self.returncode: int | None = None
        self.output: str | None = None
        super().__init__(problem)
        if argv is not None:
            self.with_command(argv, returncode=returncode, output=output)

    def with_command(self, argv: Sequence[str], *, returncode: int | None = None,
                     output: str | None = None) -> SchedulerOutputError:
        """Record the command whose output could not be read (the first one recorded stays) and return ``self``."""
        if self.argv is None:
            self.argv = [str(a) for a in argv]
            self.returncode = returncode
            self.output = None if output is None else excerpt(output, PARSE_EXCERPT_BYTES)
            self.args = (self._describe(),)
        return self

    def _describe(self) -> str:
        text = printable(excerpt(self.problem, PARSE_EXCERPT_BYTES))
        if self.argv is None:
            return text
        code = "" if self.returncode is None else f" (exit code {self.returncode})"
        parts = [f"could not read the output of `{printable(shlex.join(self.argv))}`{code}: {text}"]
        if self.output is not None and self.output.strip():
            parts.append(f"output:\n{printable(self.output.strip())}")
        return "\n".join(parts)


@contextmanager
def reading_output_of(argv: Sequence[str], output: str | None = None,
                      returncode: int | None = None) -> Iterator[None]:
    """Attach the command to any :class:`SchedulerOutputError` raised while parsing its output.

    Example::

        with reading_output_of(result.argv, result.stdout, result.returncode):
            job_id = backend.parse_submit(result.stdout)
    """
    try:
        yield
    except SchedulerOutputError as exc:
        exc.with_command(argv, returncode=returncode, output=output)
        raise


class LedgerError(HpcJobsError):
    """The sweep ledger is missing, locked by another process, or inconsistent."""


class UnsafePathError(HpcJobsError):
    """A file or folder hpcjobs would write or read is a symbolic link, a FIFO, a device or points outside.

    A sweep folder unpacked from a tarball, or one in a shared project folder, may hold a link where
    hpcjobs expects its own file (``lock -> ~/.bashrc``); hpcjobs never writes through it.
    """


class NotJsonError(HpcJobsError):
    """``--json`` output would hold a value strict JSON (RFC 8259) cannot write: NaN or an infinity.

    Nothing is printed; the message names where the value is (``point_list.0.params.lr``).
    """


class FileSystemError(HpcJobsError):
    """The file system refused a file or folder hpcjobs was told to use: no space left, over quota, read-only,
    permission denied, an I/O error (exit code 1: the environment, not the request, has to change).

    A path that cannot name a usable file at all (a name over 255 bytes, a part that is not a folder, a
    FIFO where a file is written) is bad input instead: a :class:`ConfigError` naming the option or key.

    Attributes:
        path: The file or folder.
        reason: What the file system said (``No space left on device``).
        errno: The error number, when the refusal came from the operating system.
    """

    def __init__(self, path: object, reason: str, *, advice: str = "", errno: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.errno = errno
        super().__init__(f"{self.path}: {reason}" + (f"; {advice}" if advice else ""))
