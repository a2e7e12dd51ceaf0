"""Sweeps on the real OpenPBS testbed: chunking by the server's max_array_size, throttle, exactly once
under kill -9 and lying ``qsub`` answers, cancel and resubmit.

Each check reads the server's own records: ``qstat -x -f -F json -t`` (the job tag in
``Variable_List``, subjob states, exit statuses, ``max_run_subjobs``) and the accounting log (one
``E`` record per point), besides the ledger and a log every task appends to.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcjobs.schedulers import client as client_mod
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import cancel_sweep, resubmit_sweep, run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV
from pbs._sweep_helpers import (
    RUNS,
    SITE,
    assert_exactly_once,
    experiment,
    final_subjobs,
    ran,
    small_site,
    subprocess_env,
    tagged_arrays,
    wait_done,
)
from pbs.real import PBS_EXEC, pbs

pytestmark = pytest.mark.pbs


def _server_max_array_size() -> int:
    import json

    data = json.loads(pbs(["qstat", "-B", "-f", "-F", "json"]).stdout)
    return int(next(iter(data["Server"].values()))["max_array_size"])


# ------------------------------------------------------------------------------ chunking, status, logs

def test_sweep_past_max_array_size_is_chunked_by_the_live_server(pbs_server, pbs_workdir, monkeypatch):
    since = time.time()
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    size = _server_max_array_size()
    n = 2 * size + 5  # 45 with the testbed's 20
    client = SchedulerClient(get_backend("pbspro"))
    prepared, report = run_sweep(experiment(pbs_workdir, "big", n), site=str(SITE), root=root, client=client)
    assert client.calls.get("qstat", 0) >= 1  # the server's limits were asked (qstat -B -f -F json)
    arrays = tagged_arrays(pbs_server, prepared.sweep_id)
    sizes = sorted(int(str(a["array_indices_submitted"]).split("-")[-1]) + 1 for _, a in arrays.values())
    assert sorted(report.job_ids) == sorted(arrays) and len(arrays) == report.chunks_submitted
    # the site sets no max_array_size: chunks follow the server's (size - 1 tasks each, indices from 0)
    assert sizes == sorted([size - 1, size - 1, n - 2 * (size - 1)]), sizes
    assert all(s <= size for s in sizes)

    # every status poll is one qstat for all the sweep's arrays
    polls = 0
    deadline = time.monotonic() + 300
    while True:
        counting = SchedulerClient(get_backend("pbspro"))
        st = sweep_status(prepared.sweep_id, root=root, client=counting)
        polls += 1
        assert counting.calls == {"qstat": 1}, counting.calls
        if st.done:
            break
        assert time.monotonic() < deadline, st.counts
        time.sleep(1.0)
    ended = assert_exactly_once(pbs_server, root, prepared.sweep_id, n, since=since)
    # each point's own output came back to its run folder; the scheduler's file of the task, under a
    # name no other chunk uses, says where it went
    logs = pbs_workdir / "hpcjobs-logs"
    with Ledger.open(prepared.folder) as ledger:
        for p in ledger.points():
            point_dir = prepared.folder / "points" / p.point_id
            out = logs / f"{prepared.sweep_id}.{arrays[p.array_job_id][0]}.{p.array_index}.out"
            assert str(point_dir / "stdout.log") in out.read_text(), (out, ended[p.point_id])
            assert (point_dir / "stdout.log").read_text() == f"x={p.params['x']}\n", ended[p.point_id]
            assert (point_dir / "params.json").exists()
    print(f"{n} points in {len(arrays)} arrays; {polls} status polls, one qstat each")


def test_throttle_limits_running_subjobs(pbs_server, pbs_workdir, monkeypatch):
    since = time.time()
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    exp = experiment(pbs_workdir, "thr", 4, command='echo "$HPCJOBS_POINT_ID $PBS_ARRAY_ID" >> '
                     '"$HPCJOBS_SWEEP_DIR/runs.log"; sleep 2')
    prepared, report = run_sweep(exp, site=str(SITE), root=root, throttle=1)
    (array,) = report.job_ids
    assert pbs_server.jobs(array)[array]["max_run_subjobs"] == 1  # qsub -J 0-3%1
    most = 0
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        subjobs = pbs_server.jobs(array, subjobs=True)
        most = max(most, sum(1 for j, a in subjobs.items() if j != array and a.get("job_state") == "R"))
        time.sleep(0.3)
    assert st.counts == {"COMPLETED": 4}
    assert most <= 1
    # and in the server's record: no two subjobs' run times overlap (stime .. obittime, 1 s resolution)
    subjobs = final_subjobs(pbs_server, [array])
    spans = sorted((pbs_server_time(a["stime"]), pbs_server_time(a["obittime"]))
                   for j, a in subjobs.items() if j != array)
    assert len(spans) == 4 and all(b[0] >= a[1] for a, b in itertools.pairwise(spans)), spans
    assert_exactly_once(pbs_server, root, prepared.sweep_id, 4, since=since)


def pbs_server_time(text: str) -> float:
    """Epoch seconds of a qstat time (``Fri Dec  4 07:10:19 2026``, local time)."""
    return time.mktime(time.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y"))


# ------------------------------------------------------------------------------ exactly once: kill -9

def _sweep_cmd(exp: Path, site: Path, root: Path) -> list[str]:
    return [sys.executable, "-m", "hpcjobs", "sweep", str(exp), "--site", str(site), "--root", str(root), "--json"]


def test_kill_9_of_the_submitter_then_rerun_runs_every_point_once(pbs_server, pbs_workdir):
    since = time.time()
    rng = random.Random(20261204)
    root = pbs_workdir / "sweeps"
    site = small_site(pbs_workdir, 4)  # chunks of 3: 4 submissions per run of 12 points
    env = subprocess_env(**{LOOKUP_ENV: "5"})  # PBS answers qsub synchronously: 5 s is plenty
    kills = 0
    for trial in range(2):
        exp = experiment(pbs_workdir, f"kill{trial}", 12)
        for _ in range(5):
            proc = subprocess.Popen(_sweep_cmd(exp, site, root), cwd=pbs_workdir, env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.2, 2.0))  # from the interpreter's start to past the last qsub
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait()
        final = subprocess.run(_sweep_cmd(exp, site, root), cwd=pbs_workdir, env=env, capture_output=True,
                               text=True, timeout=300)
        assert final.returncode == 0, final.stderr
        sweep_id = next(d.name for d in root.iterdir() if d.name.startswith(f"kill{trial}-"))
        wait_done(sweep_id, root)
        assert_exactly_once(pbs_server, root, sweep_id, 12, since=since)
        # arrays the ledger did not accept were never run: deleted as strays, or failed to queue
        with Ledger.open(root / sweep_id) as ledger:
            accepted = {s.job_id for s in ledger.submissions() if s.state == "submitted"}
            strays = {s.job_id for s in ledger.strays()}
        others = set(tagged_arrays(pbs_server, sweep_id)) - accepted
        assert others <= strays, others - strays
    assert kills >= 1, "no kill landed before a run ended"
    print(f"{kills} kill -9 of the submitter")


# ------------------------------------------------------------------------------ exactly once: lying qsub

LYING_QSUB = """#!/bin/bash
# A lying qsub in front of OpenPBS's ($REAL_QSUB). LIE: timeout | lost | id-exit1 | bogus.
real=${REAL_QSUB:?}
case "$LIE" in
  timeout)   # submits, prints nothing, then hangs past hpcjobs' timeout
    "$real" "$@" >/dev/null || exit
    exec sleep 60;;
  lost)      # submits, then fails after printing nothing
    "$real" "$@" >/dev/null || exit
    echo "qsub: cannot connect to server vm (errno=15010)" >&2
    exit 1;;
  id-exit1)  # submits, prints the id, exits non-zero
    "$real" "$@" || exit
    echo "pbs_iff: cannot read reply from pbs_server" >&2
    exit 1;;
  bogus)     # submits, prints an id that does not exist
    "$real" "$@" >/dev/null || exit
    echo "9999990[].vm"
    exit 0;;
