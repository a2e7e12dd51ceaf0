"""Sweeps on the real one-node Docker Swarm testbed: a 6-point sweep with a failing point, status (one
``docker service ps`` per poll, the CLI's table), cancel, and a submission whose answer was lost.

Each check reads Swarm's own records (``docker service inspect``/``ps``) besides the ledger and a log
every task appends to (``runs.log``: one line per point that ran).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hpcjobs import states as st
from hpcjobs.schedulers import client as client_mod
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import cancel_sweep, run_sweep, sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.lookup import LOOKUP_ENV
from hpcjobs.sweep.poll import poll_status
from swarm.real import ROOT, SITE, remove_services, services_of, wait_for

pytestmark = pytest.mark.swarm

#: Every task appends ``<point id> x=<x>`` to the sweep's runs.log, then does what $x says.
COMMAND = 'echo "$HPCJOBS_POINT_ID x=$x" >> "$HPCJOBS_SWEEP_DIR/runs.log"\n  {tail}'


def _experiment(folder: Path, name: str, n: int, tail: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: run in {folder}\nresources: {{cpus_per_task: 1, memory: 256M, "
                    f"walltime: 5m}}\ncommand: |\n  {COMMAND.format(tail=tail)}\nsweep:\n  grid:\n"
                    f"    x: {list(range(n))}\n")
    return path


def _runs(root: Path, sweep_id: str) -> Counter[str]:
    log = root / sweep_id / "runs.log"
    return Counter(line.split()[0] for line in log.read_text().splitlines()) if log.exists() else Counter()


def _done(sweep_id: str, root: Path) -> dict[str, int] | None:
    status = sweep_status(sweep_id, root=root)
    return status.counts if status.done else None


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_six_point_sweep_with_a_failing_point(swarm: None, workdir: Path) -> None:
    root = workdir / "sweeps"
    exp = _experiment(workdir, "six", 6, 'if [ "$x" = 3 ]; then exit 7; fi')
    client = SchedulerClient(get_backend("swarm"))
    prepared, report = run_sweep(exp, site=SITE, root=root, client=client)
    try:
        # one service for the 6 points, named and labelled after the ledger's submission
        services = services_of(prepared.sweep_id)
        assert list(services) == report.job_ids and len(report.job_ids) == 1
        (name, svc), = services.items()
        with Ledger.open(root / prepared.sweep_id) as ledger:
            (sub,) = ledger.submissions()
        assert sub.state == "submitted" and sub.job_id == name
        assert svc["Spec"]["Labels"]["hpcjobs.tag"] == f"hpcjobs:{prepared.sweep_id}:0:{sub.token}"
        assert svc["Spec"]["Mode"]["ReplicatedJob"] == {"MaxConcurrent": 4, "TotalCompletions": 6}

        # every poll is one `docker service ps` for the sweep (none once the ledger has every point final)
        polls: list[dict[str, int]] = []

        def polled_done() -> dict[str, int] | None:
            counting = SchedulerClient(get_backend("swarm"))
            status = sweep_status(prepared.sweep_id, root=root, client=counting)
            polls.append(dict(counting.calls))
            return status.counts if status.done else None

        counts = wait_for("the sweep to finish", polled_done, timeout=180, every=1.0)
        # one `docker service ps` per poll; once every point is recorded final, the poll that recorded it
        # saves the service's records (ps, inspect of service and tasks, of containers) and removes it
        retired = [p for p in polls if p.get("docker", 0) > 1]
        assert polls[0] == {"docker": 1} and all(p in ({"docker": 1}, {}) for p in polls if p not in retired), polls

        def removed() -> bool:  # a slot's later task may still be running: a later poll removes it then
            sweep_status(prepared.sweep_id, root=root)
            return not services_of(prepared.sweep_id)
        wait_for("the service to be removed", removed, timeout=60, every=1.0)
        record = json.loads((root / prepared.sweep_id / "scheduler-records" / f"{name}.json").read_text())
        assert record["service"]["Spec"]["Name"] == name
        assert len(record["tasks"]) >= 6 and len(record["containers"]) >= 6
        assert counts == {st.COMPLETED: 5, st.FAILED: 1}
        with Ledger.open(root / prepared.sweep_id) as ledger:
            failed = [p for p in ledger.points() if p.state == st.FAILED]
            assert [(p.array_index, p.exit_code) for p in failed] == [(3, 7)]
            assert {p.exit_code for p in ledger.points() if p.state == st.COMPLETED} == {0}
            assert ledger.check_invariants() == []
            ids = {p.point_id for p in ledger.points()}
        # Swarm may start slot 3 again after it failed (it fills every slot without a completed task): any
        # such task found the template's claim and exited 0 at once, so the point ran once
        slot3 = [t["Status"]["State"] for t in sorted(record["tasks"], key=lambda t: t["CreatedAt"])
                 if t.get("Slot") == 3]
        # (the service may be removed before Swarm starts slot 3 again: then it has the one task)
        assert slot3[0] == "failed" and set(slot3[1:]) <= {"complete"}, slot3
        runs = _runs(root, prepared.sweep_id)
        assert set(runs) == ids and set(runs.values()) == {1}, runs
        out = (root / prepared.sweep_id / "points" / failed[0].point_id / "stdout.log").read_text()
        assert out == ""  # the command wrote only to runs.log; stdout.log exists and is the point's

        # the CLI's status table, from another process
        res = subprocess.run([sys.executable, "-m", "hpcjobs", "status", prepared.sweep_id, "--root", str(root),
                              "--json"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert data["counts"] == {"COMPLETED": 5, "FAILED": 1}, data
    finally:
        remove_services(prepared.sweep_id)


def test_cancel_keeps_finished_points_and_cancels_the_rest(swarm: None, workdir: Path) -> None:
    root = workdir / "sweeps"
    # each point waits for its release file: the test lets one finish, then cancels the others
    exp = _experiment(workdir, "cancelme", 6,
                      'while [ ! -e "$HPCJOBS_SWEEP_DIR/release.$x" ]; do sleep 0.2; done')
    prepared, report = run_sweep(exp, site=SITE, root=root, client=SchedulerClient(get_backend("swarm")))
    name = report.job_ids[0]
    folder = root / prepared.sweep_id
    try:
        def running(n: int) -> bool:
            return sweep_status(prepared.sweep_id, root=root).counts.get(st.RUNNING, 0) >= n
        wait_for("two points running (the node has 2 CPUs, each task reserves 1)", lambda: running(2), timeout=120)
        started = (folder / "runs.log").read_text().split()
        released = started[1].split("=")[1]  # the x of the first point that started
        (folder / f"release.{released}").touch()

        def one_done() -> bool:
            counts = sweep_status(prepared.sweep_id, root=root).counts
            return counts.get(st.COMPLETED, 0) == 1 and counts.get(st.RUNNING, 0) >= 1
        wait_for("the released point done, another running", one_done, timeout=120)

        client = SchedulerClient(get_backend("swarm"))
        assert cancel_sweep(prepared.sweep_id, root=root, client=client) == [name]
        # the update of the one service, one status poll, then a look whether its tasks have all stopped
        # (then its records are saved and it is removed: 3 more calls)
        assert client.calls in ({"docker": 3}, {"docker": 6}), client.calls
        with Ledger.open(folder) as ledger:
            states = {p.point_id: p.state for p in ledger.points()}
            done = {p.point_id for p in ledger.points() if str(p.params.get("x")) == released}
        assert {p for p, s in states.items() if s == st.COMPLETED} == done
        assert {s for p, s in states.items() if p not in done} == {st.CANCELLED}, states

        # Swarm stops the running tasks and deletes them; the finished one stays, beside the placeholders.
        # Once none runs, a poll saves the service's records and removes it.
        def removed() -> bool:
            with Ledger.open(folder) as ledger:
                poll_status(ledger, SchedulerClient(get_backend("swarm")), active_only=False)
                assert {p.point_id: p.state for p in ledger.points()} == states  # raw states may change
            return not services_of(prepared.sweep_id)
        wait_for("the cancelled service to be removed", removed, timeout=60, every=1.0)
        record = json.loads((folder / "scheduler-records" / f"{name}.json").read_text())
        live = [t for t in record["tasks"] if t["Spec"]["ContainerSpec"]["Image"] != "hpcjobs/cancelled:placeholder"]
        ended = Counter(t["Status"]["State"] for t in live)  # stopped tasks Swarm had not deleted yet: shutdown
        assert ended["complete"] == 1 and set(ended) <= {"complete", "shutdown"}, ended
        runs = _runs(root, prepared.sweep_id)
        # the released point, the other one that was running, and the one that may have started in its place
        assert 2 <= len(runs) <= 3 and set(runs.values()) == {1}, runs
    finally:
        remove_services(prepared.sweep_id)


def test_a_lost_answer_is_found_by_its_name_and_label(swarm: None, workdir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``docker service create`` creates the service but does not answer in time: the submitter looks the
    submission up (``docker service ls`` by label) instead of submitting the chunk again."""
    real = shutil.which("docker")
    assert real
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "docker"
    wrapper.write_text(f'#!/bin/bash\nif [ "$1 $2" = "service create" ]; then "{real}" "$@" >/dev/null; sleep 30; fi\n'
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(client_mod, "SUBMIT_TIMEOUT_S", 3.0)
    monkeypatch.setenv(LOOKUP_ENV, "30")
    root = workdir / "sweeps"
    exp = _experiment(workdir, "lost", 2, "true")
    prepared, report = run_sweep(exp, site=SITE, root=root, client=SchedulerClient(get_backend("swarm")))
    try:
        services = services_of(prepared.sweep_id)
        assert len(services) == 1 and report.job_ids == list(services)
        with Ledger.open(root / prepared.sweep_id) as ledger:
            subs = ledger.submissions()
            assert [(s.state, s.job_id) for s in subs] == [("submitted", report.job_ids[0])]
        wait_for("the sweep to finish", lambda: _done(prepared.sweep_id, root), timeout=120)
        assert set(_runs(root, prepared.sweep_id).values()) == {1}
    finally:
        remove_services(prepared.sweep_id)
