"""PBS/Torque accounting logs: the submit time of a job without ``ctime``, jobs with several ``E`` records, and
the jobs left out because they had not ended (the warning ``hpcjobs report`` prints).

Real files: the OpenPBS 23.06.06 log of ``tests/data/pbs/openpbs-real/accounting-20261203.txt`` (server zone
UTC; job ``9.vm`` queued held and deleted: Q then D) and NCAR's PBS Pro lines
``tests/data/pbs/ncar-qhist_casper_20250331_testdata`` (zone America/Denver; ``4215033`` rerun: S, R, S, E).
Where a test edits one, it says which line and how.
"""

from __future__ import annotations

import json
import re
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as hs

from hpcjobs.accounting.report_source import ReportFilters, apply_filters
from hpcjobs.accounting.sources.pbs import read_pbs_accounting
from hpcjobs.accounting.sources.torque import read_torque_accounting
from hpcjobs.cli import main
from hpcjobs.schedulers.pbs.accounting_log import iter_accounting_records, localize
from hpcjobs.skipped import SkippedRecordsWarning

DATA = Path(__file__).resolve().parents[1] / "data" / "pbs"
OPENPBS = DATA / "openpbs-real" / "accounting-20261203.txt"
NCAR = DATA / "ncar-qhist_casper_20250331_testdata"
REAL_LOGS = [(OPENPBS, "UTC"), (NCAR, "America/Denver")]


def _read(text: str, tz: str, reader=read_pbs_accounting) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedRecordsWarning)
        return reader(text, tz=tz)


# --------------------------------------------------------------------------- submit time without ctime


@pytest.mark.parametrize(("path", "tz"), REAL_LOGS, ids=["openpbs", "ncar"])
def test_the_first_q_record_is_written_at_ctime_in_real_logs(path: Path, tz: str) -> None:
    """What the fallback rests on: for every real job with a ``ctime``, its first Q record's stamp is that second."""
    first_q: dict[str, datetime] = {}
    ctime: dict[str, int] = {}
    for rec in iter_accounting_records(path.read_text().splitlines()):
        if rec.record_type == "Q":
            first_q.setdefault(rec.job_id, rec.time)
        if "ctime" in rec.attrs:
            ctime.setdefault(rec.job_id, int(rec.attrs["ctime"]))
    assert len(first_q) >= 4 and set(first_q) <= set(ctime)  # subjobs have no Q record (their parent has)
    for job_id, when in first_q.items():
        assert localize(when, tz).timestamp() == ctime[job_id], job_id


def test_a_job_deleted_while_queued_keeps_its_submit_time_without_ctime() -> None:
    """The real OpenPBS log, edited: the ``ctime=``/``qtime=``/``etime=`` of job 9's Q line (line 12) removed, as a
    Torque Q record (``queue=`` only) is written; the D record follows as recorded."""
    lines = OPENPBS.read_text().splitlines(keepends=True)
    assert ";Q;9.vm;" in lines[11]
    lines[11] = re.sub(r" (ctime|qtime|etime)=\d+", "", lines[11])
    df = _read("".join(lines), "UTC").set_index("job_id")
    assert df.loc["9.vm", "submit_time"] == pd.Timestamp("2026-12-03 07:41:19", tz="UTC")  # = the real ctime
    assert df.loc["9.vm", "state"] == "CANCELLED"
    until = apply_filters(df.reset_index(), ReportFilters(until=datetime.fromisoformat("2026-12-03T07:41:19+00:00")))
    assert "9.vm" not in set(until["job_id"])  # submitted at 07:41:19, not before it


_T0 = datetime(2026, 12, 3, 7, 0, 0)


@settings(max_examples=150, deadline=None)
@given(data=hs.data(), kinds=hs.lists(hs.sampled_from("QSRD"), max_size=5), end=hs.sampled_from(["E", "D", ""]),
       torque=hs.booleans())
def test_submit_time_is_ctime_else_the_first_q_stamp(data: hs.DataObject, kinds: list[str], end: str,
                                                     torque: bool) -> None:
    """A job's records in any order, each with or without ``ctime``: submit = that ``ctime`` (one value per job),
    else the earliest Q record's stamp."""
    types = ["Q", *kinds, *([end] if end else [])]
    gaps = data.draw(hs.lists(hs.integers(0, 600), min_size=len(types), max_size=len(types)))
    stamps = [_T0 + timedelta(seconds=sum(gaps[: i + 1])) for i in range(len(types))]
    with_ctime = data.draw(hs.lists(hs.booleans(), min_size=len(types), max_size=len(types)))
    order = data.draw(hs.permutations(range(len(types))))
    ctime = int(localize(stamps[0], "UTC").timestamp()) - data.draw(hs.integers(0, 5))
    lines = []
    for i in order:
        kind, when = types[i], stamps[i]
        attrs = "queue=workq" + (f" ctime={ctime} qtime={ctime} etime={ctime}" if with_ctime[i] and kind != "D" else "")
        if kind in "SRE":
            attrs += f" start={ctime + 10}"
        if kind == "E":
            attrs += f" end={ctime + 20} Exit_status=0"
        if kind == "D":
            attrs = "requestor=u@h"
        lines.append(f"{when:%m/%d/%Y %H:%M:%S};{kind};42.srv;{attrs}")
    df = _read("\n".join(lines) + "\n", "UTC", read_torque_accounting if torque else read_pbs_accounting)
    if not any(t in "ED" for t in types):  # not ended: left out of the rows
        assert df.empty
        return
    has_ctime = any(w and t != "D" for w, t in zip(with_ctime, types, strict=True))
    expected = (pd.Timestamp(ctime, unit="s", tz="UTC") if has_ctime
                else pd.Timestamp(min(s for s, t in zip(stamps, types, strict=True) if t == "Q"), tz="UTC"))
    assert df.loc[0, "submit_time"] == expected