esac
exec "$real" "$@"
"""


def _wrapper_bin(folder: Path) -> Path:
    """A folder with the lying qsub and qstat/qdel wrappers that exec the real ones."""
    bindir = folder / "bin"
    bindir.mkdir()
    (bindir / "qsub").write_text(LYING_QSUB)
    for name in ("qstat", "qdel"):
        (bindir / name).write_text(f'#!/bin/sh\nexec "{PBS_EXEC / "bin" / name}" "$@"\n')
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    return bindir


@pytest.mark.parametrize("lie", ["timeout", "lost", "id-exit1", "bogus"])
def test_lying_qsub_ends_with_one_array_per_chunk(lie, pbs_server, pbs_workdir, monkeypatch):
    since = time.time()
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(_wrapper_bin(pbs_workdir)))
    monkeypatch.setenv("REAL_QSUB", str(PBS_EXEC / "bin" / "qsub"))
    monkeypatch.setenv("LIE", lie)
    monkeypatch.setenv(LOOKUP_ENV, "10")
    monkeypatch.setattr(client_mod, "SUBMIT_TIMEOUT_S", 3.0)
    monkeypatch.chdir(pbs_workdir)
    name = f"lie{lie.replace('-', '')}"
    root = pbs_workdir / "sweeps"
    exp = experiment(pbs_workdir, name, 3)
    site = small_site(pbs_workdir, 2)  # one point per array: 3 submissions, 3 lies
    prepared, report = run_sweep(exp, site=str(site), root=root)
    assert report.points_submitted == 3 and report.chunks_submitted == 3
    arrays = tagged_arrays(pbs_server, prepared.sweep_id)
    assert len(arrays) == 3 and {c for c, _ in arrays.values()} == {0, 1, 2}, arrays
    with Ledger.open(prepared.folder) as ledger:
        assert {s.job_id for s in ledger.submissions() if s.state == "submitted"} == set(arrays)
        assert set(report.job_ids) == set(arrays)
        assert ledger.summary() == {"SUBMITTED": 3} and ledger.check_invariants() == []
    _, again = run_sweep(exp, site=str(site), root=root)  # a rerun submits nothing and cancels nothing
    assert again.points_submitted == 0 and again.strays_cancelled == []
    assert set(tagged_arrays(pbs_server, prepared.sweep_id)) == set(arrays)
    wait_done(prepared.sweep_id, root)
    assert_exactly_once(pbs_server, root, prepared.sweep_id, 3, since=since)


# ------------------------------------------------------------------------------ cancel and resubmit

def test_failed_points_are_resubmitted(pbs_server, pbs_workdir, monkeypatch):
    since = time.time()
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    command = ('echo "$HPCJOBS_POINT_ID $PBS_ARRAY_ID" >> "$HPCJOBS_SWEEP_DIR/attempts.log"; '
               'if [ -e "$PBS_O_WORKDIR/fail-$x" ]; then exit 3; fi; '
               'echo "$HPCJOBS_POINT_ID $PBS_ARRAY_ID" >> "$HPCJOBS_SWEEP_DIR/runs.log"')
    exp = experiment(pbs_workdir, "resub", 5, command=command)
    for x in (1, 3):
        (pbs_workdir / f"fail-{x}").write_text("")
    prepared, report = run_sweep(exp, site=str(SITE), root=root)
    assert wait_done(prepared.sweep_id, root) == {"COMPLETED": 3, "FAILED": 2}
    (first,) = report.job_ids
    subjobs = final_subjobs(pbs_server, [first])
    exits = sorted(a.get("Exit_status") for j, a in subjobs.items() if j != first)
    assert exits == [0, 0, 0, 3, 3], exits
    with Ledger.open(prepared.folder) as ledger:
        failed = {p.point_id: p for p in ledger.points() if p.state == "FAILED"}
    assert sorted(p.params["x"] for p in failed.values()) == [1, 3]
    assert {p.exit_code for p in failed.values()} == {3}
    for x in (1, 3):
        (pbs_workdir / f"fail-{x}").unlink()
    _, again, n = resubmit_sweep(prepared.sweep_id, root=root, which=["FAILED"])
    assert n == 2 and again.points_submitted == 2 and again.chunks_submitted == 1
    (second,) = again.job_ids
    assert wait_done(prepared.sweep_id, root) == {"COMPLETED": 5}
    with Ledger.open(prepared.folder) as ledger:
        by_id = {p.point_id: p for p in ledger.points()}
    assert {p: (by_id[p].array_job_id, by_id[p].attempt) for p in failed} == {p: (second, 2) for p in failed}
    attempts = (prepared.folder / "attempts.log").read_text().split()
    assert len(attempts) == 2 * 7  # 5 first runs, 2 reruns: nothing else ran
    runs = (prepared.folder / RUNS).read_text().splitlines()
    assert sorted(line.split()[0] for line in runs) == sorted(by_id)
    for subjob in [j for j in final_subjobs(pbs_server, [second]) if j != second]:
        assert "Exit_status=0 " in pbs_server.wait_accounting(subjob, "E", since=since) + " "


def test_cancel_deletes_queued_and_running_subjobs(pbs_server, pbs_workdir, monkeypatch):
    since = time.time()
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    exp = experiment(pbs_workdir, "cancelme", 3, command='echo "$HPCJOBS_POINT_ID" >> '
                     '"$HPCJOBS_SWEEP_DIR/runs.log"; sleep 100')
    prepared, report = run_sweep(exp, site=str(SITE), root=root)
    (array,) = report.job_ids
    deadline = time.monotonic() + 240
    runs = prepared.folder / RUNS
    while not (runs.exists() and runs.read_text().strip()):  # a task's script is running
        assert time.monotonic() < deadline, "no subjob started"
        time.sleep(0.5)
    assert cancel_sweep(prepared.sweep_id, root=root) == [array]
    subjobs = final_subjobs(pbs_server, [array])
    assert pbs_server.wait_accounting(array, "D", since=since)
    counts = wait_done(prepared.sweep_id, root, timeout=120)
    assert counts == {"CANCELLED": 3}, counts
    fate = {j: (a.get("substate"), a.get("Exit_status"), ran(a)) for j, a in subjobs.items() if j != array}
    assert all(sub == 91 for sub, _, _ in fate.values()), fate  # F/91: deleted
    started = [j for j, (_, _, r) in fate.items() if r]
    # every task that wrote its line had started; a subjob started a moment before the qdel may have
    # been killed before its script wrote (seen on a loaded machine: two started, one line)
    assert 1 <= len(runs.read_text().split()) <= len(started), fate
    # Exit_status is no guide: OpenPBS 23.06 records 0 for the never-run subjobs of a deleted array and,
    # seen here, for its running ones as well (a plain job deleted while running gets 271 or 143), so
    # the ledger's CANCELLED above must come from the substate
    assert all(fate[j][1] in (0, 143, 271) for j in started), fate
    assert all(status == 0 for _, status, r in fate.values() if not r), fate
    for j in started:
        line = pbs_server.wait_accounting(j, "E", since=since)
        assert f"Exit_status={fate[j][1]} " in line, line
    print(f"cancelled subjobs (substate, Exit_status, ran): {fate}")
