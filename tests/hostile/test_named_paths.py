"""Paths a person names that the file system cannot use as asked: a clear error, never a crash or a hang.

Every command-line option and environment variable that names where hpcjobs writes (``report --html``
and ``--plot``, ``render -o``, ``sweep --root``, ``$HPCJOBS_SWEEP_ROOT``, an experiment's ``output_dir``
through ``--set``) is tried against every kind of bad target: a FIFO, ``/dev/full``, a folder where a
file goes and a file where a folder goes, a path under ``/dev/null``, a name over 255 bytes, a path
under a regular file, and (when not root) a folder that cannot be written. Each must end with exit 1
or 2, the path in the message, no traceback and nothing written. Each case runs as a subprocess with a
timeout: a write that blocks on a FIFO fails the test instead of hanging the suite.

Ids (and ``--root`` values) of any length up to 200 KB are given to every command that takes one:
refused or not found, never ``File name too long`` as a crash. A sweep folder whose ``ledger.sqlite``
is a FIFO, a folder or a link is said to be one, not "no sweep".
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import invoke, run_hpcjobs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.errors import ConfigError, FileSystemError
from hpcjobs.output import write_user_file
from hpcjobs.safe_files import os_error_for

ROOT = Path(__file__).resolve().parents[2]
SACCT_JSON = str(ROOT / "tests" / "data" / "slurm" / "testbed-22.05_sacct.json")
EXPERIMENT = """\
name: tiny
resources: {cpus_per_task: 1, memory: 100M, walltime: 1m}
command: echo "x=$x"
sweep:
  grid: {x: [1, 2]}
"""
LONG_NAME = "n" * 300  # over the 255 bytes a name may have on Linux file systems

#: Option -> (argv and extra environment for a target path, whether it names a file or a folder).
Command = Callable[[str], tuple[list[str], dict[str, str]]]
OPTIONS: dict[str, tuple[Command, str]] = {
    "report --html": (lambda t: (["report", "--from-file", SACCT_JSON, "--html", t], {}), "file"),
    "report --plot": (lambda t: (["report", "--from-file", SACCT_JSON, "--plot", t], {}), "folder"),
    "render -o": (lambda t: (["render", "exp.yaml", "--site", "local", "-o", t], {}), "folder"),
    "sweep --root": (lambda t: (["sweep", "exp.yaml", "--site", "local", "--root", t], {}), "folder"),
    "$HPCJOBS_SWEEP_ROOT": (lambda t: (["sweep", "exp.yaml", "--site", "local"], {"HPCJOBS_SWEEP_ROOT": t}),
                            "folder"),
    "ls with $HPCJOBS_SWEEP_ROOT": (lambda t: (["ls"], {"HPCJOBS_SWEEP_ROOT": t}), "folder"),
    "sweep --set output_dir": (lambda t: (["sweep", "exp.yaml", "--site", "local", "--set", f"output_dir={t}"], {}),
                               "folder"),
}


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe")
    return str(tmp / "pipe")


def _folder(tmp: Path) -> str:
    (tmp / "a-folder").mkdir()
    return str(tmp / "a-folder")


def _regular(tmp: Path) -> str:
    (tmp / "a-file").write_text("keep me\n")
    return str(tmp / "a-file")


def _under_regular(tmp: Path) -> str:
    (tmp / "a-file").write_text("keep me\n")
    return str(tmp / "a-file" / "sub" / "out.html")


def _unwritable(tmp: Path) -> str:
    (tmp / "locked").mkdir(mode=0o555)
    return str(tmp / "locked" / "sub" / "out.html")


#: Kind of bad target -> how to make it under the test's folder (the path given), for files, folders or both.
TARGETS: dict[str, tuple[Callable[[Path], str], tuple[str, ...]]] = {
    "fifo": (_fifo, ("file", "folder")),
    "dev-full": (lambda tmp: "/dev/full", ("file", "folder")),
    "folder-for-a-file": (_folder, ("file",)),
    "file-for-a-folder": (_regular, ("folder",)),
    "under-dev-null": (lambda tmp: "/dev/null/out", ("file", "folder")),
    "name-over-255-bytes": (lambda tmp: str(tmp / LONG_NAME / "out.html"), ("file", "folder")),
    "under-a-regular-file": (_under_regular, ("file", "folder")),
    "unwritable-folder": (_unwritable, ("file", "folder")),
}

CASES = [(option, kind) for option, (_, wants) in OPTIONS.items() for kind, (_, kinds) in TARGETS.items()
         if wants in kinds]


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its type bits and size (what "nothing written" compares)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = (st.st_mode, st.st_size)
    return out


@pytest.mark.parametrize(("option", "kind"), CASES, ids=[f"{o}-{k}" for o, k in CASES])
def test_a_bad_target_is_a_clear_error_and_nothing_is_written(option: str, kind: str, tmp_path: Path) -> None:
    if kind == "unwritable-folder" and os.geteuid() == 0:
        pytest.skip("root writes into a folder whatever its mode")
    work = tmp_path / "work"
    work.mkdir()
    (work / "exp.yaml").write_text(EXPERIMENT, encoding="utf-8")
    target = TARGETS[kind][0](work)
    argv, env = OPTIONS[option][0](target)
    before = _tree(work)
    done = run_hpcjobs(*argv, cwd=work, env=env, timeout=120)
    assert done.returncode in (1, 2), (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "unexpected error" not in done.stderr, done.stderr
    shown = target if len(target) < 400 else target[:200]
    assert shown in done.stderr or os.path.dirname(shown) in done.stderr, done.stderr
    assert _tree(work) == before, "something was written"


def test_missing_folders_above_a_named_file_are_made(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "report.html"
    done = run_hpcjobs("report", "--from-file", SACCT_JSON, "--html", str(target), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert target.read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temporary file left


# ------------------------------------------------------------------------- the environment's refusals


ENVIRONMENT = [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO]
ARGUMENT = [errno.ENAMETOOLONG, errno.EISDIR, errno.ELOOP]


@pytest.mark.parametrize("code", ENVIRONMENT + ARGUMENT, ids=errno.errorcode.get)
def test_a_refused_write_leaves_the_old_file_and_no_temporary_one(code: int, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while writing (``/dev/full``'s ENOSPC on a real disk, a quota) keeps the old file whole."""
    target = tmp_path / "report.html"
    target.write_text("old\n", encoding="utf-8")
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        real_fsync(fd)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises((FileSystemError, ConfigError)) as caught:
        write_user_file(target, "new\n" * 1000, what="--html")
    assert isinstance(caught.value, FileSystemError) == (code in ENVIRONMENT)
    assert str(target) in str(caught.value)
    assert caught.value.exit_code == (1 if code in ENVIRONMENT else 2)
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_an_error_that_is_no_path_problem_is_left_alone(tmp_path: Path) -> None:
    assert os_error_for(OSError(errno.EBADF, "Bad file descriptor"), tmp_path, what="--html") is None
    assert os_error_for(OSError(errno.EINVAL, "Invalid argument"), tmp_path, what="--html") is None


