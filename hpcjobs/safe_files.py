"""Opening the files hpcjobs owns without following a planted link, blocking on a FIFO or reading forever.

Every file hpcjobs writes or truncates in a sweep folder, a cache or an index goes through here:

- :func:`open_own_file` opens with ``O_NOFOLLOW`` (a final symbolic link is refused, dangling or
  not) and ``O_NONBLOCK`` (a FIFO does not block the open), and keeps the descriptor only for a
  regular file;
- :func:`real_folders` makes the folders below a root (the sweep folder, the cache folder) and
  refuses one that is a link or not a folder, so a planted ``jobs -> ~`` does not send writes
  elsewhere; :func:`hpcjobs.output.atomic_writer` takes the same ``below`` root;
- :func:`refuse_links` checks the names SQLite will open (the ledger and its ``-wal``, ``-shm`` and
  ``-journal`` files), which it opens following links;
- :func:`read_regular` reads at most a bound from a regular file only, and with ``inside`` refuses a
  file whose real path leaves a folder (a run folder's ``metrics.json -> /etc/shadow``, read by an
  admin running ``results`` on someone else's sweep).

Paths a person names (``--html``, ``--plot``, ``-o``, ``--root``, ``$HPCJOBS_SWEEP_ROOT``, an experiment's
``output_dir``) go through :func:`user_folder` and :func:`refuse_special_target` (and
:func:`hpcjobs.output.write_user_file`), and any refusal of the file system while using one through
:func:`user_path_errors`: a name over 255 bytes, a part that is not a folder or a FIFO where a file
goes is bad input naming the option (:class:`~hpcjobs.errors.ConfigError`, exit 2); no space, no
permission or a read-only file system is the environment (:class:`~hpcjobs.errors.FileSystemError`, exit 1).

The root itself may be reached through a link (``HPCJOBS_SWEEP_ROOT`` on a scratch file system
linked from home is common); only what lies below it must be real. A link made by someone who can
already write into the folder between the check and the open is outside this model: they own its
data anyway.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from hpcjobs.errors import ConfigError, ConfigProblem, FileSystemError, HpcJobsError, UnsafePathError

__all__ = ["file_kind", "open_own_file", "os_error_for", "read_regular", "read_regular_range", "real_folders",
           "refuse_links", "refuse_special_target", "user_folder", "user_path_errors"]

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
_LINK_ADVICE = "hpcjobs does not write through links: remove the link (or put a copy of the file in its place)"


def file_kind(mode: int) -> str:
    """``"a FIFO"``, ``"a directory"``, ... of an ``st_mode`` (``"a regular file"`` for a regular file)."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _link_error(path: Path) -> UnsafePathError:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return UnsafePathError(f"{path} is a symbolic link{target}; {_LINK_ADVICE}")


