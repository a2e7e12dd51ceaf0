"""Pipelines on the real Slurm testbed: a downstream sweep waits for its upstream with ``afterok``.

- An upstream of 2 points, one of which fails: the downstream (``after:`` it, ``when: ok``) never runs;
  Slurm keeps it ``PENDING`` with the reason ``DependencyNeverSatisfied``, and ``hpcjobs status`` reports it,
  cancels it with one ``scancel`` and records its points ``CANCELLED`` (no job of it left in squeue).
- An upstream that succeeds: the downstream (``--after`` on the command line) runs after it: its tasks start
  no earlier than the upstream's last task ended (sacct Start and End, read once the rows are complete).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from real_testbed import wait_for

from hpcjobs.process import run_command
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.pipeline import BLOCKED_STATE_RAW

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SITE = str(REPO / "tests" / "sites" / "hpctest.yaml")


def _experiment(folder: Path, name: str, command: str, extra: str = "") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n"
                    f"description: run in {folder}\n"  # a new sweep id per test run
                    "resources: {walltime: 5m}\n"
                    f"command: {json.dumps(command)}\n"
                    f"{extra}"
                    "sweep:\n  grid:\n    x: [0, 1]\n")
    return path


def _job_ids(root: Path, sweep_id: str) -> list[str]:
    with Ledger.open(root / sweep_id) as ledger:
        return [s.job_id for s in ledger.submissions(with_points=False) if s.state == "submitted" and s.job_id]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCJOBS_SUBMIT_LOOKUP_S", "20")
    return tmp_path


def test_failed_upstream_blocks_downstream_which_is_cancelled(slurm_testbed, workdir: Path) -> None:
    root = workdir / "sweeps"
    up = _experiment(workdir, "plup", 'sleep 8; test "$x" = 0')  # point x=1 exits 1
    down = _experiment(workdir, "pldown", 'touch "ran-$HPCJOBS_POINT_ID"', "after: [plup.yaml]\n")
    up_prep, up_report = run_sweep(up, site=SITE, root=root)
    down_prep, down_report = run_sweep(down, site=SITE, root=root)
    (up_job,) = up_report.job_ids
    (down_job,) = down_report.job_ids
    try:
        with Ledger.open(down_prep.folder) as ledger:
            (sub,) = ledger.submissions(with_points=False)
            assert f"--dependency=afterok:{up_job}" in (sub.argv or [])
            (rec,) = ledger.upstreams()
            assert (rec.sweep_id, rec.condition, rec.job_ids) == (up_prep.sweep_id, "ok", (up_job,))
        wait_for("the upstream to end", lambda: sweep_status(up_prep.sweep_id, root=root).done, 240, every=2)
        assert sweep_status(up_prep.sweep_id, root=root).counts == {"COMPLETED": 1, "FAILED": 1}

        def blocked():  # type: ignore[no-untyped-def]
            st = sweep_status(down_prep.sweep_id, root=root)
            return st if st.upstream_cancelled else None

        st = wait_for("Slurm to report DependencyNeverSatisfied", blocked, 240, every=2)
        assert st.upstream_cancelled == (down_job,)
        assert st.counts == {"CANCELLED": 2}
        assert [(p.state, p.state_raw) for p in st.points] == [("CANCELLED", BLOCKED_STATE_RAW)] * 2
        # nothing of it is left in the queue, and it never ran
        assert run_command(["squeue", "--noheader", f"--jobs={down_job}"], check=False).stdout.strip() == ""
        assert not list(workdir.glob("ran-*"))
        rows = slurm_testbed.sacct_rows([down_job])
        assert rows and all(r["State"].startswith("CANCELLED") for r in rows), rows
        # the next status changes nothing and cancels nothing more
        again = sweep_status(down_prep.sweep_id, root=root)
        assert again.upstream_cancelled == () and again.counts == {"CANCELLED": 2}
    finally:
        run_command(["scancel", up_job, down_job], check=False)


def test_downstream_runs_after_a_passing_upstream(slurm_testbed, workdir: Path) -> None:
    root = workdir / "sweeps"
    up = _experiment(workdir, "plok", "sleep 6")
    down = _experiment(workdir, "plnext", 'touch "ran-$HPCJOBS_POINT_ID"')
    up_prep, up_report = run_sweep(up, site=SITE, root=root)
    (up_job,) = up_report.job_ids
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "hpcjobs", "sweep", str(down), "--site", SITE, "--root", str(root),
                          "--after", up_prep.sweep_id, "--json"], capture_output=True, text=True, env=env,
                         cwd=workdir, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    (down_job,) = report["job_ids"]
    try:
        for sweep_id in (up_prep.sweep_id, report["sweep_id"]):
            wait_for(f"{sweep_id} to end", lambda s=sweep_id: sweep_status(s, root=root).done, 240,  # type: ignore[misc]
                     every=2)
        assert sweep_status(report["sweep_id"], root=root).counts == {"COMPLETED": 2}
        assert len(list(workdir.glob("ran-*"))) == 2
        assert _job_ids(root, report["sweep_id"]) == [down_job]
        up_rows = slurm_testbed.wait_complete_rows([up_job], ["Start", "End"])
        down_rows = slurm_testbed.wait_complete_rows([down_job], ["Start", "End"])
        assert len(up_rows) == 2 and len(down_rows) == 2
        last_end = max(r["End"] for r in up_rows)  # ISO 8601 times of one clock: text order is time order
        first_start = min(r["Start"] for r in down_rows)
        assert first_start >= last_end, (up_rows, down_rows)
    finally:
        run_command(["scancel", up_job, down_job], check=False)
