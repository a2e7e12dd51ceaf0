"""Slurm's pending reasons explained: every code of Slurm's list gets words, a family code its resource and scope.

The codes are from https://slurm.schedmd.com/job_reason_codes.html; an unknown one says so rather than guess.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpcjobs.schedulers.slurm.reasons import explain_reason
from hpcjobs.schedulers.slurm.why import _tasks

#: Codes seen in squeue's REASON column of Slurm 22.05 and later, with the kind each is.
KINDS = {
    "Priority": "wait", "Resources": "wait", "None": "wait", "Dependency": "dependency",
    "DependencyNeverSatisfied": "dependency", "BeginTime": "hold", "JobHeldUser": "hold", "JobHeldAdmin": "hold",
    "PartitionTimeLimit": "request", "PartitionNodeLimit": "request", "ReqNodeNotAvail": "cluster",
    "QOSMaxJobsPerUserLimit": "limit", "QOSMaxSubmitJobPerUserLimit": "limit", "QOSMaxCpuPerUserLimit": "limit",
    "QOSMaxGRESPerUser": "limit", "AssocGrpCpuLimit": "limit", "AssocGrpGRES": "limit", "AssocGrpMemLimit": "limit",
    "AssocGrpJobsLimit": "limit", "AssocGrpCPURunMinutesLimit": "limit", "AssocMaxJobsLimit": "limit",
    "MaxCpuPerAccount": "limit", "QOSGrpNodeLimit": "limit", "QOSMaxWallDurationPerJobLimit": "request",
    "QOSMaxCpuPerJobLimit": "request", "QOSMaxNodePerJobLimit": "request", "AssocMaxWallDurationPerJobLimit": "request",
    "JobArrayTaskLimit": "limit", "InvalidAccount": "request", "InvalidQOS": "request", "BadConstraints": "request",
}


@pytest.mark.parametrize(("code", "kind"), sorted(KINDS.items()))
def test_each_code_is_explained_with_what_would_change_it(code: str, kind: str) -> None:
    reason = explain_reason(code)
    assert (reason.code, reason.kind) == (code, kind)
    assert "does not explain" not in reason.summary and reason.action
    assert reason.source.startswith("https://slurm.schedmd.com/")


def test_limit_families_name_the_resource_and_scope() -> None:
    assert "GPUs" in explain_reason("QOSMaxGRESPerUser").summary
    assert "per user" in explain_reason("QOSMaxGRESPerUser").summary
    assert "CPUs x minutes" in explain_reason("AssocGrpCPURunMinutesLimit").summary
    assert "your association" in explain_reason("AssocGrpCpuLimit").summary
    assert "the job's QOS" in explain_reason("QOSGrpNodeLimit").summary


@given(st.text(max_size=80))
def test_any_text_gets_an_answer_and_unknown_ones_say_so(code: str) -> None:
    reason = explain_reason(code)
    assert reason.code == code.strip() and reason.summary and reason.action
    if reason.kind == "other":
        assert "does not explain" in reason.summary


@pytest.mark.parametrize(("job_id", "tasks"), [("1517", 1), ("1517_3", 1), ("1517_[3-10]", 8),
                                               ("1517_[1,3,5-7]", 5), ("1517_[0-99%4]", 100), ("1517_[x]", 1)])
def test_an_arrays_waiting_tasks_are_counted(job_id: str, tasks: int) -> None:
    assert _tasks(job_id) == tasks
