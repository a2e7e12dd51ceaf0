"""The one place hpcjobs runs external commands.

Every scheduler call (``sbatch``, ``sacct``, ``qsub`` ...) goes through
:func:`run_command`: argument lists only (never ``shell=True``), a timeout,
and a debug log line. Tests fake a scheduler by replacing this seam
(``monkeypatch.setattr(hpcjobs.process, "run_command", fake)``) or by putting
fake executables on ``PATH``.
"""

from __future__ import annotations

import codecs
import logging
import os
import selectors
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from hpcjobs.errors import CommandError, CommandTimeout

log = logging.getLogger("hpcjobs.process")

DEFAULT_TIMEOUT_S = 60.0

#: Bytes of a command's stdout kept in memory by default (half from the start, half from the end).
#: Enough for any submit, cancel or limits answer and for the status of tens of thousands of jobs;
#: callers that read bulk data (``sacct`` for reports) lift it with :func:`output_limits`.
DEFAULT_MAX_STDOUT = 8 * 1024 * 1024

#: Bytes of a command's stderr kept in memory by default (messages show at most 64 KiB of it).
DEFAULT_MAX_STDERR = 1024 * 1024

#: Passed as ``max_stdout``/``max_stderr``: use the limits in force (see :func:`output_limits`).
LIMIT_IN_FORCE = -1

_READ_CHUNK = 65536
_PIPE_BUF = 512
_DRAIN_AFTER_KILL_S = 2.0  # after a timeout kill, how long output still in the pipes is read

_limits: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "hpcjobs_output_limits", default=(DEFAULT_MAX_STDOUT, DEFAULT_MAX_STDERR))


class CommandRunner(Protocol):
    """Where :func:`run_command` sends a command when a transport is in force (an SSH login node).

    The same arguments as :func:`run_command` with the limits settled; returns what it returned. A runner
    that cannot tell whether the command ran (a dropped connection) raises :class:`CommandError` with
    ``returncode=None``: ambiguous, as a timeout is.
    """

    def __call__(self, argv: Sequence[str], *, timeout: float, input: str | bytes | None,
                 env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None, check: bool,
                 max_stdout: int | None, max_stderr: int | None) -> CommandResult: ...


_route: ContextVar[CommandRunner | None] = ContextVar("hpcjobs_command_route", default=None)


@contextmanager
def routed_to(runner: CommandRunner | None) -> Iterator[None]:
    """Send the commands :func:`run_command` runs inside the ``with`` block to ``runner`` (``None``: run here).

    The transport seam (:mod:`hpcjobs.transport`): scheduler commands run on a login node over SSH through
    the same function as local ones, so every caller and every test fake of this seam stays as it is.
    """
    token = _route.set(runner)
    try:
        yield
    finally:
        _route.reset(token)


def routed() -> bool:
    """Whether commands are sent elsewhere now (a transport whose ``remote`` attribute is true, if it has one)."""
    route = _route.get()
    return route is not None and bool(getattr(route, "remote", True))


@contextmanager
def output_limits(stdout: int | None, stderr: int | None = DEFAULT_MAX_STDERR) -> Iterator[None]:
    """Set how much output :func:`run_command` keeps for the commands run inside the ``with`` block.

    A context rather than an argument so that every caller (and every test fake of the seam)
    keeps its signature: bulk readers wrap their calls, everything else gets the small default.

    Args:
        stdout: Most bytes of stdout kept (head and tail); ``None`` keeps all of it.
        stderr: Most bytes of stderr kept; ``None`` keeps all of it.
    """
    token = _limits.set((stdout, stderr))
    try:
        yield
    finally:
        _limits.reset(token)


