"""Which process a local point is: a record the runner writes, and the checks made before any signal.

A pid names a process only while it lives, and a pid with its start time only within one boot. So
``hpcjobs cancel`` on the ``local`` site signals a recorded process group only when the boot id, the
start time, group leadership and a secret in the process's own environment all match
(:meth:`ProcRecord.is_alive`). It never signals pid 1, itself, or a group it did not make.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

#: The environment variable that carries a point process's secret: a process is signalled only when
#: its own environment (``/proc/<pid>/environ``, readable by its owner and root) holds the recorded value.
PROC_SECRET_VAR = "HPCJOBS_LOCAL_PROC"
_ENVIRON_MAX = 1 << 20  # bytes of /proc/<pid>/environ read at most


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot, field 22 of ``/proc/<pid>/stat``), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[19])  # fields after the command name start at field 3
    except (OSError, IndexError, ValueError):
        return None


def boot_id() -> str | None:
    """This boot's id (``/proc/sys/kernel/random/boot_id``, see random(4)), or None where there is none.

    A pid and its start time name one process only within one boot: after a reboot the same pair
    can be any other process.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            text = fh.read(64).strip()
    except OSError:
        return None
    return text if re.fullmatch(r"[0-9a-f-]{36}", text) else None


def _environ_holds(pid: int, name: str, value: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read(_ENVIRON_MAX)
    except OSError:
        return False
    return f"{name}={value}".encode() in data.split(b"\0")


@dataclass(frozen=True)
class ProcRecord:
    """A point's process as the runner started it: the wrapper's pid (= its process group), its start
    time, the boot it ran in and the secret in its environment."""

    pid: int
    start_time: int
    point_id: str
    boot: str | None = None
    secret: str | None = None

    def is_alive(self) -> bool:
        """The recorded process still exists and is the one hpcjobs started.

        All of these must hold: the pid is neither 1 nor this process; same boot (boot id), same
        process (start time: not a reused pid), it leads its own process group (the group the
        signal goes to is the one it made), and its environment holds the recorded secret. A record
        without a boot id or a secret (written by an older hpcjobs, or by hand) never matches.
        """
        if self.pid <= 1 or self.pid == os.getpid() or not self.boot or not self.secret:
            return False
        if self.boot != boot_id() or process_start_time(self.pid) != self.start_time:
            return False
        try:
            if os.getpgid(self.pid) != self.pid:
                return False
        except OSError:
            return False
        return _environ_holds(self.pid, PROC_SECRET_VAR, self.secret)

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the process group, only if the recorded process is still the same one.

        Returns:
            True if the signal was sent.
        """
        if not self.is_alive():
            return False
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True


__all__ = ["PROC_SECRET_VAR", "ProcRecord", "boot_id", "process_start_time"]
