"""Where scheduler commands run: here, or on a login node over SSH.

A library call that talks to a scheduler opens a :func:`scope`; inside it, once the site (or a sweep's
ledger) names a login node (:func:`use`), every command :func:`hpcjobs.process.run_command` runs goes
over one SSH connection to it (:class:`~hpcjobs.transport.ssh.SshSession`), and the connection ends with
the scope. Without a login node nothing changes: commands run here. The scheduler backends never know
which: the transport is beneath the one subprocess seam.

Paths: a sweep's folder stays here (its ledger is the source of truth); the login node holds a copy of
what jobs read, at ``<workdir>/hpcjobs-sweeps/<sweep id>``, and jobs are submitted from ``<workdir>``
(:class:`RemotePlaces`). :func:`hpcjobs.transport.files.push` and :func:`~hpcjobs.transport.files.pull`
move the files.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from hpcjobs import process
from hpcjobs.errors import ConfigError
from hpcjobs.transport.login import RemoteLogin

#: The folder under a remote workdir that holds sweep folders (as ``hpcjobs-sweeps/`` here).
REMOTE_SWEEPS = "hpcjobs-sweeps"


@dataclass(frozen=True)
class RemotePlaces:
    """Where a sweep lives on the login node (absolute paths there).

    Attributes:
        login: The login node.
        workdir: Jobs are submitted from here; relative output folders are under it.
        folder: The sweep folder's copy.
        user: The login name there (whose jobs the scheduler lists).
    """

    login: RemoteLogin
    workdir: str
    folder: str
    user: str

    def in_workdir(self, path: str) -> str:
        """``path`` (a job's output folder, say) on the login node: absolute as given, else under the workdir."""
        return path if path.startswith("/") else f"{self.workdir}/{path}"

    def as_dict(self) -> dict[str, Any]:
        """As the ledger records it."""
        return {**self.login.as_dict(), "remote_workdir": self.workdir, "remote_folder": self.folder,
                "remote_user": self.user}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemotePlaces:
        """What :meth:`as_dict` wrote.

        Raises:
            ConfigError: The record is incomplete.
        """
        try:
            return cls(RemoteLogin.from_dict(dict(data)), str(data["remote_workdir"]), str(data["remote_folder"]),
                       str(data["remote_user"]))
        except KeyError as exc:
            raise ConfigError(f"the recorded remote places lack {exc}: {dict(data)!r}") from None


class _Scope:
    """The transport of one library call: local until :func:`use` names a login node."""

    def __init__(self) -> None:
        self.session: Any = None  # SshSession, imported only when a login node is named

    @property
    def remote(self) -> bool:
        """Whether commands go to a login node (:func:`hpcjobs.process.routed`)."""
        return self.session is not None

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> process.CommandResult:
        if self.session is None:
            return process.run_here(argv, **kwargs)
        result: process.CommandResult = self.session(argv, **kwargs)
        return result


_scope: ContextVar[_Scope | None] = ContextVar("hpcjobs_transport_scope", default=None)


@contextmanager
def scope() -> Iterator[None]:
    """The span of one library call: an SSH connection :func:`use` opens inside it ends with it.

    Nested scopes share the outer one's connection.
    """
    if _scope.get() is not None:
        yield
        return
    holder = _Scope()
    token = _scope.set(holder)
    try:
        with process.routed_to(holder):
            yield
    finally:
        _scope.reset(token)
        if holder.session is not None:
            holder.session.close()


def use(login: RemoteLogin | None) -> Any:
    """Send this scope's scheduler commands to ``login`` (``None``: leave them here). Returns the session.

    Outside a :func:`scope` a connection would outlive its command: refused.
    """
    if login is None:
        return None
    holder = _scope.get()
    if holder is None:
        raise RuntimeError("hpcjobs.transport.use() outside a transport scope")
    from hpcjobs.transport.ssh import SshSession

    if holder.session is None or holder.session.login != login:
        if holder.session is not None:
            holder.session.close()
        holder.session = SshSession(login)
    return holder.session


def session() -> Any:
    """The SSH session of this scope, or ``None`` (commands run here)."""
    holder = _scope.get()
    return None if holder is None else holder.session


def current_login() -> RemoteLogin | None:
    """The login node this scope's scheduler commands go to, or ``None`` (this machine's scheduler)."""
    ssh = session()
    return None if ssh is None else ssh.login  # type: ignore[no-any-return]


def places_for(login: RemoteLogin, sweep_id: str, local_folder: str | os.PathLike[str]) -> RemotePlaces:
    """Where sweep ``sweep_id`` (whose ledger is ``local_folder`` here) goes on ``login``.

    ``<workdir>/hpcjobs-sweeps/<sweep id>.<12 hex>``: the suffix names this machine and folder, so the same
    experiment swept from two laptops (or two folders) never shares run folders there. Asks the remote home
    and user once.
    """
    ssh = use(login)
    workdir = ssh.absolute(login.workdir)
    origin = f"{socket.gethostname()}\0{os.path.abspath(local_folder)}".encode("utf-8", "surrogateescape")
    suffix = hashlib.sha256(origin).hexdigest()[:12]
    return RemotePlaces(login, workdir, f"{workdir}/{REMOTE_SWEEPS}/{sweep_id}.{suffix}", ssh.user())


__all__ = ["REMOTE_SWEEPS", "RemoteLogin", "RemotePlaces", "current_login", "places_for", "scope",
           "session", "use"]