@dataclass(frozen=True)
class CommandResult:
    """What a finished command returned.

    When a stream was longer than its limit, its text is the head and the tail around a line
    ``... N bytes omitted ...`` and ``stdout_omitted``/``stderr_omitted`` say how much is missing.
    Bytes that are not UTF-8 are decoded as U+FFFD; line endings are ``\\n``.
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    stdout_omitted: int = 0
    stderr_omitted: int = 0

    @property
    def truncated(self) -> bool:
        """Whether part of stdout or stderr was dropped."""
        return bool(self.stdout_omitted or self.stderr_omitted)


class _Capture:
    """One output stream read into memory with a bound: its first and last bytes, and a byte count."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.head_cap = None if limit is None else limit - limit // 2
        self.tail_cap = 0 if limit is None else limit // 2

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.head_cap is None:
            self.head += data
            return
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_cap:
            self.tail += data
            excess = len(self.tail) - self.tail_cap
            if excess > 0:
                del self.tail[:excess]  # cheap: CPython moves the start of a bytearray, not its bytes

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept bytes as text (UTF-8, bad bytes replaced, universal newlines)."""
        omitted = self.omitted
        if not omitted:
            head = self.head + self.tail if self.tail else self.head
            return _newlines(head.decode("utf-8", "replace"))
        # cut on character boundaries: an incomplete sequence at the end of the head and
        # continuation bytes at the start of the tail are part of the omitted middle
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        head_text = decoder.decode(bytes(self.head), final=False)
        skip = 0
        while skip < min(3, len(self.tail)) and self.tail[skip] & 0xC0 == 0x80:
            skip += 1
        tail_text = bytes(self.tail[skip:]).decode("utf-8", "replace")
        dropped = omitted + skip + len(self.head) - len(head_text.encode("utf-8", "surrogatepass"))
        return _newlines(f"{head_text}\n... {dropped} bytes omitted ...\n{tail_text}")


def _newlines(text: str) -> str:
    """Universal newlines, as ``subprocess`` gives in text mode."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def run_command(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
    max_stdout: int | None = LIMIT_IN_FORCE,
    max_stderr: int | None = LIMIT_IN_FORCE,
) -> CommandResult:
    """Run one external command and return its output.

    Output is decoded as UTF-8 with undecodable bytes replaced (U+FFFD), so no byte a scheduler
    prints can raise here. At most ``max_stdout``/``max_stderr`` bytes of each stream are kept
    (the first and last halves); the rest is read and counted, never held, so an endless or huge
    output costs no memory. A truncated stream is flagged in the result (and in the error).

    Args:
        argv: The command and its arguments (no shell is involved).
        timeout: Seconds before the command is killed and :class:`CommandTimeout` raised.
        input: Text (or bytes) sent to the command's standard input.
        env: Extra environment variables, layered over the current environment.
        cwd: Working directory.
        check: Raise :class:`CommandError` when the exit code is not 0.
        max_stdout: Bytes of stdout kept; ``None`` keeps everything; default: the limit in force
            (:data:`DEFAULT_MAX_STDOUT` unless :func:`output_limits` says otherwise).
        max_stderr: Bytes of stderr kept, likewise (:data:`DEFAULT_MAX_STDERR`).

    Raises:
        CommandError: The command could not be started, or exited non-zero with ``check``.
        CommandTimeout: The command ran past ``timeout``.
    """
    limit_out, limit_err = _limits_for(max_stdout, max_stderr)
    route = _route.get()
    if route is not None:
        return route([os.fspath(a) for a in argv], timeout=timeout, input=input, env=env, cwd=cwd, check=check,
                     max_stdout=limit_out, max_stderr=limit_err)
    return run_here(argv, timeout=timeout, input=input, env=env, cwd=cwd, check=check, max_stdout=limit_out,
                    max_stderr=limit_err)


def _limits_for(max_stdout: int | None, max_stderr: int | None) -> tuple[int | None, int | None]:
    """The bytes of stdout and stderr kept: those asked, else the limits in force (:func:`output_limits`)."""
    limit_out, limit_err = _limits.get()
    return (limit_out if max_stdout == LIMIT_IN_FORCE else max_stdout,
            limit_err if max_stderr == LIMIT_IN_FORCE else max_stderr)


