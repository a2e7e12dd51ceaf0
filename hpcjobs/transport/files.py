"""Files between this machine and the login node, over the shared SSH connection.

:func:`push` sends a sweep folder's new or changed files (job scripts, chunk files) in one session: a tar
archive built here (Python's :mod:`tarfile`, so this machine needs no tar) and unpacked there by GNU tar.
:func:`pull` brings back what jobs wrote (run folders, scheduler logs) incrementally: one session lists
the remote files with their sizes and modification times, and one more per batch sends only those that
are new or changed. Both ends need nothing but bash, coreutils' ``base64``, GNU ``find`` and GNU tar, which
every Linux login node has.

Nothing here follows a symbolic link: local files are read with ``O_NOFOLLOW`` and only regular files
are sent; remote listings come from ``find -type f`` (which does not follow links); a fetched file is
written only under the local folder, atomically, never through a link, and only when it is one of the
names asked for.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import re
import stat
import tarfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath

from hpcjobs.errors import HpcJobsError
from hpcjobs.output import atomic_writer
from hpcjobs.process import output_limits
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.safe_files import read_regular
from hpcjobs.transport.ssh import RemoteConnectionError, SshSession, base64_lines, heredoc_end

log = logging.getLogger("hpcjobs.transport")

#: Largest file :func:`push` sends, and that :func:`pull` fetches unless told otherwise (bigger ones
#: are listed as skipped: a checkpoint in a run folder is not a result to copy on every ``results``).
MAX_FILE_BYTES = 256 * 1024 * 1024
#: Most bytes of files fetched in one session (several sessions when more changed).
BATCH_BYTES = 64 * 1024 * 1024

#: What a transfer script prints last: the proof that the login node ran all of it.
DONE = "hpcjobs-transfer-complete"

#: Seconds a transfer session may take.
TRANSFER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RemoteFile:
    """One regular file the login node listed: its path (relative), size and modification time."""

    path: str
    size: int
    mtime_ns: int


@dataclass
class PullReport:
    """What :func:`pull` did."""

    listed: int = 0
    fetched: list[str] | None = None
    skipped_large: list[str] | None = None
    sessions: int = 0


def local_files(folder: Path, skip: Callable[[str], bool]) -> dict[str, os.stat_result]:
    """The regular files under ``folder`` (relative POSIX paths), links and special files left out."""
    found: dict[str, os.stat_result] = {}
    for top, dirs, files in os.walk(folder, followlinks=False):
        rel_top = Path(top).relative_to(folder)
        dirs[:] = [d for d in dirs if not skip((rel_top / d).as_posix())]
        for name in files:
            rel = (rel_top / name).as_posix()
            if skip(rel):
                continue
            st = os.lstat(Path(top) / name)
            if stat.S_ISREG(st.st_mode):
                found[rel] = st
    return found


def sync_filter(paths: Sequence[str], exclude: Sequence[str]) -> Callable[[str], bool]:
    """The ``skip`` of :func:`push` that keeps only ``paths`` (files, or folders and what they hold), less ``exclude``.

    A pattern matches a name at any depth (``__pycache__``, ``*.pyc``) or a whole relative path (``data/*.h5``).
    """
    import fnmatch

    wanted = [p.strip("/") for p in paths]

    def skip(rel: str) -> bool:
        if any(fnmatch.fnmatchcase(rel, pat) or any(fnmatch.fnmatchcase(part, pat) for part in rel.split("/"))
               for pat in exclude):
            return True
        return not any(rel == w or rel.startswith(w + "/") or w.startswith(rel + "/") for w in wanted)

    return skip


def sync_problems(folder: Path, paths: Sequence[str]) -> list[str]:
    """What stops ``paths`` (the site's ``remote.sync``) from being sent from ``folder``: missing or linked entries."""
    problems = []
    for rel in paths:
        path = folder / rel
        if path.is_symlink():
            problems.append(f"{rel}: is a symbolic link in {folder}; name the folder or file it points to")
        elif not path.exists():
            problems.append(f"{rel}: no such file or folder in {folder}, the submit folder")
        elif not (path.is_file() or path.is_dir()):
            problems.append(f"{rel}: is not a regular file or a folder")
    return problems


def push(session: SshSession, folder: Path, remote: str, *, skip: Callable[[str], bool],
         sent: dict[str, tuple[int, int]], also_make: Sequence[str] = ()) -> list[str]:
    """Send the files under ``folder`` that changed since ``sent`` says to ``remote`` (an absolute path there).

    One session, whatever the number of files. ``sent`` (relative path -> size, mtime) is updated;
    ``also_make`` are more remote folders to make (a job's output folder).

    Returns:
        The relative paths sent.

    Raises:
        RemoteConnectionError, CommandError: The transfer failed (nothing is marked sent).
    """
    changed = {rel: st for rel, st in local_files(folder, skip).items()
               if sent.get(rel) != (st.st_size, st.st_mtime_ns)}
    if not changed and not also_make:
        return []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({str(PurePosixPath(rel).parent) for rel in changed} - {"."})
        for rel_dir in _with_parents(folders):
            info = tarfile.TarInfo(rel_dir)
            info.type, info.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(info)
        for rel, st in sorted(changed.items()):
            if st.st_size > MAX_FILE_BYTES:
                raise HpcJobsError(f"{folder / rel} is {st.st_size} bytes, over the {MAX_FILE_BYTES} bytes hpcjobs "
                                   "sends to a login node")
            data = read_regular(folder / rel, MAX_FILE_BYTES)
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), stat.S_IMODE(st.st_mode) & 0o755, st.st_mtime
            tar.addfile(info, io.BytesIO(data))
    end = heredoc_end()
    lines = ["{", f"mkdir -p -- {shell_word(remote)} {' '.join(shell_word(m) for m in also_make)} || exit 1",
             f"base64 -d <<'{end}' | tar -x -f - -C {shell_word(remote)} --no-same-owner --delay-directory-restore "
             "|| exit 1",
             *base64_lines(buffer.getvalue()), end, f"printf '%s\\n' {DONE}", "}"]
    result = session.run_script("\n".join(lines) + "\n", shown=["tar", "-x", "-C", remote],
                                timeout=TRANSFER_TIMEOUT_S)
    if DONE not in result.stdout.split():  # a script that never reached bash whole runs nothing and exits 0
        raise RemoteConnectionError(["tar", "-x", "-C", remote], None, result.stdout, result.stderr,
                                    reason=f"the transfer to {session.login.target} did not complete")
    for rel, st in changed.items():
        sent[rel] = (st.st_size, st.st_mtime_ns)
    log.info("sent %d files to %s:%s", len(changed), session.login.target, remote)
    return sorted(changed)


def _with_parents(folders: Iterable[str]) -> list[str]:
    out: set[str] = set()
    for f in folders:
        p = PurePosixPath(f)
        out.update(str(q) for q in [p, *p.parents] if str(q) != ".")
    return sorted(out, key=lambda s: (s.count("/"), s))


def remote_listing(session: SshSession, remote: str, subfolders: Sequence[str]) -> list[RemoteFile]:
    """The regular files under ``remote``/each of ``subfolders`` there (one session).

    Names that are not UTF-8, or hold a newline, are left out (they could not be written here as named).
    """
    words = " ".join(shell_word(s) for s in subfolders)
    script = (f"{{\ncd -- {shell_word(remote)} 2>/dev/null || exit 0\n"
              f"for d in {words}; do [ -d \"$d\" ] && [ ! -L \"$d\" ] && find \"$d\" -type f -printf '%s %T@ %p\\0'; "
              "done\nexit 0\n}\n")
    with output_limits(None):
        out = session.run_script(script, shown=["find", remote, *subfolders], timeout=TRANSFER_TIMEOUT_S).stdout
    files = []
    for entry in out.split("\0"):
        if not entry:
            continue
        size, _, rest = entry.partition(" ")
        mtime, _, path = rest.partition(" ")
        if path.startswith("./"):
            path = path[2:]
        if not re.fullmatch(r"[0-9]{1,20}", size) or "\ufffd" in path or "\n" in path or not _safe_relative(path):
            log.debug("left out remote file %r", entry)
            continue
        try:
            ns = int(Decimal(mtime) * 1_000_000_000)
        except InvalidOperation:
            continue
        files.append(RemoteFile(path, int(size), ns))
    return files


def _safe_relative(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and "\x00" not in path


def pull(session: SshSession, remote: str, folder: Path, subfolders: Sequence[str], *,
         max_file_bytes: int = MAX_FILE_BYTES, keep: Callable[[str], bool] | None = None) -> PullReport:
    """Bring ``remote``/``subfolders`` to ``folder``: only files that are new or changed (size, modification time).

    ``keep``: only the listed files whose relative path it accepts (default: all).

    Raises:
        RemoteConnectionError, CommandError: A session failed (what was fetched before stays).
        UnsafePathError: A folder on the way here is a link.
    """
    report = PullReport(fetched=[], skipped_large=[])
    if not subfolders:
        return report
    listed = remote_listing(session, remote, subfolders)
    report.listed, report.sessions = len(listed), 1
    wanted: list[RemoteFile] = []
    for f in listed:
        if keep is not None and not keep(f.path):
            continue
        if f.size > max_file_bytes:
            report.skipped_large.append(f.path)  # type: ignore[union-attr]
            continue
        try:
            st = os.lstat(folder / f.path)
        except OSError:
            wanted.append(f)
            continue
        if not (stat.S_ISREG(st.st_mode) and st.st_size == f.size and st.st_mtime_ns == f.mtime_ns):
            wanted.append(f)
    for batch in _batches(wanted):
        _fetch(session, remote, folder, batch, report)
        report.sessions += 1
    return report


def _batches(files: Sequence[RemoteFile]) -> Iterable[list[RemoteFile]]:
    batch: list[RemoteFile] = []
    size = 0
    for f in files:
        if batch and size + f.size > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(f)
        size += f.size
    if batch:
        yield batch


def _fetch(session: SshSession, remote: str, folder: Path, batch: Sequence[RemoteFile], report: PullReport) -> None:
    names = b"\0".join(f.path.encode("utf-8") for f in batch) + b"\0"
    end = heredoc_end()
    script = "\n".join(["{", f"cd -- {shell_word(remote)} || exit 1",
                        f"base64 -d <<'{end}' | tar -c -f - --null --no-recursion -T - | base64",
                        *base64_lines(names), end, "}"]) + "\n"
    with output_limits(None):
        out = session.run_script(script, shown=["tar", "-c", "-C", remote], timeout=TRANSFER_TIMEOUT_S).stdout
    by_name = {f.path: f for f in batch}
    data = base64.b64decode("".join(out.split()))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            listed = by_name.pop(member.name, None)
            if listed is None or not member.isreg():
                continue  # only regular files asked for: never a link, a device or another name
            source = tar.extractfile(member)
            if source is None:
                continue
            target = folder / listed.path
            with atomic_writer(target, binary=True, below=folder, mode=0o600 | (member.mode & 0o700)) as fh:
                fh.write(source.read())
            os.utime(target, ns=(listed.mtime_ns, listed.mtime_ns), follow_symlinks=False)
            report.fetched.append(listed.path)  # type: ignore[union-attr]


__all__ = ["BATCH_BYTES", "MAX_FILE_BYTES", "PullReport", "RemoteFile", "local_files", "pull", "push",
           "remote_listing"]
