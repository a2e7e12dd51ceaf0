"""The one record of a distributed job (Docker Swarm, Kubernetes) from the records of its ranks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from hpcjobs import states as st
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.containers import distributed_status


def _rank(rank: int, state: str, code: int | None = None, raw: str | None = None) -> JobStatus:
    return JobStatus(job_id=f"j.{rank}", state=state, state_raw=raw or state.title(), array_job_id="j",
                     array_task_id=rank, exit_code=code, name="j")


@pytest.mark.parametrize(("ranks", "cancelled", "expected"), [
    ([], False, (st.PENDING, "0 of 3 ranks started", None)),
    ([_rank(0, st.PENDING)], False, (st.PENDING, "0 of 3 ranks started", None)),
    ([_rank(0, st.RUNNING), _rank(1, st.PENDING)], False, (st.RUNNING, "1 of 3 ranks running, 0 completed", None)),
    ([_rank(0, st.COMPLETED, 0), _rank(1, st.COMPLETED, 0)], False,
     (st.RUNNING, "0 of 3 ranks running, 2 completed", None)),  # rank 2 has not run yet
    ([_rank(i, st.COMPLETED, 0) for i in range(3)], False, (st.COMPLETED, "all 3 ranks completed", 0)),
    ([_rank(0, st.RUNNING), _rank(2, st.FAILED, 5, "Failed")], False, (st.FAILED, "rank 2 of 3: Failed", 5)),
    ([_rank(0, st.FAILED, 1), _rank(1, st.TIMEOUT, 124)], False, (st.TIMEOUT, "rank 1 of 3: Timeout", 124)),
    ([_rank(0, st.FAILED, 1), _rank(1, st.OUT_OF_MEMORY, 137)], False,
     (st.OUT_OF_MEMORY, "rank 1 of 3: Out_Of_Memory", 137)),
    ([_rank(0, st.COMPLETED, 0), _rank(1, st.RUNNING)], True,
     (st.CANCELLED, "cancelled (1 of 3 ranks completed)", None)),
    ([_rank(0, st.CANCELLED)], False, (st.CANCELLED, "cancelled (0 of 3 ranks completed)", None)),
])
def test_distributed_status(ranks: list[JobStatus], cancelled: bool, expected: tuple[str, str, int | None]) -> None:
    rec = distributed_status("j", ranks, 3, cancelled=cancelled)
    assert (rec.state, rec.state_raw, rec.exit_code) == expected
    assert rec.job_id == "j" and rec.array_job_id is None and rec.array_task_id is None


STATES = [st.PENDING, st.RUNNING, st.COMPLETED, st.FAILED, st.TIMEOUT, st.OUT_OF_MEMORY, st.CANCELLED]


@given(hs.lists(hs.sampled_from(STATES), min_size=1, max_size=6), hs.booleans())
def test_completed_only_when_every_rank_completed(states: list[str], cancelled: bool) -> None:
    ranks = [_rank(i, s, 0 if s == st.COMPLETED else None) for i, s in enumerate(states)]
    nodes = len(states)
    rec = distributed_status("j", ranks, nodes, cancelled=cancelled)
    failures = {st.FAILED, st.TIMEOUT, st.OUT_OF_MEMORY}
    if all(s == st.COMPLETED for s in states):
        assert rec.state == st.COMPLETED
    elif failures & set(states):
        assert rec.state in failures and rec.state_raw.startswith("rank ")
    else:
        assert rec.state != st.COMPLETED
