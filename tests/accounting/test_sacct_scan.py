"""The compiled sacct scanner against the pyarrow reader: same DataFrame on every text it accepts.

The scanner (hpcjobs/accounting/sacct/_scan.c) only accepts the spellings sacct prints and hands anything
else to the pyarrow path. These tests check that (1) it accepts the real captured outputs, (2) on what it
accepts, the result equals the pyarrow path's, field for field, whatever the number of parts it is split
in, and (3) on odd text it steps aside, so the result (or the error) is the pyarrow path's.
"""

from __future__ import annotations

import gc
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from hpcjobs.accounting.sacct import scan as sacct_scan
from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, read_sacct_parsable2
from hpcjobs.errors import SchedulerOutputError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "slurm"
FIELDS = [f.lower() for f in SACCT_ACCOUNTING_FIELDS]
CAPTURE_FIELDS = [  # tests/data/slurm/testbed/*.txt (see test_sacct_testbed_capture.py)
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State", "ExitCode", "DerivedExitCode",
    "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "NNodes", "NCPUS",
    "AllocCPUS", "ReqCPUS", "ReqMem", "MaxRSS", "AveRSS", "TotalCPU", "CPUTime", "AllocTRES", "ReqTRES", "NodeList",
    "Comment", "Reason", "WorkDir",
]
STEPS_FIELDS = [  # tests/data/slurm/testbed-22.05_sacct-*.txt
    "JobID", "JobIDRaw", "JobName", "Partition", "State", "ExitCode", "Submit", "Start", "End", "Elapsed",
    "AllocCPUS", "ReqMem", "MaxRSS", "TotalCPU", "AllocTRES", "ReqTRES", "Timelimit", "NodeList",
]

pytestmark = pytest.mark.skipif(not sacct_scan.AVAILABLE and not os.environ.get("CI"),
                                reason="the C sacct scanner is not built here")


def test_scanner_is_built() -> None:
    """CI builds it (hatch_build.py via pip install -e); a missing compiler must not go unnoticed there."""
    assert sacct_scan.AVAILABLE


