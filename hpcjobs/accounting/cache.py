"""On-disk cache of finished accounting windows (parquet), so a repeated report sends no query for them.

One file per (query shape, time window): ``<cache dir>/sacct/<key>.parquet``. Files are
written atomically (a temporary file in the same directory, then :func:`os.replace`), so a
reader never sees half a file and concurrent writers simply race to the same content.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pandas as pd

from hpcjobs.accounting.schema import conform
from hpcjobs.output import atomic_writer


def default_cache_dir() -> Path:
    """``$HPCJOBS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hpcjobs``, else ``~/.cache/hpcjobs``."""
    from hpcjobs.config.sites import user_cache_dir

    return user_cache_dir()


def accounting_cache_root() -> Path:
    """The cache folder of the scheduler this scope asks: :func:`default_cache_dir`, or over SSH the login
    node's own folder under it (:meth:`~hpcjobs.transport.RemoteLogin.cache_folder`), so the windows of two
    clusters asked from one laptop never mix."""
    from hpcjobs import transport

    login = transport.current_login()
    return default_cache_dir() if login is None else login.cache_folder(default_cache_dir())


def window_key(argv_shape: Sequence[str], start: datetime, end: datetime) -> str:
    """A stable hex key for one query shape (argv without the window's times) and one window.

    Args:
        argv_shape: The command without the times that change per window.
        start: Window start.
        end: Window end.

    Returns:
        32 hex characters.
    """
    payload = json.dumps([list(argv_shape), start.isoformat(), end.isoformat()], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


class WindowCache:
    """Parquet files of accounting DataFrames, one per finished window.

    Args:
        directory: Where to keep the files; default ``accounting_cache_root() / "sacct"``.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else accounting_cache_root() / "sacct"

    def path(self, key: str) -> Path:
        """The file that holds ``key``."""
        return self.directory / f"{key}.parquet"

    def load(self, key: str) -> pd.DataFrame | None:
        """The cached frame for ``key`` in the accounting schema, or ``None`` if absent or unreadable."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return conform(pd.read_parquet(path))
        except (OSError, ValueError):  # truncated/corrupt file: treat as a miss, it will be rewritten
            return None

    def store(self, key: str, df: pd.DataFrame) -> Path:
        """Write ``df`` for ``key`` atomically and return the file's path.

        Raises:
            OSError: The cache directory cannot be created or written.
        """
        final = self.path(key)
        with atomic_writer(final, binary=True) as fh:
            df.to_parquet(fh, index=False)
        return final
