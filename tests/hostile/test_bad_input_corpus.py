"""Hostile and broken input files: each must exit 2 with ``FILE:LINE`` and a message, never a traceback or a hang.

The corpus (``corpus/experiments/*.yaml``, ``corpus/sites/*.yaml``) is listed in ``corpus/EXPECTED.tsv``:
for each file the line the message must point at and a fragment of the message. Experiment files are
rendered (``hpcjobs render FILE --site local``), site files validated (``hpcjobs site validate FILE``).
Cases that need special files (a FIFO, ``/dev/zero``, 50 MB, a directory) or big generated text
(billion laughs, 5000 nested brackets, 5000-digit numbers on the command line) are made here, and the
ones that could block or eat memory run ``python -m hpcjobs`` in a subprocess with a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.config.yamlio import MAX_FILE_BYTES

CORPUS = Path(__file__).parent / "corpus"
MINIMAL = "name: corpus\nresources:\n  memory: 1G\n  walltime: 10m\ncommand: echo hi\n"
#: Seconds a subprocess may take before the case counts as a hang (generous: the machine may be busy).
HANG_SECONDS = 120


@dataclass(frozen=True)
class Case:
    """One corpus file and what its error must say."""

    path: Path
    line: int
    fragment: str
    pending: bool
    why: str

    @property
    def kind(self) -> str:
        return self.path.parent.name


def _corpus() -> list[Case]:
    cases = []
    for row in (CORPUS / "EXPECTED.tsv").read_text(encoding="utf-8").splitlines():
        if not row or row.startswith("#"):
            continue
        rel, line, fragment, status, why = row.split("\t")
        cases.append(Case(CORPUS / rel, int(line), fragment, status == "pending", why))
    return cases


CASES = _corpus()


def _argv(path: Path) -> list[str]:
    if path.parent.name == "sites":
        return ["site", "validate", str(path)]
    return ["render", str(path), "--site", "local"]


def _check_exit_2(exit_code: int, output: str, file: str, line: int | None, fragment: str) -> None:
    assert "Traceback" not in output, output
    assert "unexpected error" not in output, output
    assert exit_code == 2, output
    where = f"{file}:{line}" if line is not None else f"{file}:"
    assert where in output, f"expected {where!r} in:\n{output}"
    assert fragment in output, f"expected {fragment!r} in:\n{output}"


def _run_cli(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def _run_subprocess(args: list[str], cwd: Path) -> tuple[int, str]:
    """``python -m hpcjobs ARGS``; a hang past :data:`HANG_SECONDS` fails the test (TimeoutExpired)."""
    env = {**os.environ, "HPCJOBS_SITE": "local", "COLUMNS": "300"}
    proc = subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace", timeout=HANG_SECONDS)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_corpus_has_at_least_a_hundred_files_each_listed_once():
    listed = sorted(c.path for c in CASES)
    on_disk = sorted(CORPUS.glob("*/*.yaml"))
    assert listed == on_disk
    assert len(on_disk) >= 100
    assert {c.kind for c in CASES} == {"experiments", "sites"}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}/{c.path.stem}" for c in CASES])
def test_corpus_file_exits_2_with_file_line_and_message(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    exit_code, output = _run_cli(_argv(case.path))
    if case.pending and exit_code != 2:
        pytest.xfail(f"needs the schema to refuse it ({case.why}); it exited {exit_code}")
    _check_exit_2(exit_code, output, str(case.path), case.line, case.fragment)


# --- generated at test time ---------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_a_fifo_as_the_experiment_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "exp.yaml"
    os.mkfifo(fifo)  # nobody ever writes: reading it would block for ever
    code, out = _run_subprocess(["render", str(fifo), "--site", "local"], tmp_path)
    _check_exit_2(code, out, str(fifo), None, "this is a FIFO (named pipe), not a regular file")


def test_a_fifo_as_a_site_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "site.yaml"
    os.mkfifo(fifo)
    code, out = _run_subprocess(["site", "validate", str(fifo)], tmp_path)
    _check_exit_2(code, out, str(fifo), None, "this is a FIFO (named pipe), not a regular file")


def test_dev_zero_as_the_experiment_file_is_refused_not_read(tmp_path: Path) -> None:
    code, out = _run_subprocess(["render", "/dev/zero", "--site", "local"], tmp_path)
    _check_exit_2(code, out, "/dev/zero", None, "this is a character device, not a regular file")


def test_a_link_to_dev_zero_named_like_a_site_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    code, out = _run_subprocess(["render", str(_write(tmp_path, "e.yaml", MINIMAL)), "--site", str(link)], tmp_path)
    _check_exit_2(code, out, str(link), None, "this is a character device, not a regular file")


def test_a_fifo_on_the_site_search_path_does_not_block_detection(tmp_path: Path) -> None:
    sites = tmp_path / "sites"
    sites.mkdir()
    os.mkfifo(sites / "stuck.yaml")
    env = {**os.environ, "HPCJOBS_SITE_PATH": str(sites)}
    env.pop("HPCJOBS_SITE", None)
    proc = subprocess.run([sys.executable, "-m", "hpcjobs", "site", "list", "--json"], cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert proc.returncode == 0, proc.stderr
    assert '"name": "stuck"' in proc.stdout and '"valid": false' in proc.stdout


def test_a_50_megabyte_file_is_refused_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as fh:
        fh.write(MINIMAL + "# " + "x" * 1024 + "\n")
        fh.truncate(50 * 1024 * 1024)  # the rest is a sparse hole of NULs: no disk used
    code, out = _run_subprocess(["render", str(big), "--site", "local"], tmp_path)
    _check_exit_2(code, out, str(big), None, f"the file is 52,428,800 bytes, over the limit of {MAX_FILE_BYTES:,}")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "exp.yaml"
    folder.mkdir()
    code, out = _run_cli(["render", str(folder), "--site", "local"])
    assert code == 2 and "is a directory" in out and "Traceback" not in out


def test_a_directory_through_a_site_path_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "site.yaml"
    folder.mkdir()
    code, out = _run_cli(["render", str(_write(tmp_path, "e.yaml", MINIMAL)), "--site", str(folder)])
    _check_exit_2(code, out, str(folder), None, "this is a directory, not a regular file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "secret.yaml", MINIMAL)
    path.chmod(0)
    code, out = _run_cli(["render", str(path), "--site", "local"])
    _check_exit_2(code, out, str(path), None, "cannot read file: Permission denied")


def test_a_missing_file_is_reported() -> None:
    code, out = _run_cli(["site", "validate", "/nonexistent/site.yaml"])
    _check_exit_2(code, out, "/nonexistent/site.yaml", None, "file not found")


def test_billion_laughs_in_a_subprocess_ends_quickly_with_the_limit(tmp_path: Path) -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    path = _write(tmp_path, "lol.yaml", "\n".join(lines) + "\n" + MINIMAL)
    code, out = _run_subprocess(["render", str(path), "--site", "local"], tmp_path)
    _check_exit_2(code, out, str(path), 6, "values through alias *a4 (limit 1,000,000)")


def test_five_thousand_nested_brackets(tmp_path: Path) -> None:
    path = _write(tmp_path, "deep.yaml", MINIMAL + "params:\n  p: " + "[" * 5000 + "]" * 5000 + "\n")
    code, out = _run_cli(["render", str(path), "--site", "local"])
    _check_exit_2(code, out, str(path), 7, "nesting depth 101 is over the limit of 100 levels")


def test_five_thousand_nested_mappings(tmp_path: Path) -> None:
    path = _write(tmp_path, "deep.yaml", MINIMAL + "params:\n  p: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")
    code, out = _run_cli(["render", str(path), "--site", "local"])
    _check_exit_2(code, out, str(path), 7, "nesting depth 101")


def test_five_thousand_nested_block_sequences(tmp_path: Path) -> None:
    path = _write(tmp_path, "deep.yaml", MINIMAL + "params:\n  p:\n    " + "- " * 5000 + "x\n")
    code, out = _run_cli(["render", str(path), "--site", "local"])
    _check_exit_2(code, out, str(path), 8, "nesting depth 101")


def test_a_5000_digit_integer_in_set_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "e.yaml", MINIMAL)
    for key in ("params.p", "resources.nodes"):
        code, out = _run_cli(["render", str(path), "--site", "local", "--set", f"{key}={'9' * 5000}"])
        assert code == 2 and "Traceback" not in out, out
        assert f"--set: {key}: an integer with 5,000 digits is over the limit of 100 digits" in out


def test_a_5000_digit_integer_in_sweep_arguments_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "e.yaml", MINIMAL)
    code, out = _run_subprocess(["sweep", str(path), "--site", "local", "--dry-run", f"x=1,{'9' * 5000}"], tmp_path)
    assert code == 2 and "Traceback" not in out, out
    assert "an integer with 5,000 digits is over the limit of 100 digits" in out


@pytest.mark.parametrize("value", ["9" * 400 + "G", "9" * 400 + "h"])
def test_400_digit_memory_or_walltime_in_set_is_refused(tmp_path: Path, value: str) -> None:
    key = "resources.memory" if value.endswith("G") else "resources.walltime"
    code, out = _run_cli(["render", str(_write(tmp_path, "e.yaml", MINIMAL)), "--site", "local",
                          "--set", f"{key}={value}"])
    assert code == 2 and "Traceback" not in out, out
    assert "a number with 400 digits" in out


def test_the_same_hostile_file_through_sweep_is_refused_too(tmp_path: Path) -> None:
    path = _write(tmp_path, "e.yaml", MINIMAL + "bad: \x00\n")
    code, out = _run_subprocess(["sweep", str(path), "--site", "local", "--dry-run", "x=1,2"], tmp_path)
    _check_exit_2(code, out, str(path), 6, "a NUL character is not allowed in YAML")


def test_a_good_file_with_a_byte_order_mark_renders(tmp_path: Path) -> None:
    path = _write(tmp_path, "bom.yaml", b"\xef\xbb\xbf" + MINIMAL.encode())
    code, out = _run_cli(["render", str(path), "--site", "local"])
    assert code == 0, out
    assert "echo hi" in out


def test_site_validate_does_not_call_a_bad_file_ok_when_named_with_dot_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    # problems carried the normalised name ("sites/empty.yaml"), so "./sites/empty.yaml" was also reported "ok"
    monkeypatch.chdir(CORPUS)
    code, out = _run_cli(["site", "validate", "./sites/empty.yaml"])
    assert code == 2, out
    assert "./sites/empty.yaml:1:1: missing required key 'name'" in out
    assert "ok  ./sites/empty.yaml" not in out
