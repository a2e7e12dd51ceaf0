"""Which ``qsub``/``qstat``/``qdel`` is PBS's own.

A machine can hold more than one ``qsub``: Debian's ``slurm-wlm-torque`` installs Slurm's PBS
wrappers as ``/usr/bin/qsub``, ``qstat`` and ``pbsnodes`` (Perl scripts that call ``sbatch`` and
``squeue``), and a PBS installation keeps its clients in ``$PBS_EXEC/bin`` (``/opt/pbs/bin`` by
default), which is often not on ``PATH``. The PBS Pro backend therefore looks, in this order:

1. ``$HPCJOBS_PBS_BIN``: a folder holding the PBS clients (what an admin or a test sets);
2. ``$PBS_EXEC/bin``, with ``PBS_EXEC`` from the environment or from PBS's own configuration file
   (``$PBS_CONF_FILE``, default ``/etc/pbs.conf``), as PBS's clients themselves read it;
3. ``/opt/pbs/bin``;
4. ``PATH``, skipping Slurm's wrappers.

The answer says where it came from (:func:`describe_pbs_commands`, shown by ``hpcjobs doctor``-style
output and in errors), and a machine with only Slurm's wrappers gets an error naming them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.errors import CommandError

#: Environment variable naming the folder of the PBS client commands.
PBS_BIN_ENV = "HPCJOBS_PBS_BIN"
DEFAULT_PBS_CONF = "/etc/pbs.conf"
DEFAULT_PBS_EXEC = "/opt/pbs"

#: Bytes read from the head of a candidate to recognise Slurm's Perl wrappers.
_HEAD_BYTES = 2048


@dataclass(frozen=True)
class LocatedCommand:
    """A client command found for a scheduler family.

    Attributes:
        name: The command asked for (``qsub``).
        path: The executable that will run.
        source: Why this one: ``$HPCJOBS_PBS_BIN``, ``PBS_EXEC in /etc/pbs.conf``, ``PATH`` ...
    """

    name: str
    path: str
    source: str


def is_slurm_wrapper(path: str | Path) -> bool:
    """Whether ``path`` is one of Slurm's PBS/Torque compatibility wrappers (a Perl script by SchedMD)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    return head.startswith(b"#!") and b"perl" in head.split(b"\n", 1)[0] and b"Slurm" in head


def _pbs_exec_from_conf(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(PBS_EXEC, where it was read)`` from the environment or PBS's configuration file."""
    if env.get("PBS_EXEC"):
        return env["PBS_EXEC"], "PBS_EXEC in the environment"
    conf = env.get("PBS_CONF_FILE") or DEFAULT_PBS_CONF
    try:
        with open(conf, encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() == "PBS_EXEC" and value.strip():
            return value.strip(), f"PBS_EXEC in {conf}"
    return None


def _candidates(env: Mapping[str, str]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if env.get(PBS_BIN_ENV):
        found.append((Path(env[PBS_BIN_ENV]), f"${PBS_BIN_ENV}"))
    conf = _pbs_exec_from_conf(env)
    if conf is not None:
        found.append((Path(conf[0]) / "bin", conf[1]))
    found.append((Path(DEFAULT_PBS_EXEC) / "bin", f"the default PBS_EXEC {DEFAULT_PBS_EXEC}"))
    return found


def locate_pbs_command(name: str, env: Mapping[str, str] | None = None) -> LocatedCommand:
    """Find PBS's own ``name`` (``qsub``, ``qstat``, ``qdel`` ...).

    Args:
        name: A bare command name.
        env: The environment to read (default: this process's).

    Returns:
        The command found and why it was chosen.

    Raises:
        CommandError: ``$HPCJOBS_PBS_BIN`` is set but does not hold it, or the only ``name`` on
            ``PATH`` is Slurm's wrapper, or there is none at all.
    """
    env = os.environ if env is None else env
    for folder, source in _candidates(env):
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return LocatedCommand(name, str(path), source)
        if source == f"${PBS_BIN_ENV}":
            raise CommandError((name,), None, "", f"{PBS_BIN_ENV}={folder} holds no executable {name}",
                               reason=f"could not be started ({PBS_BIN_ENV} does not hold it)")
    wrappers: list[str] = []
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        found = shutil.which(name, path=entry or ".")
        if found is None:
            continue
        if is_slurm_wrapper(found):
            wrappers.append(found)
            continue
        return LocatedCommand(name, found, "PATH")
    if wrappers:
        detail = (f"{name} on PATH is Slurm's PBS wrapper ({', '.join(wrappers)}, from slurm-wlm-torque), not "
                  f"PBS Pro/OpenPBS, and no PBS installation was found (looked in "
                  f"{', '.join(str(f) for f, _ in _candidates(env))}): set {PBS_BIN_ENV} to the folder of "
                  "PBS's clients, or PBS_EXEC in /etc/pbs.conf")
        raise CommandError((name,), None, "", detail, reason="could not be started (only Slurm's wrapper found)")
    return LocatedCommand(name, name, "PATH (not found: the command will fail to start)")


def describe_pbs_commands(env: Mapping[str, str] | None = None) -> list[LocatedCommand | str]:
    """Where ``qsub``, ``qstat`` and ``qdel`` come from, or why each cannot be used (for people)."""
    out: list[LocatedCommand | str] = []
    for name in ("qsub", "qstat", "qdel"):
        try:
            out.append(locate_pbs_command(name, env))
        except CommandError as exc:
            out.append(f"{name}: {exc.stderr}")
    return out
