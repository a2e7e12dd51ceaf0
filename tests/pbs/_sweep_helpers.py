"""Helpers of the sweep tests on the real OpenPBS testbed: experiments, sites, and exactly-once checks.

A point "ran" when a subjob of one of the sweep's arrays started (``qstat -x``: a ``run_count`` of
at least 1; the never-run subjobs of a deleted array show ``Exit_status`` 0 too); the point a subjob
serves is line ``index + 1`` of ``chunks/<chunk>.ids``, the chunk being the one in the array's ``HPCJOBS_TAG``
(``hpcjobs:<sweep>:<chunk>:<token>``, in ``Variable_List``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hpcjobs.states import parse_job_tag
from hpcjobs.sweep.api import sweep_status
from hpcjobs.sweep.ledger.store import Ledger
from pbs.real import PbsServer

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "sites" / "openpbs-sweeps.yaml"
#: Every task appends "<point id> <array id> <index>" here (in the sweep folder).
RUNS = "runs.log"
COMMAND = 'echo "$HPCJOBS_POINT_ID $PBS_ARRAY_ID $PBS_ARRAY_INDEX" >> "$HPCJOBS_SWEEP_DIR/runs.log"; echo "x=$x"'


def experiment(folder: Path, name: str, n: int, command: str = COMMAND, walltime: str = "2m") -> Path:
    """An experiment of ``n`` points ``x = 0..n-1`` (a new sweep id per test run: the file names its folder)."""
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: run in {folder}\nresources: {{walltime: {walltime}}}\n"
                    f"command: |\n  {command}\nsweep:\n  grid:\n    x: {list(range(n))}\n")
    return path


def small_site(folder: Path, max_array_size: int) -> Path:
    """The testbed's site with a lower ``limits.max_array_size`` (chunks of ``max_array_size - 1``)."""
    path = folder / f"openpbs-arrays-{max_array_size}.yaml"
    path.write_text(SITE.read_text().replace("name: openpbs-sweeps", f"name: openpbs-arrays-{max_array_size}")
                    + f"limits:\n  max_array_size: {max_array_size}\n")
    return path


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a ``python -m hpcjobs`` child: this checkout first on the import path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    return env


def wait_done(sweep_id: str, root: Path, timeout: float = 300.0) -> dict[str, int]:
    """Poll ``status`` until every point is final; return the counts."""
    deadline = time.monotonic() + timeout
    while True:
        st = sweep_status(sweep_id, root=root)
        if st.done:
            return st.counts
        assert time.monotonic() < deadline, f"sweep {sweep_id} not done after {timeout:.0f} s: {st.counts}"
        time.sleep(1.0)


def tagged_arrays(server: PbsServer, sweep_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """This sweep's jobs the server knows (history included): id → (chunk of its tag, attributes)."""
    out = {}
    for job_id, attrs in server.jobs().items():
        tag = parse_job_tag(str((attrs.get("Variable_List") or {}).get("HPCJOBS_TAG", "")))
        if tag is not None and tag.sweep_id == sweep_id:
            out[job_id] = (tag.chunk, attrs)
    return out


def ran(attrs: dict[str, Any]) -> bool:
    """Whether a (sub)job started: its run count (a deleted array's never-run subjobs show ``Exit_status`` 0)."""
    return int(attrs.get("run_count") or 0) > 0


def final_subjobs(server: PbsServer, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """:meth:`PbsServer.wait_final` one job at a time: OpenPBS 23.06's ``qstat -f -F json`` prints only
    the first of several job ids."""
    out: dict[str, dict[str, Any]] = {}
    for job_id in job_ids:
        out.update(server.wait_final([job_id]))
    return out


def point_runs(server: PbsServer, folder: Path, sweep_id: str) -> dict[str, list[str]]:
    """Point id → the subjobs of the sweep's arrays that ran it (after every array is final)."""
    arrays = tagged_arrays(server, sweep_id)
    subjobs = final_subjobs(server, list(arrays))
    runs: dict[str, list[str]] = {}
    for job_id, attrs in subjobs.items():
        parent = attrs.get("array_id")
        if parent not in arrays or not ran(attrs):
            continue
        ids = (folder / "chunks" / f"{arrays[parent][0]}.ids").read_text().split()
        runs.setdefault(ids[int(attrs["array_index"])], []).append(job_id)
    return runs


def assert_exactly_once(server: PbsServer, root: Path, sweep_id: str, n: int, *, since: float) -> dict[str, str]:
    """Every point completed once: in the ledger, in the tasks' own log, in ``qstat -x`` and in accounting.

    Returns:
        Point id → the subjob that ran it.
    """
    folder = root / sweep_id
    with Ledger.open(folder) as ledger:
        ids = {p.point_id for p in ledger.points()}
        assert ledger.summary() == {"COMPLETED": n}, ledger.summary()
        assert ledger.check_invariants() == []
        accepted = {s.job_id for s in ledger.submissions() if s.state == "submitted"}
    logged = Counter(line.split()[0] for line in (folder / RUNS).read_text().splitlines())
    assert set(logged) == ids and set(logged.values()) == {1}, logged
    runs = point_runs(server, folder, sweep_id)
    assert set(runs) == ids, f"points no subjob ran: {ids - set(runs)}"
    twice = {p: j for p, j in runs.items() if len(j) != 1}
    assert not twice, f"points run by more than one subjob: {twice}"
    parents = {j.split("[")[0] + "[]." + j.split(".", 1)[1] for js in runs.values() for j in js}
    assert parents <= accepted, f"arrays that ran points but the ledger does not know: {parents - accepted}"
    ended = {}
    for point, (subjob,) in runs.items():
        line = server.wait_accounting(subjob, "E", since=since)
        assert "Exit_status=0 " in line + " ", line
        ended[point] = subjob
    records = [r.split(";")[2] for r in server.accounting_records(since=since) if r.split(";")[1] == "E"]
    counts = Counter(records)
    assert all(counts[j] == 1 for j in ended.values()), {j: counts[j] for j in ended.values()}
    return ended
