"""Which login node a site is reached through: ``remote:`` in a site config, or ``--remote USER@HOST[:PORT]``.

The host may be an alias of the user's ``~/.ssh/config`` (its ``HostName``, ``User``, ``Port``,
``IdentityFile`` and ``ProxyJump`` apply, as they do for the user's own ``ssh``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs.errors import ConfigError

#: A host as ssh takes it: a name, an alias, an IPv4 address or a bracketless IPv6 address; never an option.
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:%-]*")
#: A login name as POSIX's portable user names, ``@`` excluded (ssh would split on it).
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: One ``-o`` option of ssh_config(5): ``Keyword=value`` or ``Keyword value``.
_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*[= ][^\x00-\x1f\x7f]+")

#: ``options`` keywords a site may not set: those that run a command on this machine (a site file is data,
#: not code), that would weaken the host key check or let ssh prompt, and the connection sharing hpcjobs
#: manages itself. The user's own ~/.ssh/config may set any of them (ssh_config(5)).
REFUSED_OPTIONS = frozenset({
    "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "pkcs11provider",
    "securitykeyprovider", "stricthostkeychecking", "userknownhostsfile", "globalknownhostsfile",
    "batchmode", "controlmaster", "controlpath", "controlpersist",
})

#: Where sweeps go on the login node unless the site says otherwise (relative: from the remote home).
DEFAULT_WORKDIR = "hpcjobs"


@dataclass(frozen=True)
class RemoteLogin:
    """A login node and how hpcjobs uses it.

    Attributes:
        host: The host or ``~/.ssh/config`` alias.
        user: Login name (default: ssh's choice, from ``~/.ssh/config`` or the local user).
        port: SSH port (default: ssh's choice).
        workdir: The folder on the login node that holds the sweeps (``<workdir>/hpcjobs-sweeps/<id>``)
            and that jobs are submitted from; relative paths and ``~/`` are from the remote home.
        ssh_config: An ssh_config(5) file used instead of ``~/.ssh/config`` (``ssh -F``).
        options: Extra ``-o`` options (``ProxyJump=bastion``...).
        ssh: The ssh program.
    """

    host: str
    user: str | None = None
    port: int | None = None
    workdir: str = DEFAULT_WORKDIR
    ssh_config: str | None = None
    options: tuple[str, ...] = field(default_factory=tuple)
    ssh: str = "ssh"

    def __post_init__(self) -> None:
        problems = login_problems(host=self.host, user=self.user, port=self.port, workdir=self.workdir,
                                  ssh_config=self.ssh_config, options=self.options, ssh=self.ssh)
        if problems:
            raise ConfigError("remote: " + "; ".join(problems))

    def cache_folder(self, base: Path) -> Path:
        """This login node's own folder under the accounting cache ``base``: windows of two clusters never mix."""
        key = hashlib.sha256(f"{self.target}\0{self.port or ''}".encode("utf-8", "surrogateescape")).hexdigest()
        return base / "remote" / key[:16]

    @property
    def target(self) -> str:
        """``user@host`` or ``host``, as ssh's destination argument."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def as_dict(self) -> dict[str, object]:
        """The fields as the ledger records them (plain JSON)."""
        return {"host": self.host, "user": self.user, "port": self.port, "workdir": self.workdir,
                "ssh_config": self.ssh_config, "options": list(self.options), "ssh": self.ssh}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RemoteLogin:
        """The login a ledger recorded (:meth:`as_dict`).

        Raises:
            ConfigError: A field is missing or of the wrong kind.
        """
        try:
            port = data.get("port")
            return cls(host=str(data["host"]), user=None if data.get("user") is None else str(data["user"]),
                       port=None if port is None else int(str(port)),
                       workdir=str(data.get("workdir") or DEFAULT_WORKDIR),
                       ssh_config=None if data.get("ssh_config") is None else str(data["ssh_config"]),
                       options=tuple(str(o) for o in data.get("options") or ()),  # type: ignore[union-attr]
                       ssh=str(data.get("ssh") or "ssh"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the recorded remote login is unreadable ({exc}): {data!r}") from None


def login_problems(*, host: str, user: str | None = None, port: int | None = None, workdir: str = DEFAULT_WORKDIR,
                   ssh_config: str | None = None, options: tuple[str, ...] = (), ssh: str = "ssh") -> list[str]:
    """What is wrong with a login's fields (empty: nothing): a value that could become an ssh option, a bad port."""
    problems = []
    if not _HOST.fullmatch(host):
        problems.append(f"host {host!r} is not a host name, alias or address (letters, digits, '.', '-', "
                        "'_', ':' and '%'; not starting with '-')")
    if user is not None and not _USER.fullmatch(user):
        problems.append(f"user {user!r} is not a login name (letters, digits, '.', '-' and '_')")
    if port is not None and not 0 < port < 65536:
        problems.append(f"port {port} is not between 1 and 65535")
    if not workdir or "\x00" in workdir or "\n" in workdir:
        problems.append(f"workdir {workdir!r} is not a folder name")
    if ssh_config is not None and ("\x00" in ssh_config or not ssh_config):
        problems.append(f"ssh_config {ssh_config!r} is not a file name")
    for option in options:
        if not _OPTION.fullmatch(option):
            problems.append(f"option {option!r} is not an ssh_config option (Keyword=value)")
        elif re.split(r"[= ]", option, maxsplit=1)[0].lower() in REFUSED_OPTIONS:
            problems.append(f"option {option!r} is not one a site may set (it runs a local command, weakens the "
                            "host key check, or is hpcjobs' own); set it in your ~/.ssh/config if you must")
    if not ssh or ssh.startswith("-"):
        problems.append(f"ssh {ssh!r} is not a program")
    return problems


def parse_remote_option(text: str, *, workdir: str | None = None) -> RemoteLogin:
    """``--remote [USER@]HOST[:PORT]`` as a :class:`RemoteLogin`.

    Raises:
        ConfigError: Not of that form.
    """
    user, at, rest = text.rpartition("@")
    if at and not user:
        raise ConfigError(f"--remote {text!r}: a login name must come before '@'")
    host, port = rest, None
    if rest.count(":") == 1:  # an IPv6 address has several colons and takes no port here
        host, _, port_text = rest.partition(":")
        if not re.fullmatch(r"[0-9]{1,5}", port_text):
            raise ConfigError(f"--remote {text!r}: the port after ':' must be a number")
        port = int(port_text)
    return RemoteLogin(host=host, user=user or None, port=port, workdir=workdir or DEFAULT_WORKDIR)


__all__ = ["DEFAULT_WORKDIR", "REFUSED_OPTIONS", "RemoteLogin", "login_problems", "parse_remote_option"]