def run_here(
    argv: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
    max_stdout: int | None = LIMIT_IN_FORCE,
    max_stderr: int | None = LIMIT_IN_FORCE,
) -> CommandResult:
    """:func:`run_command` on this machine, whatever transport is in force (ssh itself, ``bash -n``)."""
    args = [os.fspath(a) for a in argv]
    limit_out, limit_err = _limits_for(max_stdout, max_stderr)
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if input is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
        )
    except OSError as exc:
        raise CommandError(args, None, "", str(exc), reason=f"could not be started ({exc.strerror})") from exc
    out, err = _Capture(limit_out), _Capture(limit_err)
    try:
        data = input.encode("utf-8") if isinstance(input, str) else input
        timed_out = _communicate(proc, data, out, err,
                                 start + timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    seconds = time.monotonic() - start
    stdout, stderr = out.text(), err.text()
    if timed_out:
        log.debug("timeout after %.1fs: %s", timeout, shlex.join(args))
        raise CommandTimeout(args, None, stdout, stderr, reason=f"timed out after {timeout:g} s",
                             stdout_omitted=out.omitted, stderr_omitted=err.omitted)
    log.debug("rc=%d %.3fs: %s", proc.returncode, seconds, shlex.join(args))
    if out.omitted or err.omitted:
        log.info("kept part of the output of %s: %d bytes of stdout and %d of stderr omitted",
                    shlex.join(args), out.omitted, err.omitted)
    result = CommandResult(tuple(args), proc.returncode, stdout, stderr, seconds, out.omitted, err.omitted)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, stdout, stderr,
                           stdout_omitted=out.omitted, stderr_omitted=err.omitted)
    return result


#: :func:`run_command` for the local tools that are no scheduler (``bash -n`` parsing a site's scripts): always
#: run here (never over a transport), and bound once, so a test that replaces :func:`run_command` to fake a
#: scheduler (the seam) fakes only the scheduler.
run_local_tool = run_here


def _communicate(proc: subprocess.Popen[bytes], data: bytes | None, out: _Capture, err: _Capture,
                 deadline: float) -> bool:
    """Feed ``data`` to ``proc``, read its stdout and stderr into the captures, wait for it.

    Past ``deadline`` the process is killed and what is still in its pipes is read for a short
    while (a grandchild may keep them open: they are then closed on it). Returns whether it
    timed out; the process is always reaped.
    """
    assert proc.stdout is not None and proc.stderr is not None
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    view = memoryview(data or b"")
    offset = 0
    timed_out = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        if proc.stdin is not None:
            if view:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                if timed_out:
                    break
                timed_out = True
                proc.kill()
                deadline = now + _DRAIN_AFTER_KILL_S
                continue
            for key, _events in sel.select(deadline - now):
                stream = key.fileobj
                if stream is proc.stdin:
                    try:
                        offset += os.write(key.fd, view[offset:offset + _PIPE_BUF])
                    except BrokenPipeError:
                        offset = len(view)
                    if offset >= len(view):
                        sel.unregister(stream)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if chunk:
                    captures[key.fd].feed(chunk)
                else:
                    sel.unregister(stream)
                    stream.close()  # type: ignore[union-attr]
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()
    if not timed_out:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:  # closed its output but kept running
            timed_out = True
            proc.kill()
    proc.wait()
    return timed_out


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>; see prctl(2)


def start_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    pass_fds: Sequence[int] = (),
    new_session: bool = True,
    parent_death_signal: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-running command and return at once (the caller waits for it).

    The companion of :func:`run_command` for processes that outlive one call: the local site's
    points and its detached runner. Standard input is ``/dev/null``.

    Args:
        argv: The command and its arguments (no shell is involved).
        env: Extra environment variables, layered over the current environment.
        cwd: Working directory.
        stdout: File descriptor for standard output (default: inherited).
        stderr: File descriptor for standard error (default: inherited).
        pass_fds: Descriptors the command inherits (all others are closed).
        new_session: Start the command in its own session and process group (``setsid``), so
            that the process group with the command's pid holds it and everything it starts.
        parent_death_signal: On Linux, the signal the kernel sends the command when the thread
            that started it ends (``PR_SET_PDEATHSIG``, prctl(2)). Call from a thread that lives as
            long as the command may run. If this process is already gone when the child sets it,
            the child exits at once. Ignored where ``prctl`` is not available.

    Raises:
        CommandError: The command could not be started.
    """
    args = [os.fspath(a) for a in argv]
    full_env = {**os.environ, **env} if env else None
    preexec = _parent_death_preexec(parent_death_signal) if parent_death_signal else None
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=full_env, cwd=cwd,
                                pass_fds=tuple(pass_fds), start_new_session=new_session,
                                preexec_fn=preexec)  # preexec: one prctl call and getppid, nothing that locks
    except OSError as exc:
        raise CommandError(args, None, "", str(exc), reason=f"could not be started ({exc.strerror})") from exc
    log.debug("started pid %d: %s", proc.pid, shlex.join(args))
    return proc


def _parent_death_preexec(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to send ``sig`` to the child when its parent thread ends."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):  # not Linux
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(128 + sig)

    return preexec
