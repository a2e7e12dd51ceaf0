"""State of the PBS stand-in: configuration, job records, locking, ids, times.

Everything lives under ``$PBS_STANDIN_HOME``:

* ``server.json``            optional configuration (see :func:`load_config`)
* ``lock``                   fcntl lock serialising every read-modify-write
* ``seq``                    the last job sequence number handed out
* ``jobs/<seq>.json``        one record per job or array parent
* ``jobs/<seq>_<idx>.json``  one record per array subjob
* ``spool/``                 job scripts, live stdout/stderr, node files
* ``server_priv/accounting/YYYYMMDD``  accounting log in the real format
* ``server_logs/``           runner diagnostics (not a real PBS format)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FLAVORS = ("pbspro", "torque")

DEFAULT_CONFIG: dict[str, Any] = {
    "pbs_version": "23.06.06",
    "max_array_size": 10000,
    "kill_delay": 2,
    "json_numbers": "strict",
    "json_first_id_only": False,
    "queues": {},
    "default_queue": None,
    "exec_host": None,
    "exiting_delay": 0,
    "user_home": None,
    "resources_default": {},
}

Record = dict[str, Any]


class StandinError(Exception):
    """A client-visible error: message for stderr and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def home() -> Path:
    """Return the stand-in state directory (``$PBS_STANDIN_HOME``), creating its layout.

    Returns:
        The state directory.

    Raises:
        StandinError: if the variable is unset.
    """
    value = os.environ.get("PBS_STANDIN_HOME")
    if not value:
        raise StandinError("PBS_STANDIN_HOME is not set (PBS stand-in)", 1)
    root = Path(value)
    for sub in ("jobs", "spool", "server_priv/accounting", "server_logs", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def flavor() -> str:
    """Return the personality: ``pbspro`` (default) or ``torque``."""
    value = os.environ.get("PBS_STANDIN_FLAVOR", "pbspro").lower()
    return value if value in FLAVORS else "pbspro"


def server_name() -> str:
    """Return the server name used as job id suffix."""
    default = "pbs-standin" if flavor() == "pbspro" else "torque-standin.cluster"
    return os.environ.get("PBS_STANDIN_SERVER", default)


def load_config(root: Path) -> dict[str, Any]:
    """Read ``server.json`` over the defaults.

    Keys: ``pbs_version``, ``max_array_size``, ``kill_delay`` (seconds between SIGTERM and
    SIGKILL), ``json_numbers`` (``strict`` or ``legacy``: the pre-2023 strtod quirk),
    ``queues`` (``{name: {"resources_max": {...}, "resources_default": {...}}}``),
    ``default_queue``, ``exec_host``, ``user_home`` (job cwd; default the submitter's HOME),
    ``resources_default``, ``exiting_delay`` (seconds a finished job stays in state E),
    ``json_first_id_only`` (``qstat -f -F json`` prints only the first found operand's job, as the
    cJSON-era OpenPBS build cd7ab5e that reports 23.06.06 does; errors are still printed for all).

    Args:
        root: state directory.

    Returns:
        The merged configuration.
    """
    config = dict(DEFAULT_CONFIG)
    path = root / "server.json"
    if path.exists():
        config.update(json.loads(path.read_text()))
    if not config["queues"]:
        config["queues"] = {("workq" if flavor() == "pbspro" else "batch"): {}}
    if not config["default_queue"]:
        config["default_queue"] = next(iter(config["queues"]))
    if not config["exec_host"]:
        config["exec_host"] = socket.gethostname().split(".")[0]
    return config


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the global stand-in lock for the duration of the block."""
    with open(root / "lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def next_sequence(root: Path) -> int:
    """Hand out the next job sequence number (caller holds the lock)."""
    path = root / "seq"
    current = int(path.read_text()) if path.exists() else 0
    write_atomic(path, f"{current + 1}\n")
    return current + 1


def record_path(root: Path, seq: int, index: int | None = None) -> Path:
    """Return the file of a job (``index`` None) or array subjob record."""
    name = f"{seq}.json" if index is None else f"{seq}_{index}.json"
    return root / "jobs" / name


def save(root: Path, record: Record) -> None:
    """Store a record atomically."""
    write_atomic(record_path(root, record["seq"], record.get("index")), json.dumps(record, indent=1))


def load(root: Path, seq: int, index: int | None = None) -> Record | None:
    """Load one record, or None if it does not exist."""
    path = record_path(root, seq, index)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def all_parents(root: Path) -> list[Record]:
    """Return every job / array parent record, ordered by sequence number."""
    records = []
    for path in (root / "jobs").glob("*.json"):
        if "_" not in path.stem:
            records.append(json.loads(path.read_text()))
    return sorted(records, key=lambda rec: rec["seq"])


def subjobs(root: Path, parent: Record) -> list[Record]:
    """Return the subjob records of an array parent, ordered by index."""
    result = []
    for index in parent["array"]["indices"]:
        rec = load(root, parent["seq"], index)
        if rec is not None:
            result.append(rec)
    return result


ID_RE = re.compile(r"^(\d+)(\[(\d*)\])?(\..*)?$")


def parse_job_id(text: str) -> tuple[int, str | None] | None:
    """Split an operand into (sequence, array part) ignoring the server suffix.

    Args:
        text: ``123``, ``123.srv``, ``123[]``, ``123[7].srv.domain``.

    Returns:
        ``(123, None)`` for a plain id, ``(123, "")`` for an array parent, ``(123, "7")``
        for a subjob; None when the operand is not a job id.
    """
    match = ID_RE.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), (match.group(3) if match.group(2) else None)


def job_id(seq: int, array: str | None = None) -> str:
    """Format a full job id with the server suffix."""
    mid = "" if array is None else f"[{array}]"
    return f"{seq}{mid}.{server_name()}"


def ctime_text(epoch: float) -> str:
    """C ``ctime()`` without the newline, in local time: ``Tue Oct  4 21:23:20 2022``."""
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(int(epoch)))


def hms(seconds: float) -> str:
    """Format a duration as HH:MM:SS with unbounded hours."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def parse_duration(text: str) -> int:
    """Parse ``[[HH:]MM:]SS`` (or plain seconds) to seconds.

    Raises:
        ValueError: on malformed input.
    """
    parts = text.strip().split(":")
    if not parts or len(parts) > 3 or not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts):
        raise ValueError(text)
    total = 0.0
    for part in parts:
        total = total * 60 + float(part)
    return int(total)


SIZE_RE = re.compile(r"^(\d+)([kmgtp]?)(b|w)?$", re.IGNORECASE)
SIZE_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def normalise_size(text: str) -> str:
    """Normalise a PBS size to lower case with a unit (default bytes): ``10GB`` -> ``10gb``.

    Raises:
        ValueError: on malformed input.
    """
    match = SIZE_RE.match(text.strip())
    if not match:
        raise ValueError(text)
    return f"{match.group(1)}{match.group(2).lower()}{(match.group(3) or 'b').lower()}"


def size_bytes(text: str) -> int:
    """Convert a normalised size to bytes."""
    match = SIZE_RE.match(text)
    if not match:
        return 0
    factor = 8 if (match.group(3) or "b").lower() == "w" else 1
    return int(match.group(1)) * factor * 1024 ** SIZE_POWER[match.group(2).lower()]


def pid_alive(pid: int | None) -> bool:
    """Return True if a process with this pid exists."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