def open_own_file(path: str | Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags, mode)`` for a regular file only, never through a final symbolic link.

    The descriptor is blocking again when returned (``O_NONBLOCK`` only keeps the open itself from
    waiting on a FIFO).

    Raises:
        UnsafePathError: ``path`` is a symbolic link, a FIFO, a device, a socket or a directory.
        OSError: Any other failure of the open (missing, permission, ...).
    """
    p = Path(path)
    try:
        fd = os.open(p, flags | _OPEN_FLAGS, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_error(p) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV):  # a FIFO with no reader, a folder, a device
            kind = _lstat_kind(p)
            raise UnsafePathError(f"{p} is {kind}, not a regular file; "
                                  "hpcjobs writes only its own regular files") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"{p} is {file_kind(st.st_mode)}, not a regular file; "
                                  "hpcjobs writes only its own regular files")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_kind(path: Path) -> str:
    try:
        return file_kind(os.lstat(path).st_mode)
    except OSError:
        return "not a regular file"


def real_folders(folder: str | Path, below: str | Path, *, create: bool = True, mode: int = 0o777) -> Path:
    """``folder``, with every folder from ``below`` (exclusive) down to it made and checked.

    Args:
        folder: A folder at or under ``below``.
        below: The root (a sweep folder, a cache folder); it may itself be reached through a link.
        create: Make missing folders, ``below`` too (``mode``, less the umask); without it a missing
            one is left.
        mode: The mode of folders made.

    Raises:
        UnsafePathError: One of them is a symbolic link or not a folder, or ``folder`` is not under
            ``below``.
        OSError: A folder cannot be made.
    """
    target, root = Path(folder), Path(below)
    try:
        parts = target.relative_to(root).parts
    except ValueError:
        raise UnsafePathError(f"{target} is not inside {root}") from None
    if ".." in parts:
        raise UnsafePathError(f"{target} leaves {root} (it has a '..' part)")
    if create:
        root.mkdir(parents=True, exist_ok=True, mode=mode)  # the root as given (it may be reached by a link)
    current = root
    for part in parts:
        current = current / part
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(current, mode)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if create:
                raise
            return target
        if stat.S_ISLNK(st.st_mode):
            raise _link_error(current)
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(f"{current} is {file_kind(st.st_mode)}, where hpcjobs keeps a folder")
    return target


def refuse_links(paths: Iterable[str | Path]) -> None:
    """Refuse when one of ``paths`` is a symbolic link or exists as anything but a regular file.

    For files another library opens following links (SQLite's database, journal and WAL files).

    Raises:
        UnsafePathError: One of them is a link, a FIFO, a device, a socket or a folder.
    """
    for path in paths:
        p = Path(path)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise _link_error(p)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"{p} is {file_kind(st.st_mode)}, not a regular file; "
                                  "hpcjobs keeps only its own regular files there")


def _leaves(path: Path, folder: Path) -> bool:
    """True when ``path`` (under ``folder``) goes through a link whose target is outside ``folder``.

    Only the parts below ``folder`` are looked at (one ``lstat`` each); the real paths are compared
    only when one of them is a link, so reading 10,000s of run folders stays cheap.
    """
    try:
        parts = path.relative_to(folder).parts
    except ValueError:
        parts = None
    if parts is not None and ".." not in parts:
        current = folder
        for part in parts:
            current = current / part
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    break
            except OSError:
                return False  # missing: the open says so
        else:
            return False
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return not (real == root or real.startswith(root.rstrip(os.sep) + os.sep))


def _open_regular(p: Path, inside: str | Path | None) -> tuple[int, os.stat_result]:
    """``p`` opened for reading without blocking, and its ``fstat``: a regular file that stays in ``inside``.

    Raises:
        FileNotFoundError: No such file.
        UnsafePathError: It leads outside ``inside``, or is not a regular file (nothing stays open).
    """
    if inside is not None and _leaves(p, Path(inside)):
        if not p.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(p))
        raise UnsafePathError(f"{p} leads outside {inside} (to {os.path.realpath(p)}); "
                              "hpcjobs reads only the files inside its own folders")
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafePathError(f"{p} is {file_kind(st.st_mode)}, not a regular file; it is not read")
    return fd, st


def read_regular(path: str | Path, max_bytes: int, *, tail: bool = False, inside: str | Path | None = None) -> bytes:
    """At most ``max_bytes`` of a regular file; a FIFO or a device is refused without blocking.

    Args:
        path: The file.
        max_bytes: The bound: a larger file is refused (or, with ``tail``, its end is read).
        tail: Read the last ``max_bytes`` of a larger file instead of refusing it.
        inside: A folder the file's real path must stay in (links inside it are followed; a link
            that leads out of it is refused).

    Raises:
        FileNotFoundError: No such file.
        UnsafePathError: Not a regular file, larger than ``max_bytes`` (without ``tail``), or its
            real path is outside ``inside``.
        OSError: Unreadable.
    """
    p = Path(path)
    fd, st = _open_regular(p, inside)
    try:
        if st.st_size > max_bytes:
            if not tail:
                raise UnsafePathError(f"{p} is {st.st_size:,} bytes, more than the limit of {max_bytes:,} bytes; "
                                      "it is not read")
            os.lseek(fd, st.st_size - max_bytes, os.SEEK_SET)
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_range(path: str | Path, offset: int, length: int, *, inside: str | Path | None = None) -> bytes:
    """At most ``length`` bytes of a regular file from ``offset`` (``tail -f``'s read of what was added).

    Raises:
        FileNotFoundError: No such file.
        UnsafePathError: Not a regular file, or a link that leads outside ``inside``.
        OSError: Unreadable.
    """
    fd, _ = _open_regular(Path(path), inside)
    try:
        return os.pread(fd, max(0, length), max(0, offset))
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ paths a person names

#: Refusals of the file system that the environment must fix (exit 1): errno -> (what it means, what to do).
_ENVIRONMENT_ERRNOS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on the device", "free some space, or choose another place"),
    errno.EDQUOT: ("over the disk quota", "free some space (`quota -s` shows it), or choose another place"),
    errno.EROFS: ("on a read-only file system", "choose a writable place"),
    errno.EACCES: ("permission denied", "check the permissions of the file and its folders, or choose another place"),
    errno.EPERM: ("operation not permitted", "check the permissions of the file and its folders, or choose another "
                  "place"),
    errno.EIO: ("input/output error", "check the file system (its server or disk), or choose another place"),
    errno.EFBIG: ("the file is larger than the file system allows", "choose another place"),
}


def _kind_at(path: Path) -> str | None:
    """What ``path`` is, following links (``None``: nothing there).

    Raises:
        OSError: It cannot be looked up (too long, no permission).
    """
    try:
        return file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _first_non_folder(path: Path) -> tuple[Path, str] | None:
    """The first existing part of ``path`` (from the top) that is not a folder, and what it is.

    Raises:
        OSError: A part cannot be looked up (too long, no permission).
    """
    for part in reversed((path, *path.parents)):
        try:
            kind = _kind_at(part)
        except NotADirectoryError:  # below a part that is not a folder: that part was returned already
            return None
        if kind is None:
            return None
        if kind != "a directory":
            return part, kind
    return None


def os_error_for(exc: OSError, path: str | Path, *, what: str, doing: str = "write") -> HpcJobsError | None:
    """The typed error for the file system's refusal ``exc`` of ``path``, which a person named as ``what``.

    Args:
        exc: The error of the open, write, ``mkdir`` or ``stat``.
        path: The path the person named (the one the message shows).
        what: Where it was named: an option (``--html``), a key (``output_dir``) or a variable
            (``$HPCJOBS_SWEEP_ROOT``).
        doing: ``write`` or ``read`` (for the message).

    Returns:
        A :class:`~hpcjobs.errors.ConfigError` (exit 2) when the path cannot name a usable file (a name
        over the file system's limit, a part that is not a folder, a folder where a file goes), a
        :class:`~hpcjobs.errors.FileSystemError` (exit 1) when the environment refused (no space, no
        permission, read-only), ``None`` for any other error (the caller lets it through: not a
        person's path problem).
    """
    p = Path(path)
    shown = exc.filename if isinstance(exc.filename, str) and exc.filename else str(p)
    code = exc.errno
    if code in _ENVIRONMENT_ERRNOS:
        reason, advice = _ENVIRONMENT_ERRNOS[code]
        return FileSystemError(shown, f"cannot {doing} it: {reason}" + (f" ({what})" if what else ""), advice=advice,
                               errno=code)
    if code == errno.ENAMETOOLONG:
        longest = max((len(part.encode("utf-8", "surrogateescape")) for part in p.parts), default=0)
        message = (f"{_short(p)}: the path is too long for the file system (its longest name has {longest:,} bytes, "
                   f"the path {len(str(p).encode('utf-8', 'surrogateescape')):,})")
        expected = "names of at most 255 bytes, as most file systems take"
    elif code in (errno.ENOTDIR, errno.EEXIST):
        try:
            found = _first_non_folder(p)
        except OSError:
            found = None
        if found is None:
            return None
        part, kind = found
        message = f"{_short(part)} is {kind}, not a folder" + (f" (in {_short(p)})" if part != p else "")
        expected = "a path whose folders are folders"
    elif code == errno.EISDIR:
        message = f"{_short(p)} is a folder, where a file is {'read' if doing == 'read' else 'written'}"
        expected = "a file's path"
    elif code == errno.ELOOP:
        message = f"{_short(p)}: too many levels of symbolic links"
        expected = "a path whose links end"
    else:
        return None
    return ConfigError(ConfigProblem(message, key=what or None, expected=expected))


def _short(path: Path) -> str:
    """``path`` as text, its middle cut when it is very long (a 120 KB name in a message helps no one)."""
    text = str(path)
    return text if len(text) <= 512 else f"{text[:240]}...({len(text) - 480:,} characters)...{text[-240:]}"


@contextlib.contextmanager
def user_path_errors(path: str | Path, *, what: str, doing: str = "write") -> Iterator[None]:
    """Turn the file system's refusals of a path a person named into the typed errors (:func:`os_error_for`).

    Errors that are no property of the path (any other ``OSError``) pass through unchanged.
    """
    try:
        yield
    except OSError as exc:
        typed = os_error_for(exc, path, what=what, doing=doing)
        if typed is None:
            raise
        raise typed from exc


def refuse_special_target(path: str | Path, *, what: str) -> None:
    """Refuse to write a file over ``path`` when something other than a regular file is there.

    A FIFO would block the write (or swallow it), ``/dev/full`` fails half-way, a folder or a device
    would be replaced by the rename of an atomic write. Links are followed: a path a person named may
    go through them.

    Raises:
        ConfigError: It is a FIFO, a device, a socket or a folder, or a part of it is not a folder, or
            it is too long (exit 2).
        FileSystemError: It cannot be looked up (permission denied).
    """
    p = Path(path)
    with user_path_errors(p, what=what):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            return
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(ConfigProblem(f"{_short(p)} is {file_kind(st.st_mode)}, not a regular file", key=what,
                                        expected="a new file or a regular file to replace"))


def user_folder(path: str | Path, *, what: str, create: bool = True) -> Path:
    """``path``, a folder a person named (``--plot DIR``, ``--root``, ``output_dir``), made when missing.

    Without ``create`` a missing folder is left missing (it is only checked that it could be one).

    Raises:
        ConfigError: It, or a part of it, is something other than a folder, or it is too long (exit 2).
        FileSystemError: It cannot be made (permission, space, read-only file system).
    """
    p = Path(path)
    with user_path_errors(p, what=what):
        if create:
            p.mkdir(parents=True, exist_ok=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.stat(p)  # a name too long, a part that is not a folder, no permission: said here
        found = _first_non_folder(p)
    if found is not None:
        part, kind = found
        raise ConfigError(ConfigProblem(f"{_short(part)} is {kind}, not a folder"
                                        + (f" (in {_short(p)})" if part != p else ""), key=what,
                                        expected="a folder"))
    return p