# --------------------------------------------------------------------------- several E records of one job


def test_an_earlier_e_record_of_a_rerun_is_named_not_dropped_silently() -> None:
    """NCAR's real lines, edited: the R record of the rerun job 4215033 (line 6) turned into an E record, as a
    log that writes one E per run would hold it."""
    lines = NCAR.read_text().splitlines(keepends=True)
    assert ";R;4215033." in lines[5]
    lines[5] = lines[5].replace(";R;", ";E;", 1)
    with pytest.warns(SkippedRecordsWarning, match=r"1 record skipped: line 6: E record of 4215033\.casper-pbs "
                                                   r"followed by another E record"):
        df = read_pbs_accounting("".join(lines), tz="America/Denver")
    rows = df[df["job_id"] == "4215033.casper-pbs"]
    real = _read(NCAR.read_text(), "America/Denver").set_index("job_id").loc["4215033.casper-pbs"]
    assert len(rows) == 1 and rows.iloc[0]["start_time"] == real["start_time"]  # the second run's start
    assert rows.iloc[0]["end_time"] == real["end_time"]


@settings(max_examples=80, deadline=None)
@given(runs=hs.integers(1, 4), other_between=hs.lists(hs.booleans(), min_size=4, max_size=4))
def test_one_row_per_job_and_each_earlier_e_record_listed(runs: int, other_between: list[bool]) -> None:
    lines, e_lines = ["12/03/2026 07:00:00;Q;7.srv;queue=workq ctime=1796281200"], []
    for run in range(runs):
        if other_between[run]:  # another job's record between the runs
            lines.append(f"12/03/2026 07:0{run}:30;E;8.srv;queue=workq ctime=1796281200 start=1796281200 "
                         f"end={1796281230 + run} Exit_status=0")
        lines.append(f"12/03/2026 07:0{run}:40;S;7.srv;queue=workq ctime=1796281200 start={1796281240 + 60 * run}")
        lines.append(f"12/03/2026 07:0{run}:50;E;7.srv;queue=workq ctime=1796281200 start={1796281240 + 60 * run} "
                     f"end={1796281250 + 60 * run} Exit_status={run}")
        e_lines.append(len(lines))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = read_pbs_accounting("\n".join(lines) + "\n", tz="UTC")
    row = df[df["job_id"] == "7.srv"]
    assert len(row) == 1 and row.iloc[0]["exit_code"] == runs - 1
    assert row.iloc[0]["end_time"] == pd.Timestamp(1796281250 + 60 * (runs - 1), unit="s", tz="UTC")
    listed = [s.line for s in df.attrs["skipped"] if "7.srv" in s.reason]
    assert listed == e_lines[:-1]
    assert bool([w for w in caught if issubclass(w.category, SkippedRecordsWarning)]) == (runs > 1 or sum(
        other_between[:runs]) > 1)


# --------------------------------------------------------------------------- jobs not ended: the CLI's warning

_OPENPBS_LINES = OPENPBS.read_text().splitlines(keepends=True)


def _unfinished(text: str) -> list[str]:
    ended, seen = set(), []
    for rec in iter_accounting_records(text.splitlines()):
        if rec.job_id not in seen:
            seen.append(rec.job_id)
        if rec.record_type in "EDA":
            ended.add(rec.job_id)
    return [j for j in seen if j not in ended and "[]" not in j]


@pytest.mark.parametrize("cut", range(1, len(_OPENPBS_LINES) + 1))
def test_report_warns_with_the_count_of_jobs_not_ended(tmp_path: Path, cut: int) -> None:
    """The real OpenPBS log cut after each of its lines (a log read while jobs ran): the count and ids on stderr."""
    path = tmp_path / "20261203"
    path.write_text("".join(_OPENPBS_LINES[:cut]))
    res = CliRunner().invoke(main, ["report", "--from-file", str(path), "--tz", "UTC", "--section", "failures",
                                    "--table", "failures_by_state", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    missing = _unfinished(path.read_text())
    notes = [line for line in res.stderr.splitlines() if "had not ended" in line]
    if not missing:
        assert notes == []
        return
    n = len(missing)
    assert len(notes) == 1 and notes[0].startswith(f"warning: {n} job{'s' if n != 1 else ''} had not ended")
    assert all(j in notes[0] for j in missing[:5])
