"""Inputs a person names that are not regular files: no read blocks, none is unbounded.

``report --from-file`` and ``advise --from-file`` refuse a FIFO or a device (exit 2, naming the file)
before reading it, and GPU sampler files that are FIFOs, devices or hold a line no sampler writes
are skipped with a warning while the report goes on. Each case runs as a subprocess with a timeout:
a read that blocks fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import run_hpcjobs

from hpcjobs.accounting.report_source import MAX_SAVED_BYTES
from hpcjobs.accounting.sources.gpu import MAX_SAMPLER_LINE

ROOT = Path(__file__).resolve().parents[2]
SACCT_JSON = ROOT / "tests" / "data" / "slurm" / "testbed-22.05_sacct.json"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link_to(device: str) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        path.symlink_to(device)
        return path
    return make


#: Kind of special file -> how to make it at a path, and the words the refusal uses.
SPECIAL: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (_fifo, "a FIFO"),
    "dev-zero": (_link_to("/dev/zero"), "a character device"),
    "dev-urandom": (_link_to("/dev/urandom"), "a character device"),
}


@pytest.mark.parametrize("command", ["report", "advise"])
@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_from_file_refuses_what_is_not_a_regular_file(command: str, kind: str, tmp_path: Path) -> None:
    make, words = SPECIAL[kind]
    path = make(tmp_path / "saved.txt")
    done = run_hpcjobs(command, "--from-file", str(path), cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"{path}: it is {words}, not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "sacct.txt"
    with big.open("wb") as fh:  # sparse: no disk is used
        fh.truncate(MAX_SAVED_BYTES + 1)
    done = run_hpcjobs("report", "--from-file", str(big), cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"it is {MAX_SAVED_BYTES + 1:,} bytes, more than the {MAX_SAVED_BYTES:,} a report reads" in done.stderr


def test_gpu_sampler_files_that_are_not_samples_are_skipped_with_a_warning(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for n, kind in enumerate(sorted(SPECIAL), start=70):
        SPECIAL[kind][0](logs / f"train-{n}.gpu.csv")
    long_line = logs / "train-80.gpu.csv"
    long_line.write_text("timestamp, index, utilization.gpu [%]\n" + "x" * (MAX_SAMPLER_LINE + 1) + "\n"
                         "2026/12/01 10:00:00.000, 0, 50 %\n", encoding="utf-8")
    done = run_hpcjobs("report", "--from-file", str(SACCT_JSON), "--gpu-logs", str(logs), "--section", "efficiency",
                       "--json", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    for n, kind in enumerate(sorted(SPECIAL), start=70):
        assert f"train-{n}.gpu.csv: not read: it is {SPECIAL[kind][1]}, not a regular file" in done.stderr
    assert f"train-80.gpu.csv:2: a line of {MAX_SAMPLER_LINE + 2:,} characters" in done.stderr
    assert "Traceback" not in done.stderr
