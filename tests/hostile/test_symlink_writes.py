"""Nothing is written through a symbolic link: every file and folder a sweep writes, replaced by a link.

A sweep folder unpacked from a tarball, or one in a shared project folder, can hold a link where
hpcjobs keeps its own file (``lock -> ~/.bashrc``, ``jobs/index.tsv -> ...``, ``params.json ->
...``). The class test below does not list those names: it runs a real local sweep, takes every path
the sweep wrote (in its sweep folder and its log folder), and for each one, in a fresh sweep,
replaces it with a link to a victim file (or a victim folder holding copies of what was there), then
runs the commands that write (``sweep`` again, ``resubmit``, ``status``, ``results``, ``logs``,
``cancel``). The victim must be byte for byte as it was, and each command must end with a message
(exit 0, 1 or 2), never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers import invoke

from hpcjobs.errors import UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.safe_files import open_own_file, read_regular, real_folders, refuse_links

EXPERIMENT = """\
name: links
command: |
  echo "m=$x"
  printf '{"loss": %s}\\n' "$x" > "$HPCJOBS_RUN_DIR/metrics.json"
  test "$x" != 2 || exit 3
results:
  - {file: metrics.json}
sweep:
  grid: {x: [1, 2]}
"""

#: What the experiment's own command writes (its shell redirection is the user's code, not hpcjobs's).
WRITTEN_BY_THE_POINT = {"metrics.json"}

VICTIM_TEXT = b"precious: written by its owner, never by hpcjobs\n"




def _run_sweep(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    monkeypatch.chdir(folder)
    (folder / "exp.yaml").write_text(EXPERIMENT)
    code, out = invoke("sweep", "exp.yaml", "--site", "local", "--json", "--workers", "2")
    assert code in (0, 1), out
    sweep_id = str(json.loads(out[out.index("{"):])["sweep_id"])
    (sweep_dir,) = (folder / "hpcjobs-sweeps").iterdir()
    return sweep_id, sweep_dir


def _written_paths(folder: Path) -> list[str]:
    """Every file and folder a sweep wrote under ``folder`` (its sweeps root and its log folder)."""
    out = []
    for top in ("hpcjobs-sweeps", "hpcjobs-logs", "logs"):
        base = folder / top
        if not base.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            for name in [*dirnames, *filenames]:
                rel = os.path.relpath(os.path.join(dirpath, name), folder)
                if rel.count(os.sep) >= 2 and name not in WRITTEN_BY_THE_POINT:  # below the sweep folder
                    out.append(rel)
    return sorted(out)


def _snapshot(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {os.path.relpath(os.path.join(d, f), path): Path(d, f).read_bytes()
            for d, _, fs in os.walk(path) for f in fs}


def _plant(target: Path, victims: Path) -> Path:
    """Replace ``target`` with a link to a victim of the same kind; return the victim."""
    victims.mkdir(exist_ok=True)
    victim = victims / f"victim-{len(list(victims.iterdir()))}"
    if target.is_dir():
        shutil.copytree(target, victim)  # the same names: a write through the link would hit them
        for d, _, fs in os.walk(victim):
            for f in fs:
                Path(d, f).write_bytes(VICTIM_TEXT)
        shutil.rmtree(target)
    else:
        victim.write_bytes(VICTIM_TEXT)
        target.unlink()
    target.symlink_to(victim)
    return victim


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("baseline")
    with pytest.MonkeyPatch.context() as mp:
        _run_sweep(folder, mp)
        assert invoke("resubmit", "links", "--failed")[0] in (0, 1)
        assert invoke("results", "links", "--json")[0] == 0
    paths = _written_paths(folder)
    names = {Path(p).name for p in paths}
    assert {"lock", "ledger.sqlite", "params.json", "stdout.log", "results-cache.json"} <= names, paths
    return paths


def test_no_command_writes_through_a_link_planted_anywhere_in_a_sweep(
        written: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    victims = tmp_path / "victims"
    for n, rel in enumerate(written):
        folder = tmp_path / f"t{n}"
        folder.mkdir()
        _run_sweep(folder, monkeypatch)
        target = folder / rel
        if not os.path.lexists(target):
            continue  # this run did not make it (a token-named file of the baseline)
        victim = _plant(target, victims)
        before = _snapshot(victim)
        for args in (("sweep", "exp.yaml", "--site", "local", "--json"), ("resubmit", "links", "--failed"),
                     ("status", "links"), ("results", "links", "--json"), ("logs", "links", "--all-lines"),
                     ("cancel", "links")):
            code, out = invoke(*args)
            assert code in (0, 1, 2), (rel, args, out)
            assert _snapshot(victim) == before, f"hpcjobs {' '.join(args)} wrote through {rel} -> {victim}"


def test_reads_of_run_folder_files_that_lead_outside_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    secret = tmp_path / "secret.json"
    secret.write_text('{"loss": 7365201, "password": 1}\n')  # a value no temporary path holds
    _, sweep_dir = _run_sweep(tmp_path, monkeypatch)
    run_dirs = sorted((sweep_dir / "points").iterdir())
    (run_dirs[0] / "metrics.json").unlink()
    (run_dirs[0] / "metrics.json").symlink_to(secret)
    (run_dirs[1] / "stdout.log").unlink()
    (run_dirs[1] / "stdout.log").symlink_to(secret)
    code, out = invoke("results", "links", "--json")
    assert code == 0, out
    assert "7365201" not in out and "leads outside" in out
    code, out = invoke("logs", "links", "--all-lines", "--out")
    assert code == 0, out
    assert "password" not in out and "not shown" in out and "leads outside" in out
    # a link that stays inside the sweep folder is followed
    (run_dirs[0] / "metrics.json").unlink()
    (run_dirs[0] / "metrics.json").symlink_to(run_dirs[1] / "metrics.json")
    code, out = invoke("results", "links", "--json")
    assert code == 0 and "leads outside" not in out.split("stdout")[0], out


@pytest.mark.parametrize("kind", ["link", "dangling link", "fifo", "folder"])
def test_open_own_file_opens_only_a_regular_file_of_its_own(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    path = tmp_path / "lock"
    if kind == "link":
        path.symlink_to(victim)
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "nothing-yet")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    for flags in (os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_WRONLY | os.O_TRUNC):
        with pytest.raises(UnsafePathError, match=r"symbolic link|FIFO|directory"):
            os.close(open_own_file(path, flags))
    assert victim.read_bytes() == VICTIM_TEXT and not (tmp_path / "nothing-yet").exists()
    with pytest.raises(UnsafePathError):
        os.close(open_own_file("/dev/null", os.O_WRONLY))


def test_open_own_file_gives_a_blocking_descriptor_for_a_regular_file(tmp_path: Path) -> None:
    fd = open_own_file(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        import fcntl

        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
    finally:
        os.close(fd)


def test_atomic_writes_below_a_root_refuse_a_linked_folder_and_replace_a_linked_file(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "sweep", tmp_path / "home"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "0.env").write_bytes(VICTIM_TEXT)
    (root / "chunks").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        atomic_write_text(root / "chunks" / "0.env", "x=1\n", below=root)
    assert (elsewhere / "0.env").read_bytes() == VICTIM_TEXT
    (root / "scripts").mkdir()
    (root / "scripts" / "0.sh").symlink_to(elsewhere / "0.env")
    atomic_write_text(root / "scripts" / "0.sh", "echo\n", below=root)  # the link is replaced, not followed
    assert not (root / "scripts" / "0.sh").is_symlink()
    assert (elsewhere / "0.env").read_bytes() == VICTIM_TEXT
    with pytest.raises(UnsafePathError, match=r"not inside|leaves"):
        real_folders(root / ".." / "home", root)
    linked_root = tmp_path / "linked-root"
    linked_root.symlink_to(root)  # the root itself may be reached through a link
    atomic_write_text(linked_root / "deeper" / "f", "ok\n", below=linked_root)
    assert (root / "deeper" / "f").read_text() == "ok\n"


def test_ledger_side_files_that_are_links_are_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    for suffix in ("", "-wal", "-shm", "-journal"):
        d = tmp_path / f"s{suffix or 'db'}"
        d.mkdir()
        (d / f"ledger.sqlite{suffix}").symlink_to(victim)
        with pytest.raises(UnsafePathError, match="symbolic link"):
            refuse_links([d / "ledger.sqlite", d / "ledger.sqlite-wal", d / "ledger.sqlite-shm",
                          d / "ledger.sqlite-journal"])
    assert victim.read_bytes() == VICTIM_TEXT


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom", "folder"])
def test_read_regular_never_blocks_or_reads_a_device(tmp_path: Path, special: str) -> None:
    path = tmp_path / "f"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    else:
        path.symlink_to(special)
    with pytest.raises((UnsafePathError, IsADirectoryError), match=r"not a regular file|Is a directory"):
        read_regular(path, 1024)


def test_read_regular_caps_what_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100 + b"end")
    with pytest.raises(UnsafePathError, match="more than the limit of 10 bytes"):
        read_regular(path, 10)
    assert read_regular(path, 3, tail=True) == b"end"


def test_job_indexes_are_never_appended_through_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.sweep import singles_read

    victim = tmp_path / "bashrc"
    victim.write_bytes(VICTIM_TEXT)
    base = tmp_path / "jobs"
    base.mkdir()
    (base / singles_read.INDEX_FILE).symlink_to(victim)
    user_index = tmp_path / "cache" / singles_read.USER_INDEX_FILE
    user_index.parent.mkdir()
    user_index.symlink_to(victim)
    monkeypatch.setattr(singles_read, "_user_index", lambda: user_index)
    singles_read.index_job(base, "1234", "r-abc")  # a lost index line costs a scan later, never a write there
    assert victim.read_bytes() == VICTIM_TEXT
