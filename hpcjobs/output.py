"""Writing files atomically: readers see the old file or the new one, never half of it.

Files are private to their owner whatever the umask: ``tempfile.mkstemp`` creates them 0600
(:data:`PRIVATE_FILE_MODE`), and batch scripts, which hold the job's environment values, are
made executable for their owner only (:data:`SCRIPT_MODE`, 0700).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

#: Mode of a written batch script: read, write and run by its owner only.
SCRIPT_MODE = 0o700
#: Mode of every other written file (what ``mkstemp`` creates): read and write by its owner only.
PRIVATE_FILE_MODE = 0o600


@contextlib.contextmanager
def atomic_writer(path: str | Path, *, binary: bool = False, mode: int | None = None,
                  below: str | Path | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on a clean exit, fsync it and rename it over ``path``.

    The file gets ``mode`` (default :data:`PRIVATE_FILE_MODE`, 0600), whatever the umask. On an
    exception the temporary file is removed and ``path`` is left as it was. The rename replaces a
    symbolic link at ``path`` itself, never the file it points to.

    Args:
        path: The file.
        binary: Write bytes (else UTF-8 text).
        mode: The file's mode.
        below: A folder hpcjobs owns (a sweep folder, a cache folder): every folder between it and
            ``path`` is made and must be a real folder, not a link
            (:func:`hpcjobs.safe_files.real_folders`). Without it, the folders are made as given
            (a path the user named may go through links).

    Raises:
        UnsafePathError: With ``below``, a folder on the way is a link or not a folder.
    """
    target = Path(path)
    if below is not None:
        from hpcjobs.safe_files import real_folders

        real_folders(target.parent, below)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        fh: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, PRIVATE_FILE_MODE if mode is None else mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str, *, mode: int | None = None,
                      below: str | Path | None = None) -> Path:
    """Write ``text`` to ``path`` atomically (temporary file in the same folder, fsync, rename).

    ``below``: as for :func:`atomic_writer`, the folder hpcjobs owns that ``path`` is in.
    """
    with atomic_writer(path, mode=mode, below=below) as fh:
        fh.write(text)
    return Path(path)


def write_user_file(path: str | Path, data: str | bytes, *, what: str, mode: int | None = None) -> Path:
    """Write ``data`` to ``path``, a file a person named (``--html``, ``site init -o``), atomically.

    What is at ``path`` must be a regular file or nothing: a FIFO, a device or a folder is refused
    before anything is opened (a FIFO would block, ``/dev/full`` fails half-way, and the rename would
    replace the device or folder itself). Missing folders above it are made. The file is written
    beside its place and renamed over it, so a failure (no space, quota) leaves the old file, or
    none, and no partial one. Links on the way are followed; a link at ``path`` itself is replaced.

    Args:
        path: The file.
        data: Text (written as UTF-8) or bytes.
        what: Where the person named it (``--html``), for the messages.
        mode: The file's mode (default :data:`PRIVATE_FILE_MODE`).

    Raises:
        ConfigError: ``path`` is not a regular file, a part of it is not a folder, or it is too long (exit 2).
        FileSystemError: The file system refused: no space, over quota, permission, read-only (exit 1).
    """
    from hpcjobs.safe_files import refuse_special_target, user_folder, user_path_errors

    target = Path(path)
    refuse_special_target(target, what=what)
    user_folder(target.parent, what=what)
    with user_path_errors(target, what=what), atomic_writer(target, binary=isinstance(data, bytes),
                                                            mode=mode) as fh:
        fh.write(data)
    return target
