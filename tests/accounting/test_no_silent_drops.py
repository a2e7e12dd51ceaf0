"""Every accounting record becomes a row or is counted in a warning: PBS Pro and Torque accounting logs.

The records are the real OpenPBS 23.06 log of tests/data/pbs/openpbs-real/ with their server name replaced
(the id grammar of pbs_server allows any host name; sites name servers oddly) and generated ones.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from hpcjobs.accounting.sources.pbs import read_pbs_accounting
from hpcjobs.accounting.sources.torque import read_torque_accounting
from hpcjobs.skipped import SkippedRecordsWarning

REAL = Path(__file__).resolve().parents[1] / "data" / "pbs" / "openpbs-real" / "accounting-20261203.txt"


def _quiet(read: object, *args: object, **kw: object) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedRecordsWarning)
        return read(*args, **kw)  # type: ignore[operator,no-any-return]


@pytest.mark.parametrize("server", ["vm[1]", "pbs[a-b].example.org", "srv(1)", "h{x}", "pbs-01.cluster"])
def test_odd_server_names_are_read(server: str) -> None:
    text = REAL.read_text()
    plain = _quiet(read_pbs_accounting, text, tz="UTC")
    odd = _quiet(read_pbs_accounting, text.replace(".vm;", f".{server};").replace("].vm;", f"].{server};"),
                 tz="UTC")
    assert len(odd) == len(plain) == 13
    assert sorted(odd.job_id) == sorted(j.replace(".vm", f".{server}") for j in plain.job_id)
    pd.testing.assert_series_equal(odd.state, plain.state)
    pd.testing.assert_series_equal(odd.array_task_id, plain.array_task_id)
    pd.testing.assert_series_equal(odd.job_id_raw, plain.job_id_raw)


def test_bad_lines_and_ids_are_counted_with_line_numbers() -> None:
    lines = REAL.read_text().splitlines()
    lines.insert(2, "12/03/2026 07:40:46;E;not-a-job;user=x end=1")
    lines.insert(4, "garbage that is not a record")
    with pytest.warns(SkippedRecordsWarning, match=r"2 records skipped: line 3: E record of 'not-a-job'") as w:
        df = read_pbs_accounting("\n".join(lines), tz="UTC")
    assert len(df) == 13
    assert [(s.line, s.reason) for s in df.attrs["skipped"]] == [
        (3, "E record of 'not-a-job', not a job id"), (5, "not an accounting record")]
    assert "line 5: not an accounting record ('garbage that is not a record')" in str(w[0].message)


def test_unfinished_jobs_are_listed_without_a_warning_unless_asked_for() -> None:
    """A job still running when the log was written is left out by choice: listed, not a skipped record."""
    import warnings

    lines = [ln for ln in REAL.read_text().splitlines() if ";E;2.vm;" not in ln]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedRecordsWarning)
        df = read_pbs_accounting("\n".join(lines), tz="UTC")
    assert "2.vm" not in set(df.job_id) and df.attrs["unfinished"] == ["2.vm"]
    full = _quiet(read_pbs_accounting, "\n".join(lines), tz="UTC", include_unfinished=True)
    assert full.set_index("job_id").loc["2.vm", "state"] == "RUNNING"


_server = hs.text(hs.characters(min_codepoint=33, max_codepoint=126, exclude_characters=";"), min_size=1,
                  max_size=12)


@settings(max_examples=80, deadline=None)
@given(jobs=hs.lists(hs.tuples(hs.integers(1, 10**9), hs.one_of(hs.none(), hs.integers(0, 9999)), _server,
                               hs.integers(0, 255), hs.integers(1, 64)), min_size=1, max_size=6,
                     unique_by=lambda j: (j[0], j[1])),
       torque=hs.booleans())
def test_generated_records_round_trip(jobs: list[tuple[int, int | None, str, int, int]], torque: bool) -> None:
    lines = []
    for seq, idx, server, status, ncpus in jobs:
        jid = f"{seq}[{idx}].{server}" if idx is not None else f"{seq}.{server}"
        lines.append(f"12/03/2026 07:41:18;E;{jid};user=u queue=q ctime=1796283678 etime=1796283678 "
                     f"start=1796283679 end=1796283700 Exit_status={status} Resource_List.ncpus={ncpus} "
                     f"exec_host=h/0*{ncpus} resources_used.walltime=00:00:21")
    read = read_torque_accounting if torque else read_pbs_accounting
    df = _quiet(read, "\n".join(lines) + "\n", tz="UTC").set_index("job_id")
    assert len(df) == len(jobs)
    for seq, idx, server, status, ncpus in jobs:
        jid = f"{seq}[{idx}].{server}" if idx is not None else f"{seq}.{server}"
        row = df.loc[jid]
        assert row.exit_code == status
        assert row.cpus == ncpus
        assert (pd.isna(row.array_task_id) if idx is None else row.array_task_id == idx)
        assert row.elapsed == pd.Timedelta(seconds=21)