def _arrow(text: str | bytes | Path, fields: Sequence[str] | None, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    with monkeypatch.context() as mp:
        mp.setattr(sacct_scan, "_ext", None)
        return read_sacct_parsable2(text, fields)


def _outcome(fn: object) -> pd.DataFrame | str:
    try:
        return fn()  # type: ignore[operator,no-any-return]
    except SchedulerOutputError as exc:
        return f"SchedulerOutputError: {exc}"


@pytest.mark.parametrize(("name", "fields"), [
    ("testbed/sacct.txt", CAPTURE_FIELDS),
    ("testbed/sacct_X.txt", CAPTURE_FIELDS),
    ("testbed/sacct_array_midway_X.txt", CAPTURE_FIELDS),
    ("testbed/sacct_running_X.txt", CAPTURE_FIELDS),
    ("testbed/sacct_header_X.txt", None),
    ("testbed-22.05_sacct-steps-parsable2.txt", STEPS_FIELDS),
    ("testbed-22.05_sacct-X-parsable2.txt", STEPS_FIELDS),
])
def test_real_captures_are_scanned_and_agree(name: str, fields: list[str] | None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / name
    names = [f.lower() for f in fields] if fields else path.read_text().splitlines()[0].lower().split("|")
    cols = sacct_scan.scan_columns(path, names, skip_first_line=fields is None)
    assert cols is not None, "the scanner must accept real sacct output"
    pd.testing.assert_frame_equal(read_sacct_parsable2(path, fields), _arrow(path, fields, monkeypatch))


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sacct_ingest", ROOT / "benchmarks" / "bench_sacct_ingest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> bytes:
    """20,000 rows of the benchmark's realistic text (every shape: arrays, het jobs, pending ranges, steps)."""
    return str(_bench().generate(20_000, seed=3)).encode()


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_generated_text_in_parts_agrees(generated: bytes, parts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cols = sacct_scan.scan_columns(generated, FIELDS, False, parts=parts)
    assert cols is not None
    if parts > 1:
        assert isinstance(cols["jobname"], __import__("pyarrow").ChunkedArray)
        assert cols["jobname"].num_chunks == parts
    with monkeypatch.context() as mp:
        mp.setattr(sacct_scan, "_PART_BYTES", max(1, len(generated) // parts))
        scanned = read_sacct_parsable2(generated, SACCT_ACCOUNTING_FIELDS)
    expected = _arrow(generated, list(SACCT_ACCOUNTING_FIELDS), monkeypatch)
    pd.testing.assert_frame_equal(scanned, expected)
    # spot values, read off the generator's rules
    assert scanned.job_id.str.contains("_").any() and scanned.het_offset.notna().any()
    assert scanned.array_task_spec.dropna().str.fullmatch(r"\d+-\d+%4").all()


def test_buffers_outlive_the_text() -> None:
    """The arrays own the scanner's memory: freeing the text and collecting keeps the values."""
    text = bytearray(b"5_3.batch|77.batch|batch|u|a|p|q|c|COMPLETED|0:0|2026-12-01T10:00:00|||Unknown|"
                     b"61|01:00:00|1|4|4|cpu=4|cpu=4|4G|1294440K|01:02.500|n1|hpcjobs:s1:2:0123abcd\n")
    cols = sacct_scan.scan_columns(bytes(text), FIELDS, False)
    assert cols is not None
    del text
    gc.collect()
    ids = cols["jobid"]
    assert ids.field("job_id").to_pylist() == ["5_3"] and ids.field("step").to_pylist() == ["batch"]
    assert ids.field("array_job_id").to_pylist() == ["5"] and ids.field("array_task_id").to_pylist() == [3]
    assert cols["jobidraw"].field("job_id_raw").to_pylist() == ["77"]
    assert cols["maxrss"].to_pylist() == [1294440 * 1024]
    assert cols["totalcpu"].to_pylist() == [pd.Timedelta(seconds=62.5).to_pytimedelta()]
    assert cols["end"].null_count == 1 and cols["eligible"].null_count == 1
    assert cols["state"].to_pylist() == ["COMPLETED"] and cols["comment"].to_pylist() == ["hpcjobs:s1:2:0123abcd"]


@pytest.mark.parametrize("text", [
    b"1|COMPLETED|1796226819\n",               # epoch seconds (SLURM_TIME_FORMAT=%s)
    b"1|COMPLETED|2026-12-01 10:00:00\n",      # another time spelling
    b"1|COMPLETED|2026-02-29T10:00:00\n",      # not a day
    b"1|COMPLETED|2026-12-01T10:00:00\r\n",    # CR LF
    b"1|COMPLETED\n",                           # too few fields
    b"1|COMPLETED|Unknown|x\n",                # too many
    b"1.a.b|COMPLETED|Unknown\n",              # a step name sacct does not print
    b"1_[1.5]|PENDING|Unknown\n",              # not a range list
    b"2+3_4.0|COMPLETED|Unknown\n",            # het before array
    b"12345678901234567890|COMPLETED|Unknown\n",  # past int64
    b"1|CANCELLED by \xe9|Unknown\n",          # not UTF-8
])
def test_odd_text_goes_to_pyarrow(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["jobid", "state", "submit"]
    assert sacct_scan.scan_columns(text, names, False) is None
    fields = ["JobID", "State", "Submit"]
    scanned = _outcome(lambda: read_sacct_parsable2(text, fields))
    expected = _outcome(lambda: _arrow(text, fields, monkeypatch))
    if isinstance(expected, str):
        assert scanned == expected
    else:
        assert isinstance(scanned, pd.DataFrame)
        pd.testing.assert_frame_equal(scanned, expected)


def test_header_empty_lines_and_no_final_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "JobID|State|Submit\n\n7|COMPLETED|2026-12-01T10:00:00\n\n8|FAILED|Unknown"
    cols = sacct_scan.scan_columns(text.encode(), ["jobid", "state", "submit"], True)
    assert cols is not None and len(cols["state"]) == 2
    df = read_sacct_parsable2(text, None)
    pd.testing.assert_frame_equal(df, _arrow(text, None, monkeypatch))
    assert list(df.job_id) == ["7", "8"] and pd.isna(df.submit_time[1])


# ---------------------------------------------------------------------------
# Property: random rows of realistic and odd values


REAL = {
    "jobid": ["1001", "1001.batch", "1001.extern", "1001.0", "3_9", "3_9.batch", "100_[5-9%2]", "100_[1,3-4]",
              "102+0", "102+1.0", "7.interactive", "0012_007"],
    "jobidraw": ["1001", "1001.batch", "105", "105.0", "", "0012"],
    "jobname": ["train", "batch", "extern", "", "None", "naïve", "a b"],
    "user": ["alice", "", "bob"], "account": ["proj1", ""], "partition": ["gpu", "debug", ""],
    "qos": ["normal", ""], "cluster": ["c1", ""],
    "state": ["COMPLETED", "FAILED", "CANCELLED by 1000", "TIMEOUT", "PENDING", "RUNNING", "OUT_OF_MEMORY", ""],
    "exitcode": ["0:0", "1:0", "0:15", "0:125", ""],
    "submit": ["2026-12-01T10:00:00", "2024-02-29T23:59:59", "Unknown", "None", ""],
    "eligible": ["2026-12-01T10:00:05", "Unknown", ""], "start": ["2026-12-01T10:00:05", "None", "Unknown"],
    "end": ["2026-12-31T23:59:59", "Unknown", ""],
    "elapsedraw": ["0", "61", "", "999999999"], "timelimit": ["01:00:00", "1-00:00:00", "UNLIMITED",
                                                             "Partition_Limit", ""],
    "nnodes": ["1", "2", ""], "alloccpus": ["0", "4", "64", ""], "reqcpus": ["4", ""],
    "alloctres": ["billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1", "cpu=4,mem=16G,node=1", ""],
    "reqtres": ["billing=8,cpu=8,gres/gpu=2,mem=64G,node=1", "cpu=1,mem=3000M,node=1", ""],
    "reqmem": ["16G", "3000Mc", "48000Mn", "0", ""],
    "maxrss": ["1294440K", "0", "891.26M", "16G", "1.5", "2.5", "", "8796093022207K"],
    "totalcpu": ["00:00:03", "1-00:00:00", "00:00.001", "12-01:02:03", "59:59.999", ""],
    "nodelist": ["n001", "None assigned", "gpu[01-02]", ""],
    "comment": ["", "hpcjobs:lr.sweep:3:0123abcd", "note hpcjobs:s-1:12:00000000ffff more", "None", "✓"],
}
ODD = {
    "jobid": ["1.a.b", "abc", "1_", "1_[]", "2+3_4.0", "1..2", " 1", "99999999999999999999"],
    "submit": ["1796226819", "2026-13-01T00:00:00", "2026-12-01 10:00:00", "2026-12-01"],
    "elapsedraw": ["x", "-1", "1.5"], "alloccpus": ["four"],
    "maxrss": ["16?", "1e3K", ".5M", "5.K", "99999999999999999999K", "-5K", "8796093022208K"],
    "totalcpu": ["INVALID", "05:00", "1:2:3", "00:00:00.5"],
    "jobidraw": ["12.a.b", "+12"],
}


@hs.composite
def sacct_rows(draw: hs.DrawFn, odd: bool) -> bytes:
    n = draw(hs.integers(1, 12))
    lines = []
    for _ in range(n):
        values = []
        for field in FIELDS:
            choices = REAL[field] + (ODD.get(field, []) if odd else [])
            values.append(draw(hs.sampled_from(choices)))
        lines.append("|".join(values))
    return ("\n".join(lines) + "\n").encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=sacct_rows(odd=False))
def test_realistic_rows_agree(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sacct_scan.scan_columns(text, FIELDS, False) is not None
    pd.testing.assert_frame_equal(read_sacct_parsable2(text, SACCT_ACCOUNTING_FIELDS),
                                  _arrow(text, SACCT_ACCOUNTING_FIELDS, monkeypatch))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=sacct_rows(odd=True))
def test_any_rows_agree_or_fail_alike(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned = _outcome(lambda: read_sacct_parsable2(text, SACCT_ACCOUNTING_FIELDS))
    expected = _outcome(lambda: _arrow(text, SACCT_ACCOUNTING_FIELDS, monkeypatch))
    if isinstance(expected, str):
        assert scanned == expected
    else:
        assert isinstance(scanned, pd.DataFrame)
        pd.testing.assert_frame_equal(scanned, expected)
