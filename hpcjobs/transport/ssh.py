"""Scheduler commands on a login node over one OpenSSH connection per command run.

The user's own ``ssh`` (its config, agent, keys and known_hosts) with ``BatchMode=yes``: hpcjobs never
asks for a password or a passphrase, and a host key ssh does not accept stops the command with ssh's own
message. The first command starts a ControlMaster (``ssh -M -N -f``, its socket in a private folder);
every command after it is one session over that connection (ssh(1) ``-S``), so a status poll costs one
round trip. :meth:`SshSession.close` stops the master; should hpcjobs die first, the master leaves by
itself after :data:`CONTROL_PERSIST_S` idle seconds.

A command reaches the remote as a bash script on the standard input of ``bash --login -s`` (the only words
the user's own login shell parses are those three, so a csh or fish login shell changes nothing; the login
profile runs first, as for a person's login, and what it prints is dropped: the script's output starts
after a random mark line it prints first, and an answer without the mark means the script never ran). Every word of the
script is written by the one shell encoder (:func:`hpcjobs.render.shellvalue.shell_word`), and the
script is one ``{ ... }`` group: bash runs nothing of it before it has read its closing brace, so a
connection cut while the script travels runs nothing at all.

An exit code of 255 is ssh's own failure (no connection, the connection lost): whether the command ran
is then unknown, and the error says so (``returncode=None``, as a timeout), which makes the sweep
submitter look the submission up by its tag instead of submitting again.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcjobs import process
from hpcjobs.errors import CommandError, ConfigError, HpcJobsError
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.transport.login import RemoteLogin

log = logging.getLogger("hpcjobs.transport")

#: Seconds the ControlMaster stays after its last session when hpcjobs did not stop it (a crash).
CONTROL_PERSIST_S = 300
#: Seconds to wait for the connection (authentication included).
CONNECT_TIMEOUT_S = 30
#: ssh's exit code for its own failures (ssh(1), EXIT STATUS).
SSH_FAILED = 255

#: The shell the scripts run in: a login shell, so the login node's profile puts its scheduler and module
#: commands on ``PATH`` as for an interactive login; it reads the script from standard input.
REMOTE_SHELL = ("bash", "--login", "-s")

_ENV_NAME_OK = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


class RemoteConnectionError(CommandError):
    """ssh could not reach the login node, or lost it: whether the command ran there is unknown."""


class SshSession:
    """One login node, one ControlMaster, for the length of one hpcjobs command (a ``with`` block).

    Use it as :func:`hpcjobs.process.routed_to`'s runner: it takes :func:`~hpcjobs.process.run_command`'s
    arguments.
    """

    def __init__(self, login: RemoteLogin) -> None:
        self.login = login
        self._folder: Path | None = None
        self._home: str | None = None
        self._user: str | None = None
        #: Sessions opened over the connection (a benchmark's round-trip count), and masters started.
        self.sessions = 0
        self.masters = 0

    # -- the connection ------------------------------------------------------------------------------------

    @property
    def control_path(self) -> Path:
        """The master's socket (in a 0700 folder of this process)."""
        if self._folder is None:
            # short: a Unix socket path has at most 104-108 bytes (unix(7))
            base = "/tmp" if os.path.isdir("/tmp") else None
            self._folder = Path(tempfile.mkdtemp(prefix="hpcjobs-ssh-", dir=base))
        return self._folder / "cm"

    def ssh_argv(self, *extra: str) -> list[str]:
        """ssh with the login's options and the shared connection, up to (and with) the destination."""
        login = self.login
        argv = [login.ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3",
                "-o", f"ControlPath={self.control_path}"]
        if login.ssh_config:
            argv += ["-F", os.path.expanduser(login.ssh_config)]
        if login.port is not None:
            argv += ["-p", str(login.port)]
        for option in login.options:
            argv += ["-o", option]
        return [*argv, *extra, "--", login.target]

    def connect(self) -> None:
        """Start the ControlMaster (no-op while one is up).

        Raises:
            RemoteConnectionError: ssh could not log in (its message: unknown or changed host key,
                refused key, no route...).
        """
        if self._master_up():
            return
        path = self.control_path
        if path.exists() or path.is_symlink():
            path.unlink()
        argv = self.ssh_argv("-M", "-N", "-f", "-o", "ControlMaster=yes",
                             "-o", f"ControlPersist={CONTROL_PERSIST_S}")
        errors = path.with_name("connect.err")
        fd = os.open(errors, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        start = time.monotonic()
        try:
            # -f: ssh returns once logged in, leaving the master in the background; its output goes to a
            # file, not to pipes we read (it holds them as long as it lives)
            proc = process.start_process(argv, stdout=fd, stderr=fd, new_session=True)
            try:
                code = proc.wait(timeout=CONNECT_TIMEOUT_S + 10)
            except Exception:
                proc.kill()
                proc.wait()
                raise RemoteConnectionError(argv, None, "", "", reason=f"ssh did not log in to {self.login.target} "
                                            f"in {CONNECT_TIMEOUT_S + 10} s") from None
        finally:
            os.close(fd)
        message = errors.read_text(encoding="utf-8", errors="replace")
        if code != 0 or not self._master_up():
            raise RemoteConnectionError(argv, code, "", message,
                                        reason=f"ssh could not log in to {self.login.target}")
        self.masters += 1
        log.debug("ssh master to %s up in %.2fs", self.login.target, time.monotonic() - start)

    def _master_up(self) -> bool:
        if self._folder is None or not (self._folder / "cm").exists():
            return False
        result = process.run_here(self.ssh_argv("-O", "check"), timeout=10, check=False)
        return result.returncode == 0

    def close(self) -> None:
        """Stop the master and remove its folder (the connection's end)."""
        if self._folder is None:
            return
        if (self._folder / "cm").exists():
            try:
                process.run_here(self.ssh_argv("-O", "exit"), timeout=10, check=False)
            except HpcJobsError as exc:
                log.debug("ssh -O exit: %s", exc)
        shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = None

    def __enter__(self) -> SshSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- commands --------------------------------------------------------------------------------------------

    def __call__(self, argv: Sequence[str], *, timeout: float = process.DEFAULT_TIMEOUT_S,
                 input: str | bytes | None = None, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, check: bool = True,
                 max_stdout: int | None = process.LIMIT_IN_FORCE,
                 max_stderr: int | None = process.LIMIT_IN_FORCE) -> process.CommandResult:
        """Run ``argv`` on the login node (in ``cwd`` there, with ``env`` added); as :func:`process.run_command`.

        Raises:
            RemoteConnectionError: ssh failed: the command may or may not have run.
            CommandError: The command exited non-zero (with ``check``).
            CommandTimeout: No answer within ``timeout`` (the command may still run there).
        """
        script = command_script(argv, env=env, cwd=cwd, input=input)
        return self.run_script(script, shown=list(argv), timeout=timeout, check=check, max_stdout=max_stdout,
                               max_stderr=max_stderr)

    def run_script(self, script: str, *, shown: Sequence[str], timeout: float = process.DEFAULT_TIMEOUT_S,
                   check: bool = True, max_stdout: int | None = process.LIMIT_IN_FORCE,
                   max_stderr: int | None = process.LIMIT_IN_FORCE) -> process.CommandResult:
        """Run a bash script (from :func:`command_script` or this package's builders) in one session.

        ``shown`` is the command errors and logs name (the scheduler command, not the ssh line).
        """
        self.connect()
        argv = self.ssh_argv("-T", "-o", "ControlMaster=no")
        self.sessions += 1
        mark = f"hpcjobs-{secrets.token_hex(8)}"
        framed = f"{{\nprintf '%s\\n' {mark}\nprintf '%s\\n' {mark} >&2\n{script}}}\n"
        result = process.run_here([*argv, *REMOTE_SHELL], timeout=timeout, input=framed, check=False,
                                  max_stdout=max_stdout, max_stderr=max_stderr)
        if result.returncode == SSH_FAILED:
            raise RemoteConnectionError([*shown], None, result.stdout, result.stderr,
                                        reason=f"the SSH connection to {self.login.target} failed; the command "
                                               "may or may not have run there")
        stdout, ran = _after_mark(result.stdout, mark)
        stderr, _ = _after_mark(result.stderr, mark)
        if not ran:  # the script never ran whole (cut on the way; a login shell that exited early)
            raise RemoteConnectionError([*shown], None, result.stdout, result.stderr,
                                        reason=f"the script sent to {self.login.target} did not run there "
                                               f"(exit {result.returncode}); the command did not run")
        shown_result = process.CommandResult(tuple(shown), result.returncode, stdout, stderr,
                                             result.seconds, result.stdout_omitted, result.stderr_omitted)
        log.debug("%s: rc=%d %.3fs over ssh", self.login.target, result.returncode, result.seconds)
        if check and result.returncode != 0:
            raise CommandError([*shown], result.returncode, stdout, stderr,
                               stdout_omitted=result.stdout_omitted, stderr_omitted=result.stderr_omitted)
        return shown_result

    def home(self) -> str:
        """The remote ``$HOME`` (asked once per session, with :meth:`user`)."""
        self._identity()
        assert self._home is not None
        return self._home

    def user(self) -> str:
        """The login name on the login node (``id -un``: whose jobs the scheduler lists)."""
        self._identity()
        assert self._user is not None
        return self._user

    def _identity(self) -> None:
        if self._home is not None:
            return
        out = self.run_script('{\nprintf "%s\\n" "$HOME" && id -un\n}\n', shown=["id", "-un"], timeout=60).stdout
        home, _, user = out.strip().partition("\n")
        if not home.startswith("/") or not user.strip():
            raise ConfigError(f"{self.login.target}: the remote home and user are unreadable: {out!r}")
        self._home, self._user = home, user.strip()

    def absolute(self, path: str) -> str:
        """``path`` on the login node as an absolute path (``~/x`` and relative ``x``: in the remote home)."""
        if path.startswith("/"):
            return os.path.normpath(path)
        rest = path[2:] if path.startswith("~/") else ("" if path == "~" else path)
        return os.path.normpath(f"{self.home()}/{rest}") if rest else self.home()


def _after_mark(text: str, mark: str) -> tuple[str, bool]:
    """``text`` after the line ``mark`` (what a login profile printed before the script is dropped)."""
    line = mark + "\n"
    if text.startswith(line):
        return text[len(line):], True
    at = text.find("\n" + line)
    if at < 0:
        return text, False
    return text[at + 1 + len(line):], True


def command_script(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                   cwd: str | os.PathLike[str] | None = None, input: str | bytes | None = None) -> str:
    """The bash script that runs ``argv`` as :func:`hpcjobs.process.run_command` would, on the login node.

    Standard input is ``input`` (sent inside the script, base64, so the script stays one text) or
    ``/dev/null``; ``env`` is added with ``env --``.

    Raises:
        ConfigError: An environment name is not a shell name (it could not be set).
    """
    words = [shell_word(os.fspath(a)) for a in argv]
    if env:
        bad = [k for k in env if not k or not set(k) <= _ENV_NAME_OK or k[0] in "0123456789"]
        if bad:
            raise ConfigError(f"environment names {bad!r} cannot be set on the login node")
        words = ["env", "--", *(shell_word(f"{k}={v}") for k, v in env.items()), *words]
    lines = ["{"]
    if cwd is not None:
        lines.append(f"cd -- {shell_word(os.fspath(cwd))} || exit 1")
    if input is None:
        lines.append(" ".join(words) + " </dev/null")
    else:
        data = input.encode("utf-8") if isinstance(input, str) else input
        lines += [f"base64 -d <<'{(end := heredoc_end())}' | " + " ".join(words),
                  *base64_lines(data), end]
    lines.append("}")
    return "\n".join(lines) + "\n"


def heredoc_end() -> str:
    """A here-document delimiter no base64 line can equal."""
    return f"HPCJOBS_{secrets.token_hex(8)}_END"


def base64_lines(data: bytes, width: int = 76) -> list[str]:
    """``data`` as base64 lines (what ``base64 -d`` reads back)."""
    text = base64.b64encode(data).decode("ascii")
    return [text[i:i + width] for i in range(0, len(text), width)] or []


__all__ = ["CONTROL_PERSIST_S", "RemoteConnectionError", "SshSession", "base64_lines", "command_script",
           "heredoc_end"]
