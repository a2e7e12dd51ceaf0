"""PBS's waiting jobs explained from real ``qstat -f -F json`` (OpenPBS 23.06.06, tests/data/pbs/openpbs-real).

The testbed runs make each case for real (tests/pbs/test_why_pbs.py); here the recorded answer of a
one-node server with a full node: a queued array (5 subjobs), queued jobs and a job held by its owner.
"""

from __future__ import annotations

from pathlib import Path

from hpcjobs.process import CommandResult
from hpcjobs.schedulers.registry import get_backend

DATA = Path(__file__).resolve().parents[1] / "data" / "pbs" / "openpbs-real"


def _answer(argv: list[str]) -> CommandResult:
    text = (DATA / "qstat-f-json.running.json").read_text() if argv[:3] == ["qstat", "-E", "-f"] else ""
    return CommandResult(tuple(argv), 0, text, "", 0.0)


def test_queued_held_and_running_jobs_of_a_real_answer() -> None:
    query = get_backend("pbspro").explain_pending(["3.vm", "6[].vm", "7.vm", "9.vm", "42.vm"], _answer)
    by_id = {j.job_id: j for j in query.pending}
    assert set(by_id) == {"6[].vm", "7.vm", "8.vm", "9.vm"}
    assert by_id["6[].vm"].tasks == 5 and by_id["6[].vm"].reason.code == "NotEnoughFreeNodes"
    assert by_id["6[].vm"].reason.kind == "wait" and by_id["6[].vm"].detail.startswith("Not Running:")
    assert by_id["9.vm"].reason.code == "HeldUser" and "qrls" in by_id["9.vm"].reason.action
    assert by_id["7.vm"].user == "tester" and by_id["7.vm"].partition == "workq"
    assert query.others == {"3.vm": "RUNNING", "5.vm": "RUNNING", "42.vm": "GONE"}
    assert len(query.calls) == 1  # no limit in the way: the queues are not asked
    groups = query.by_reason()
    assert [r.code for r, _ in groups] == ["NotEnoughFreeNodes", "HeldUser"]
    assert sum(j.tasks for j in groups[0][1]) == 7


def _waiting(argv: list[str]) -> CommandResult:
    name = "qstat-Q-f-json.why-queue.json" if "-Q" in argv else "qstat-E-f-json.waiting.json"
    return CommandResult(tuple(argv), 0, (DATA / name).read_text(), "", 0.0)


def test_every_waiting_case_of_the_testbed_in_two_calls() -> None:
    """Held (``qsub -h``), a dependency (system hold), ``qsub -a``, a queue's per-user run limit, too few CPUs."""
    query = get_backend("pbspro").explain_pending(["90.vm", "91.vm", "92.vm", "93.vm", "94.vm", "95.vm"], _waiting)
    by_id = {j.job_id: j for j in query.pending}
    assert {k: (j.reason.code, j.reason.kind) for k, j in by_id.items()} == {
        "90.vm": ("HeldUser", "hold"), "91.vm": ("Dependency", "dependency"), "92.vm": ("ExecutionTime", "hold"),
        "94.vm": ("RunLimit", "limit"), "95.vm": ("InsufficientResource", "wait")}
    assert by_id["91.vm"].dependency == "afterok:90.vm@vm"
    assert by_id["92.vm"].expected_start is not None and by_id["92.vm"].expected_start.year == 2026
    assert by_id["94.vm"].limits == ["queue hpcjobswhy: max_run [u:PBS_GENERIC=1]"]
    assert by_id["95.vm"].detail == "Not Running: Insufficient amount of resource: ncpus (R: 2 A: 1 T: 2)"
    assert query.others == {"93.vm": "RUNNING"}
    assert [c[:3] for c in query.calls] == [["qstat", "-E", "-f"], ["qstat", "-Q", "-f"]]
