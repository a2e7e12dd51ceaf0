"""Pipelines on the real OpenPBS testbed: ``qsub -W depend=afterok:<array id>`` between two sweeps.

- An upstream of 2 points, one failing: the server deletes the downstream array (qsub(1B)); ``hpcjobs
  status`` records its points ``CANCELLED`` (``upstream failed: deleted by the PBS server (depend)``).
  The failing point ends last, seconds after the other: on this OpenPBS 23.06 a dependant of an array
  whose subjobs end within the same second was seen released although one of them failed (the array's
  own ``Exit_status`` was 1), so the test does not rely on that case (README, Pipelines).
- An upstream that succeeds: the downstream's subjobs start after the upstream's ended (``stime`` of the
  downstream's subjobs against ``obittime`` of the upstream's, from ``qstat -x -f -F json -t``).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.pipeline import PBS_DELETED_STATE_RAW
from pbs._sweep_helpers import SITE, experiment, wait_done

pytestmark = pytest.mark.pbs


def _qtime(text: str) -> datetime:
    return datetime.strptime(text, "%a %b %d %H:%M:%S %Y")


def test_failed_upstream_deletes_downstream(pbs_server, pbs_workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    up = experiment(pbs_workdir, "plpbsup", 2, command='sleep $((4 + 6 * x)); test "$x" = 0')
    down = experiment(pbs_workdir, "plpbsdown", 2, command='touch "$HPCJOBS_SWEEP_DIR/ran-$x"')
    down.write_text(down.read_text() + "after: [plpbsup.yaml]\n")
    up_prep, up_report = run_sweep(up, site=str(SITE), root=root)
    down_prep, down_report = run_sweep(down, site=str(SITE), root=root)
    (up_job,) = up_report.job_ids
    (down_job,) = down_report.job_ids
    with Ledger.open(down_prep.folder) as ledger:
        (sub,) = ledger.submissions(with_points=False)
        assert f"depend=afterok:{up_job}" in (sub.argv or [])
    assert wait_done(up_prep.sweep_id, root) == {"COMPLETED": 1, "FAILED": 1}
    deadline = time.monotonic() + 120
    while True:
        st = sweep_status(down_prep.sweep_id, root=root)
        if st.done:
            break
        assert time.monotonic() < deadline, st.counts
        time.sleep(1)
    assert st.counts == {"CANCELLED": 2}
    assert [p.state_raw for p in st.points] == [PBS_DELETED_STATE_RAW] * 2
    assert not list(down_prep.folder.glob("ran-*"))
    assert pbs_server.jobs(down_job)[down_job]["job_state"] == "F"


def test_downstream_starts_after_upstream(pbs_server, pbs_workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pbs_workdir)
    root = pbs_workdir / "sweeps"
    up_prep, up_report = run_sweep(experiment(pbs_workdir, "plpbsok", 2, command="sleep 4"), site=str(SITE),
                                   root=root)
    down_prep, down_report = run_sweep(experiment(pbs_workdir, "plpbsnext", 2, command="true"), site=str(SITE),
                                       root=root, after=(up_prep.sweep_id,))
    (up_job,) = up_report.job_ids
    (down_job,) = down_report.job_ids
    assert wait_done(up_prep.sweep_id, root) == {"COMPLETED": 2}
    assert wait_done(down_prep.sweep_id, root) == {"COMPLETED": 2}
    up_jobs = pbs_server.jobs(up_job, subjobs=True)
    down_jobs = pbs_server.jobs(down_job, subjobs=True)
    ends = [_qtime(a["obittime"]) for j, a in up_jobs.items() if "[]" not in j]
    starts = [_qtime(a["stime"]) for j, a in down_jobs.items() if "[]" not in j]
    assert len(ends) == 2 and len(starts) == 2
    assert min(starts) >= max(ends), (ends, starts)