# ---------------------------------------------------------------------------------- ids of any length


ID_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("status",), ("cancel",), ("resubmit",), ("results",), ("logs",), ("logs", "tiny-00000000"), ("advise",),
    ("report", "--from-file", SACCT_JSON, "--sweep"), ("ls", "--root"), ("status", "tiny", "--root"),
)
LONG_ID = st.builds(lambda c, n, sep: c * n + sep, st.sampled_from("aé-_.0"),
                    st.integers(1, 200_000), st.sampled_from(("", "/x", ".yaml", "/")))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(ID_COMMANDS), text=LONG_ID)
def test_an_id_of_any_length_is_an_answer_not_a_crash(command: tuple[str, ...], text: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    code, output = invoke(*command, text)  # a crash fails here, with the output
    assert code in (0, 1, 2), output
    assert "File name too long" not in output or "too long for the file system" in output


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(256, 200_000))
def test_an_upstream_of_any_length_is_not_found_not_a_crash(length: int, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT, encoding="utf-8")
    code, output = invoke("sweep", "exp.yaml", "--site", "local", "--after", "ok:" + "u" * length)
    assert code == 2, output
    assert "was not found" in output
    assert not (tmp_path / "hpcjobs-sweeps").exists()


# ------------------------------------------------------------------------ a ledger that is no file


def _link_to_dev_null(path: Path) -> None:
    path.symlink_to("/dev/null")


LEDGER_KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (os.mkfifo, "a FIFO"),
    "folder": (lambda p: p.mkdir(), "a directory"),
    "link-to-dev-null": (_link_to_dev_null, "a symbolic link (to /dev/null)"),
    "dangling-link": (lambda p: p.symlink_to(p.parent / "gone"), "a symbolic link"),
}
LEDGER_COMMANDS = (("status", "tiny-1a2b3c4d"), ("status", "tiny"), ("results", "tiny"), ("cancel", "tiny"),
                   ("resubmit", "tiny-1a2b"), ("logs", "tiny"))


@pytest.mark.parametrize("command", LEDGER_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("kind", sorted(LEDGER_KINDS))
def test_a_ledger_that_is_no_file_is_named_not_no_sweep(command: tuple[str, ...], kind: str, tmp_path: Path) -> None:
    folder = tmp_path / "hpcjobs-sweeps" / "tiny-1a2b3c4d"
    folder.mkdir(parents=True)
    make, words = LEDGER_KINDS[kind]
    make(folder / "ledger.sqlite")
    done = run_hpcjobs(*command, cwd=tmp_path, timeout=60)
    assert done.returncode in (1, 2), done.stderr
    assert f"{folder / 'ledger.sqlite'} is {words}" in done.stderr, done.stderr
    assert "not a ledger file" in done.stderr
    assert "no sweep" not in done.stderr
    assert "Traceback" not in done.stderr
