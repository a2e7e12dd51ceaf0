"""A sweep on PBS Pro and Torque (the stand-in): chunked under max_array_size, run exactly once, and its
outcome read back from the accounting logs the stand-in wrote."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

import hpcjobs
from hpcjobs.accounting.sources.pbs import read_pbs_accounting
from hpcjobs.accounting.sources.torque import read_torque_accounting
from hpcjobs.sweep.api import run_sweep, sweep_status

SITES = Path(__file__).resolve().parent.parent / "sites"


@pytest.mark.parametrize("pbs_standin", ["pbspro", "torque"], indirect=True)
def test_sweep_chunked_and_accounted(pbs_standin, monkeypatch):
    flavor = pbs_standin.flavor
    pbs_standin.configure(max_array_size=4)
    site = SITES / "pbstest-small-arrays.yaml"
    if flavor == "torque":
        site = pbs_standin.workdir / "torque-small.yaml"
        site.write_text((SITES / "pbstest-small-arrays.yaml").read_text()
                        .replace("scheduler: pbspro", "scheduler: torque").replace("workq", "batch"))
    work = pbs_standin.workdir
    monkeypatch.chdir(work)
    exp = work / "pbsweep.yaml"
    exp.write_text('name: pbsweep\ncommand: \'echo "$HPCJOBS_POINT_ID" >> "$HPCJOBS_SWEEP_DIR/runs.log"; '
                   'test "$x" != 7 || exit 5\'\nsweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n')
    root = work / "sweeps"
    prepared, report = run_sweep(exp, site=str(site), root=root)
    assert report.chunks_submitted == 4  # 10 points, 3 per array (max_array_size 4 → 3 tasks)
    deadline = time.monotonic() + 90
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(0.5)
    assert st.counts == {"COMPLETED": 9, "FAILED": 1}
    runs = Counter((prepared.folder / "runs.log").read_text().split())
    assert set(runs) == {p.point_id for p in prepared.points} and set(runs.values()) == {1}

    # the accounting logs the (stand-in) server wrote, joined back to the sweep's parameters
    acct = pbs_standin.home / "server_priv" / "accounting"
    jobs = read_pbs_accounting(acct) if flavor == "pbspro" else read_torque_accounting(acct)
    df = hpcjobs.load_sweep(prepared.sweep_id, root=root, jobs=jobs)
    fate = dict(zip(df["x"], df["state"].astype(str), strict=True))
    assert fate == {x: ("FAILED" if x == 7 else "COMPLETED") for x in range(10)}
    assert int(df.loc[df["x"] == 7, "exit_code"].iloc[0]) == 5
    assert df["elapsed"].notna().all()


FLAKY_QSUB = """#!/bin/bash
# Every other call: really submit, then lose the answer (the submitter must find the job by its tag).
n=$(( $(cat "$FLAKY_COUNTER" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$FLAKY_COUNTER"
if [ $(( n % 2 )) = 1 ]; then
  "$REAL_QSUB" "$@" > /dev/null
  echo "qsub: cannot connect to server pbs-standin (errno=15010)" >&2
  exit 1
fi
exec "$REAL_QSUB" "$@"
"""


@pytest.mark.parametrize("pbs_standin", ["pbspro", "torque"], indirect=True)
def test_lost_qsub_answers_are_found_by_tag(pbs_standin, monkeypatch):
    import os
    import shutil
    import stat

    flavor = pbs_standin.flavor
    work = pbs_standin.workdir
    bindir = work / "flaky-bin"
    bindir.mkdir()
    wrapper = bindir / "qsub"
    wrapper.write_text(FLAKY_QSUB)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("REAL_QSUB", shutil.which("qsub"))
    monkeypatch.setenv("FLAKY_COUNTER", str(work / "counter"))
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    # hpcjobs takes PBS's clients from $HPCJOBS_PBS_BIN: the flaky qsub, the stand-in's others
    standin_bin = Path(os.environ["HPCJOBS_PBS_BIN"])
    for other in standin_bin.iterdir():
        if other.name != "qsub":
            (bindir / other.name).write_text(f'#!/bin/sh\nexec "{other}" "$@"\n')
            (bindir / other.name).chmod(0o755)
    monkeypatch.setenv("HPCJOBS_PBS_BIN", str(bindir))
    pbs_standin.configure(max_array_size=4)
    site = work / "small.yaml"
    text = (SITES / "pbstest-small-arrays.yaml").read_text()
    if flavor == "torque":
        text = text.replace("scheduler: pbspro", "scheduler: torque").replace("workq", "batch")
    site.write_text(text)
    monkeypatch.chdir(work)
    exp = work / "lost.yaml"
    exp.write_text('name: lost\ncommand: \'echo "$HPCJOBS_POINT_ID" >> "$HPCJOBS_SWEEP_DIR/runs.log"\'\n'
                   "sweep:\n  grid:\n    x: [0, 1, 2, 3, 4, 5, 6, 7, 8]\n")
    root = work / "sweeps"
    prepared, _report = run_sweep(exp, site=str(site), root=root)
    assert int((work / "counter").read_text()) == 3  # three chunks, answers lost for two of them
    deadline = time.monotonic() + 90
    while not (st := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, st.counts
        time.sleep(0.5)
    assert st.counts == {"COMPLETED": 9}
    runs = Counter((prepared.folder / "runs.log").read_text().split())
    assert set(runs) == {p.point_id for p in prepared.points} and set(runs.values()) == {1}
