"""Each real testbed's tests run on one xdist worker, in order, under `pytest -n 3 --dist loadgroup`.

scripts/test.sh runs the Slurm, OpenPBS and Swarm tests side by side that way; a Slurm test that stops
slurmdbd for a while must never overlap another Slurm test. Run for real: a pytest in a folder of its own
with three workers and the project's grouping plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

TESTS = Path(__file__).resolve().parent

MODULE = '''
import json, os, time
import pytest

def _record(name):
    with open(os.environ["GROUPS_LOG"], "a") as log:
        log.write(json.dumps({{"test": name, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                              "start": time.monotonic()}}) + "\\n")
    time.sleep(0.2)
{tests}
'''


def _tests(mark: str, prefix: str, module_mark: bool) -> str:
    lines = [f"pytestmark = pytest.mark.{mark}"] if module_mark else []
    for n in range(3):
        if not module_mark:
            lines.append(f"@pytest.mark.{mark}")
        lines.append(f"def test_{mark}_{prefix}{n}():\n    _record('{mark}_{prefix}{n}')")
    return "\n".join(lines)


def test_each_testbeds_tests_share_one_worker_in_order(tmp_path: Path) -> None:
    # marks on the module (pytestmark) and on single tests, in two files per scheduler, interleaved
    for mark, module_mark in (("slurm", True), ("pbs", False), ("swarm", True)):
        (tmp_path / f"test_{mark}_a.py").write_text(MODULE.format(tests=_tests(mark, "", module_mark)))
        (tmp_path / f"test_{mark}_b.py").write_text(MODULE.format(tests=_tests(mark, "b", not module_mark)))
    (tmp_path / "conftest.py").write_text("from testbed_groups import pytest_collection_modifyitems  # noqa\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slurm\n    pbs\n    swarm\n    kubernetes\n")
    log = tmp_path / "groups.jsonl"
    env = {**os.environ, "GROUPS_LOG": str(log), "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup",
         "-m", "slurm or pbs or swarm", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 18
    for mark in ("slurm", "pbs", "swarm"):
        mine = sorted((r for r in runs if r["test"].startswith(mark)), key=lambda r: r["start"])
        assert len({r["worker"] for r in mine}) == 1, (mark, mine)
        # in file order: the a file's tests, then the b file's
        assert [r["test"] for r in mine] == [f"{mark}_{n}" for n in range(3)] + [f"{mark}_b{n}" for n in range(3)]
    # and the three schedulers' groups ran on different workers, side by side
    assert len({r["worker"] for r in runs}) == 3
