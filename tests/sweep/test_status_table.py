"""A status answer by column: the sacct reader that groups array tasks says what parse_sacct_status says;
the client asks once, falls back as before, and does not read an answer it has applied already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs import process
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.schedulers.slurm.bulk import sacct_status_table
from hpcjobs.schedulers.slurm.formats import parse_sacct_status
from hpcjobs.schedulers.status_table import StatusTable

ROOT = Path(__file__).resolve().parents[2]
# the exact status call on the Slurm 22.05 testbed (tests/data/SOURCES.md): jobs, steps and a 12-task array
REAL = (ROOT / "tests" / "data" / "slurm" / "testbed" / "sacct_status_format.txt").read_text()


def _norm(t: StatusTable) -> tuple[Any, ...]:
    return ({k: sorted(v) for k, v in t.groups.items()}, t.plain, t.parents)


def _reference(text: str) -> StatusTable:
    return StatusTable.from_records(parse_sacct_status(text))


def test_the_real_testbed_answer_reads_the_same() -> None:
    table = sacct_status_table(REAL)
    assert _norm(table) == _norm(_reference(REAL))
    assert table.plain["26"] == ("FAILED", "FAILED", 3) and table.parents == {"30"}
    (key,) = [k for k in table.groups if k[0] == "30"]
    assert key == ("30", "COMPLETED", "COMPLETED", 0, "30_", "") and sorted(table.groups[key]) == list(range(12))


ARRAY = "".join(f"7_{i}|{70 + i}|RUNNING|0:0|None|big|hpcjobs:big-1:0:{'a' * 16}\n" for i in range(50))


@pytest.mark.parametrize("text", [
    ARRAY,
    ARRAY.replace("7_3|73|RUNNING", "7_3|73|FAILED").replace("7_9|79|RUNNING|0:0", "7_9|79|OUT_OF_MEMORY|0:125"),
    ARRAY + "7_3|73|COMPLETED|0:0|None|big|c\n",  # a task twice: the last record wins
    ARRAY + "7_[50-59%2]|7|PENDING|0:0|JobArrayTaskLimit|big|c\n",  # a range beside tasks of its array
    ARRAY + "8_[0-9]|8|PENDING|0:0|JobHeldUser|big|c\n",  # held
    ARRAY + "7_3.batch|73|FAILED|1:0||batch|\n7_3.extern|73|COMPLETED|0:0||extern|\n",
    ARRAY + "9|9|RUNNING|0:0|None|one|c\n9.batch|9|RUNNING|0:0||batch|\n",
    ARRAY + "\n  \n",  # blank lines
    ARRAY.replace("\n", "\r\n"),
    ARRAY + "7_05|75|FAILED|0:0|None|big|c\n",  # an index spelled with a leading zero
    ARRAY + " 7_60|76|FAILED|0:0|None|big|c\n",
    ARRAY + "7_61|761|FAILED\n7_62\n",  # too few fields
    ARRAY + "7_63|763|RUNNING|0:0|None|b|c|with|pipes\n",
    ARRAY.replace("|big|", "|bíg|"),
    ARRAY + "10+1|10|RUNNING|0:0|None|het|c\n",
])
def test_constructed_variants_read_the_same(text: str) -> None:
    assert _norm(sacct_status_table(text)) == _norm(_reference(text))


def test_a_line_that_is_no_job_id_is_refused_as_before() -> None:
    with pytest.raises(SchedulerOutputError):
        sacct_status_table(ARRAY + "garbage|x|RUNNING\n")
    with pytest.raises(SchedulerOutputError):
        sacct_status_table(ARRAY + "7_1.ba.tch|x|RUNNING\n")


_LINE = st.one_of(
    st.builds(lambda j, i, s, e, r: f"{j}_{i}|{j}{i}|{s}|{e}|{r}|n|c", st.sampled_from(["7", "8"]),
              st.integers(0, 12), st.sampled_from(["RUNNING", "PENDING", "COMPLETED", "FAILED", "CANCELLED by 0",
                                                   "TIMEOUT", "weird"]),
              st.sampled_from(["0:0", "1:0", "0:15", "", "x"]), st.sampled_from(["None", "", "JobHeldAdmin"])),
    st.builds(lambda j, i, n: f"{j}_{i}.{n}|x|COMPLETED|0:0||{n}|", st.sampled_from(["7", "8"]), st.integers(0, 12),
              st.sampled_from(["batch", "extern", "0"])),
    st.builds(lambda j, a, b: f"{j}_[{a}-{a + b}%2]|{j}|PENDING|0:0|None|n|c", st.sampled_from(["7", "8", "11"]),
              st.integers(0, 9), st.integers(0, 3)),
    st.builds(lambda j, s: f"{j}|{j}|{s}|0:0|None|n|c", st.sampled_from(["20", "21"]),
              st.sampled_from(["RUNNING", "COMPLETED"])),
)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINE, max_size=40), trailing=st.booleans())
def test_any_mix_of_lines_reads_the_same(lines: list[str], trailing: bool) -> None:
    text = "\n".join(lines) + ("\n" if trailing and lines else "")
    assert _norm(sacct_status_table(text)) == _norm(_reference(text))


def test_a_table_from_records_keeps_the_last_record_and_covers_what_they_name() -> None:
    table = StatusTable.from_records([
        JobStatus("5_1", "RUNNING", "R", "5", 1), JobStatus("5_[0-3]", "PENDING", "PD", "5", None, "0-3"),
        JobStatus("5_2", "FAILED", "F", "5", 2, exit_code=1), JobStatus("6", "RUNNING", "R"),
        JobStatus("1234[3].srv", "RUNNING", "R", "1234[].srv", 3)])
    assert table.groups == {("5", "PENDING", "PD", None, None, None): [1, 0, 3], ("5", "FAILED", "F", 1, "5_", ""): [2],
                            ("1234[].srv", "RUNNING", "R", None, "1234[", "].srv"): [3]}
    assert table.plain == {"6": ("RUNNING", "R", None)}
    assert all(table.covers(j) for j in ("5", "6", "5_2", "1234[3].srv", "1234[].srv"))
    assert not table.covers("7") and not table.covers("5_9")
    assert table.covers("1234[].other", lambda a, b: a.split("]")[0] == b.split("]")[0])


# ------------------------------------------------------------------------------ the client

class _Sacct:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls: list[list[str]] = []

    def __call__(self, argv: Any, **kw: Any) -> CommandResult:
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if argv[0] == "squeue":
            return CommandResult(tuple(argv), 0, "9|9|9|N/A|RUNNING|None\n", "", 0.0)
        return CommandResult(tuple(argv), 0, self.answer, "", 0.0)


def test_the_client_asks_once_and_falls_back_for_ids_accounting_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Sacct(ARRAY)
    monkeypatch.setattr(process, "run_command", fake)
    client = SchedulerClient(get_backend("slurm"))
    table = client.status_table(["7"])
    assert [c[0] for c in fake.calls] == ["sacct"] and table.digest is not None
    assert client.status(["7"]) and [c[0] for c in fake.calls] == ["sacct", "sacct"]
    fake.calls.clear()
    table = client.status_table(["7", "9"])
    assert [c[0] for c in fake.calls] == ["sacct", "squeue"] and "--jobs=9" in " ".join(fake.calls[1])
    assert table.digest is None  # more than the answer's text: never recognised by it


def test_the_client_does_not_read_an_answer_it_is_told_it_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "run_command", _Sacct(ARRAY))
    read: list[str] = []
    backend = get_backend("slurm")
    original = backend.parse_status_table
    monkeypatch.setattr(backend, "parse_status_table", lambda text: read.append(text) or original(text),
                        raising=False)
    client = SchedulerClient(backend)
    first = client.status_table(["7"])
    assert len(read) == 1 and first.digest
    again = client.status_table(["7"], reuse=lambda d: StatusTable.recognised(d, ["7"]) if d == first.digest
                                else None)
    assert len(read) == 1 and again.known == {"7"} and again.covers("7")
