"""The local runner's files, and which process a local point is: the checks made before any signal.

:class:`LocalFiles` is the ``local/`` folder of a sweep (point locks, process records, exit files,
cancel markers); :class:`ProcRecord` is what a process record holds.

A pid names a process only while it lives, and a pid with its start time only within one boot. So
``hpcjobs cancel`` on the ``local`` site signals a recorded process group only when the boot id, the
start time, group leadership and a secret in the process's own environment all match
(:meth:`ProcRecord.is_alive`). It never signals pid 1, itself, or a group it did not make.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.errors import UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.safe_files import open_own_file, read_regular, real_folders

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




# ----------------------------------------------------------------------------------------- files

#: The point's lock descriptor sits above the 0-9 that scripts use with ``exec N>``.
_LOCK_FD_MIN = 100
_EXIT_RE = re.compile(r"(\d{1,3}) (done|terminated)\n")
#: Most bytes of a process record or an exit file read (each is one short line).
_RECORD_MAX_BYTES = 4096


class LocalFiles:
    """The ``local/`` folder of a sweep: point locks, process records, exit files, cancel markers."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = Path(sweep_dir)
        self.dir = self.sweep_dir / "local"

    def _made(self) -> None:
        """Make ``local/`` (a link or a file there is refused: nothing is written through it)."""
        real_folders(self.dir, self.sweep_dir)

    def lock(self, point_id: str) -> Path:
        """The point's lock, held by every process of a running point."""
        return self.dir / f"{point_id}.lock"

    def proc(self, token: str, index: int) -> Path:
        """The process record of one task of run ``token``."""
        return self.dir / f"{token}.{index}.proc"

    def exit(self, token: str, index: int) -> Path:
        """The exit file the task's wrapper writes when it ends."""
        return self.dir / f"{token}.{index}.exit"

    def usage(self, token: str, index: int) -> Path:
        """What the runner measured of one task of run ``token`` when it reaped it (:meth:`write_usage`)."""
        return self.dir / f"{token}.{index}.usage.json"

    def write_usage(self, token: str, index: int, record: dict[str, object]) -> Path:
        """Save a task's measured start, end, exit and resource use (atomically, never through a link)."""
        self._made()
        return atomic_write_text(self.usage(token, index), json.dumps(record, sort_keys=True) + "\n", below=self.dir)

    def usages(self) -> list[dict[str, object]]:
        """Every task record :meth:`write_usage` saved, oldest run first (unreadable ones left out)."""
        out: list[dict[str, object]] = []
        try:
            paths = sorted(self.dir.glob("*.usage.json"), key=lambda p: p.name)
        except OSError:
            return out
        for path in paths:
            try:
                record = json.loads(read_regular(path, _RECORD_MAX_BYTES, inside=self.dir))
            except (OSError, UnsafePathError, ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def cancel_marker(self, token: str) -> Path:
        """Present when ``hpcjobs cancel`` cancelled run ``token``."""
        return self.dir / f"{token}.cancel"

    @contextlib.contextmanager
    def control(self) -> Iterator[None]:
        """Exclusive section: starting a point vs. writing a cancel marker and reading process records."""
        self._made()
        fd = open_own_file(self.dir / "control.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def lock_held(self, point_id: str) -> bool:
        """True while some process of the point is alive (it holds the point's lock)."""
        try:
            fd = open_own_file(self.lock(point_id), os.O_RDWR)
        except (FileNotFoundError, UnsafePathError):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def take_lock(self, point_id: str) -> int | None:
        """Lock the point for a new run; the descriptor (above 99) is for the child. None: a run is alive."""
        self._made()
        fd = open_own_file(self.lock(point_id), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _LOCK_FD_MIN)
        except BlockingIOError:
            return None
        finally:
            os.close(fd)

    def write_proc(self, token: str, index: int, record: ProcRecord) -> None:
        """Record a started task (temporary file and rename: readers never see half a record)."""
        atomic_write_text(self.proc(token, index), json.dumps({
            "pid": record.pid, "start_time": record.start_time, "point_id": record.point_id,
            "boot_id": record.boot, "secret": record.secret}) + "\n", below=self.sweep_dir)

    def read_proc(self, token: str, index: int) -> ProcRecord | None:
        """The recorded process of a task, or None."""
        try:
            d = json.loads(read_regular(self.proc(token, index), _RECORD_MAX_BYTES))
            boot, secret = d.get("boot_id"), d.get("secret")
            return ProcRecord(int(d["pid"]), int(d["start_time"]), str(d["point_id"]),
                              boot if isinstance(boot, str) else None, secret if isinstance(secret, str) else None)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, UnsafePathError):
            return None

    def cancel(self, token: str) -> None:
        """Write the cancel marker of run ``token`` (never through a link)."""
        self._made()
        os.close(open_own_file(self.cancel_marker(token), os.O_WRONLY | os.O_CREAT, 0o600))

    def read_exit(self, token: str, index: int) -> tuple[int, bool] | None:
        """``(exit status, terminated by a signal)`` from the task's exit file; None when absent or incomplete."""
        try:
            text = read_regular(self.exit(token, index), _RECORD_MAX_BYTES).decode("ascii", errors="replace")
        except (OSError, UnsafePathError):
            return None
        m = _EXIT_RE.fullmatch(text)
        return (int(m.group(1)), m.group(2) == "terminated") if m else None


__all__ = ["PROC_SECRET_VAR", "LocalFiles", "ProcRecord", "boot_id", "process_start_time"]
