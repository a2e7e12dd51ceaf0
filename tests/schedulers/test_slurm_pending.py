"""Slurm's waiting jobs explained from real answers of the testbed (tests/data/slurm/testbed/*why*).

The cases were made for real (tests/data/SOURCES.md); tests/integration/test_why_slurm.py makes them again.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from hpcjobs.process import CommandResult
from hpcjobs.schedulers.registry import get_backend

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed"
BASIC = ("You are not running a supported priority plugin\n(priority/basic).\n"
         "Only 'priority/multifactor' is supported.\n")


def _answer(argv: list[str]) -> CommandResult:
    if argv[0] == "sprio":
        return CommandResult(tuple(argv), 1, "", BASIC, 0.0)
    if argv[0] == "sacctmgr":
        return CommandResult(tuple(argv), 0, (DATA / "sacctmgr_why-qos.txt").read_text(), "", 0.0)
    if "--states=RUNNING" in argv:
        return CommandResult(tuple(argv), 0, (DATA / "squeue_why-running.txt").read_text(), "", 0.0)
    return CommandResult(tuple(argv), 0, (DATA / "squeue_why-format.txt").read_text(), "", 0.0)


def test_every_case_of_the_testbed_is_explained_in_at_most_five_calls() -> None:
    query = get_backend("slurm").explain_pending(["720", "721", "722", "723", "709", "99"], _answer)
    by_id = {j.job_id: j for j in query.pending}
    assert {k: j.reason.code for k, j in by_id.items()} == {
        "721": "Dependency", "722": "BeginTime", "723_[1-3]": "QOSMaxJobsPerUserLimit", "720": "JobHeldUser",
        "709": "PartitionTimeLimit"}
    assert by_id["723_[1-3]"].tasks == 3 and by_id["723_[1-3]"].qos == "hpcjobs-why"
    assert by_id["723_[1-3]"].limits == ["QOS hpcjobs-why: MaxJobsPU 1; root has 1 job(s) running in it"]
    assert by_id["721"].dependency == "afterok:720(unfulfilled)" and by_id["720"].dependency == ""
    assert by_id["722"].expected_start == datetime(2026, 12, 7, 14, 17, 57).astimezone(timezone.utc)
    assert by_id["709"].time_limit_s == 1200 and by_id["709"].reason.kind == "request"
    assert by_id["720"].priority == 0 and by_id["721"].priority == 4294901559
    assert query.others == {"723_0": "RUNNING", "99": "GONE"}
    assert [c[0] for c in query.calls] == ["squeue", "sprio", "sacctmgr", "squeue"]
    assert any("priority/basic" in n for n in query.notes)
    assert next(r.code for r, _ in query.by_reason()) == "QOSMaxJobsPerUserLimit"  # 3 tasks: the largest group


def test_a_single_unknown_id_is_gone_not_an_error() -> None:
    def unknown(argv: list[str]) -> CommandResult:
        return CommandResult(tuple(argv), 1, "", "slurm_load_jobs error: Invalid job id specified\n", 0.0)

    query = get_backend("slurm").explain_pending(["123456"], unknown)
    assert query.others == {"123456": "GONE"} and not query.pending and len(query.calls) == 1
