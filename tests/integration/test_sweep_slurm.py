"""Sweeps on the real Slurm testbed: chunking past MaxArraySize, flaky sbatch, kill -9, two submitters.

Every task appends its point id to ``runs-<sweep>.log`` in the submit directory; a point must appear there
exactly once, and the scheduler must hold exactly one live array per chunk.
"""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from hpcjobs.process import run_command
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger

pytestmark = pytest.mark.slurm

SITES = Path(__file__).resolve().parent.parent / "sites"
SMALL = str(SITES / "hpctest-small-arrays.yaml")


def _experiment(folder: Path, name: str, n: int) -> Path:
    f = folder / f"{name}.yaml"
    f.write_text(
        f"name: {name}\n"
        f"description: run in {folder}\n"  # a new sweep id per test run (ids derive from the file's text)
        "resources: {walltime: 5m}\n"
        'command: printf "%s %s\\n" "$HPCJOBS_POINT_ID" "$SLURM_ARRAY_JOB_ID" >> "runs-$HPCJOBS_SWEEP_ID.log"\n'
        f"sweep:\n  grid:\n    x: {list(range(n))}\n"
    )
    return f


def _wait_done(sweep_id: str, root: Path, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while True:
        st = sweep_status(sweep_id, root=root)
        if st.done:
            return
        assert time.monotonic() < deadline, f"sweep {sweep_id} not done: {st.counts}"
        time.sleep(2)


def _assert_exactly_once(folder: Path, root: Path, sweep_id: str, n: int) -> None:
    with Ledger.open(root / sweep_id) as ledger:
        ids = {p.point_id for p in ledger.points()}
        assert ledger.summary() == {"COMPLETED": n}, ledger.summary()
        assert ledger.check_invariants() == []
        accepted = {s.job_id for s in ledger.submissions() if s.state == "submitted"}
    runs = Counter(line.split()[0] for line in (folder / f"runs-{sweep_id}.log").read_text().splitlines())
    assert set(runs) == ids, f"missing points: {ids - set(runs)}"
    duplicates = {p: c for p, c in runs.items() if c != 1}
    assert not duplicates, f"points run more than once: {duplicates}"
    # in the scheduler: every job tagged with this sweep is one the ledger accepted, or was cancelled unrun
    tagged = run_command(["sacct", "-n", "-P", "-X", f"--name={sweep_id.rsplit('-', 1)[0]}", "-S", "now-1hour",
                          "--format=JobID,Comment,State"]).stdout.splitlines()
    live = {line.split("|")[0].split("_")[0] for line in tagged
            if f"hpcjobs:{sweep_id}:" in line and not line.split("|")[2].startswith("CANCELLED")}
    assert live <= accepted, f"jobs the ledger does not know: {live - accepted}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def test_sweep_larger_than_max_array_size(slurm_testbed, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    root = workdir / "sweeps"
    exp = _experiment(workdir, "big", 250)
    prepared, report = run_sweep(exp, site=str(SITES / "hpctest.yaml"), root=root)
    assert report.chunks_submitted == 3  # MaxArraySize=101 → chunks of 100, 100, 50
    _wait_done(prepared.sweep_id, root)
    _assert_exactly_once(workdir, root, prepared.sweep_id, 250)


FLAKY_SBATCH = """#!/bin/bash
# Fails some calls: before submitting (nothing queued) or after really submitting (the answer is lost).
n=$(( $(cat "$FLAKY_COUNTER" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$FLAKY_COUNTER"
case $(( n % 4 )) in
  1) echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2; exit 1;;
  2) /usr/bin/sbatch "$@" > /dev/null
     echo "sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection" >&2; exit 1;;
  *) exec /usr/bin/sbatch "$@";;
esac
"""


def test_flaky_sbatch_still_exactly_once(slurm_testbed, workdir, monkeypatch):
    bindir = workdir / "bin"
    bindir.mkdir()
    wrapper = bindir / "sbatch"
    wrapper.write_text(FLAKY_SBATCH)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FLAKY_COUNTER", str(workdir / "counter"))
    monkeypatch.chdir(workdir)
    root = workdir / "sweeps"
    prepared, report = run_sweep(_experiment(workdir, "flaky", 30), site=SMALL, root=root)
    assert int((workdir / "counter").read_text()) > report.chunks_submitted  # failures happened
    _wait_done(prepared.sweep_id, root)
    _assert_exactly_once(workdir, root, prepared.sweep_id, 30)


def _sweep_cmd(exp: Path, root: Path) -> list[str]:
    return [sys.executable, "-m", "hpcjobs", "sweep", str(exp), "--site", SMALL, "--root", str(root), "--json"]


def test_kill_9_at_random_moments_then_resume(slurm_testbed, workdir):
    rng = random.Random(20261202)
    root = workdir / "sweeps"
    total_kills = 0
    for trial in range(3):
        exp = _experiment(workdir, f"kill{trial}", 25)
        kills = 0
        for _ in range(6):
            proc = subprocess.Popen(_sweep_cmd(exp, root), cwd=workdir, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.05, 1.5))  # from just after start to past the submission
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait()
        final = subprocess.run(_sweep_cmd(exp, root), cwd=workdir, capture_output=True, text=True, timeout=300)
        assert final.returncode == 0, final.stderr
        sweep_id = next(d.name for d in root.iterdir() if d.name.startswith(f"kill{trial}-"))
        _wait_done(sweep_id, root)
        _assert_exactly_once(workdir, root, sweep_id, 25)
        total_kills += kills
    assert total_kills >= 1, "no kill landed before a submission ended"


def test_two_concurrent_submitters(slurm_testbed, workdir):
    root = workdir / "sweeps"
    exp = _experiment(workdir, "pair", 30)
    procs = [subprocess.Popen(_sweep_cmd(exp, root), cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    # one submits; the other either finds nothing left to do or is locked out with a clear message
    assert codes[0] == 0, outs
    if codes[1] != 0:
        assert any("being submitted by" in err for _, err in outs), outs
    again = subprocess.run(_sweep_cmd(exp, root), cwd=workdir, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    sweep_id = next(d.name for d in root.iterdir() if d.name.startswith("pair-"))
    _wait_done(sweep_id, root)
    _assert_exactly_once(workdir, root, sweep_id, 30)
