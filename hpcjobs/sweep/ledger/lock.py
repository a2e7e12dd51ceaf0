"""The submitter lock of a sweep: ``fcntl.flock`` on ``<sweep_dir>/lock``.

Split out of :mod:`hpcjobs.sweep.ledger.store` (which re-exports :class:`SubmitterLock` and
:data:`LOCK_FILE`); :meth:`hpcjobs.sweep.ledger.store.Ledger.lock` hands one out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError, UnsafePathError
from hpcjobs.safe_files import open_own_file

__all__ = ["LOCK_FILE", "SubmitterLock"]

LOCK_FILE = "lock"


class SubmitterLock:
    """The exclusive right to submit a sweep: ``fcntl.flock`` on ``<sweep_dir>/lock``.

    The kernel drops the lock when its holder exits, however it dies, so there is nothing stale to
    clean up. The holder's PID, host and start time are written into the file for the message
    another submitter gets. (The descriptor is not inherited by child processes.)
    """

    def __init__(self, sweep_dir: str | Path, sweep_id: str | None = None) -> None:
        self.path = Path(sweep_dir) / LOCK_FILE
        self.sweep_id = sweep_id or Path(sweep_dir).name
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> SubmitterLock:
        """Take the lock without waiting.

        Raises:
            LedgerError: Another process holds it ("sweep X is being submitted by PID N on host H").
        """
        if self._fd is not None:
            return self
        try:  # never through a link (lock -> ~/.bashrc would be emptied), never a FIFO or device
            fd = open_own_file(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except UnsafePathError as exc:
            raise LedgerError(f"cannot use the sweep lock: {exc}") from None
        except OSError as exc:
            raise LedgerError(f"cannot open the sweep lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            who = (f"PID {holder.get('pid', '?')} on host {holder.get('host', '?')}" if holder
                   else "another process")
            since = f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder['since']))}" if holder.get(
                "since") else ""
            raise LedgerError(f"sweep {self.sweep_id} is being submitted by {who}{since}; "
                              "wait for it to finish or stop it first") from None
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (info + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back (a no-op when not held)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> SubmitterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        return dict(json.loads(data)) if data else {}
    except (OSError, ValueError):
        return {}
