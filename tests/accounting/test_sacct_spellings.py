"""Every spelling of sacct text: --parsable/--parsable2, any --delimiter, header or not; refusals that say why.

The captures in ``tests/data/slurm/spellings/`` are the same jobs printed by the real Slurm 22.05 testbed in
each spelling (commands in tests/data/SOURCES.md), so every readable one must give the same frame.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from hpcjobs.accounting.report_source import detect_format, read_saved
from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, read_sacct_parsable2
from hpcjobs.errors import ConfigError, SchedulerOutputError
from hpcjobs.skipped import SkippedRecordsWarning

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm" / "spellings"
ROOT = Path(__file__).resolve().parents[2]
#: The --format list of the captures (hpcjobs' SACCT_ACCOUNTING_FIELDS when they were made).
CAPTURE = ["JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "State", "ExitCode",
           "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Timelimit", "NNodes", "AllocCPUS", "ReqCPUS",
           "AllocTRES", "ReqTRES", "ReqMem", "MaxRSS", "TotalCPU", "NodeList", "Comment"]
pytestmark = pytest.mark.usefixtures("sacct_reader")  # each test under the C scanner and the pyarrow path

READABLE = [  # file, delimiter given to the API (None: the header names the fields)
    ("sacct_p_noheader.txt", "|", False),
    ("sacct_P_brokenbar_header.txt", "¦", True),
    ("sacct_p_brokenbar_noheader.txt", "¦", False),
    ("sacct_P_tab_header.txt", "\t", True),
    ("sacct_P_semicolon_noheader.txt", ";", False),
]


@pytest.fixture(scope="module")
def reference(sacct_reader: str) -> pd.DataFrame:
    return read_sacct_parsable2(DATA / "sacct_p_header.txt", None)


def test_reference_capture(reference: pd.DataFrame) -> None:
    assert len(reference) == 33
    job = reference[reference.step.isna()].set_index("job_id")
    assert job.loc["2845", "state"] == "FAILED" and job.loc["2845", "exit_code"] == 3
    assert job.loc["2843", "state"] == "TIMEOUT"
    assert job.loc["2846", "state_raw"] == "CANCELLED by 0"
    assert job.loc["2837_0", "sweep_id"] == "fates-c86a1e4b"
    assert job.loc["2837_0", "user"] == "root"


@pytest.mark.parametrize(("name", "delimiter", "header"), READABLE)
def test_every_spelling_reads_the_same(name: str, delimiter: str, header: bool, reference: pd.DataFrame) -> None:
    df = read_sacct_parsable2(DATA / name, None if header else CAPTURE, delimiter=delimiter)
    pd.testing.assert_frame_equal(df, reference)
    assert df.attrs["skipped"] == []


@pytest.mark.parametrize(("name", "delimiter", "header"), [*READABLE, ("sacct_p_header.txt", "|", True)])
def test_saved_files_are_detected_with_their_delimiter(name: str, delimiter: str, header: bool,
                                                       reference: pd.DataFrame) -> None:
    text = (DATA / name).read_text()
    assert detect_format(text) == "sacct-parsable2"
    pd.testing.assert_frame_equal(read_saved(DATA / name, sacct_fields=None if header else CAPTURE), reference)


def test_str_path_is_a_path(reference: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(read_sacct_parsable2(str(DATA / "sacct_p_header.txt"), None), reference)


def test_same_count_other_order_is_refused_naming_the_fields(tmp_path: Path) -> None:
    with pytest.raises(SchedulerOutputError, match=r"field 9 holds 'root', which is not a Slurm state") as e:
        read_sacct_parsable2(DATA / "sacct_P_reordered26_noheader.txt", CAPTURE)
    assert ",".join(CAPTURE) in str(e.value)
    with pytest.raises(ConfigError, match="not the one the text was saved with") as e2:
        read_saved(DATA / "sacct_P_reordered26_noheader.txt", sacct_fields=CAPTURE)
    assert e2.value.problems[0].file == str(DATA / "sacct_P_reordered26_noheader.txt")
    assert "give --sacct-fields" not in str(e2.value)
    fields = ["JobID", "JobIDRaw", "JobName", "State", "Account", "Partition", "QOS", "Cluster", "User", "NNodes",
              "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Timelimit", "ExitCode", "AllocCPUS", "ReqCPUS",
              "AllocTRES", "ReqTRES", "ReqMem", "MaxRSS", "TotalCPU", "NodeList", "Comment"]
    df = read_saved(DATA / "sacct_P_reordered26_noheader.txt", sacct_fields=fields)
    assert (df.state == "FAILED").sum() == 8 and set(df.user.dropna()) == {"root"}
    # headerless text with hpcjobs' default field count, but swapped columns: refused without a field list
    default = list(SACCT_ACCOUNTING_FIELDS)
    i, j = default.index("State"), default.index("User")
    row = dict.fromkeys(default, "")
    row.update(JobID="7", State="COMPLETED", User="alice", ExitCode="0:0")
    row["State"], row["User"] = row["User"], row["State"]
    f = tmp_path / "swapped.txt"
    f.write_text("|".join(row[k] for k in default) + "\n")
    with pytest.raises(ConfigError, match=rf"field {i + 1} holds 'alice', which is not a Slurm state") as e3:
        read_saved(f)
    assert "--sacct-fields" in str(e3.value) and ",".join(default) in str(e3.value) and j >= 0


def test_comma_delimiter_inside_tres_is_refused_not_misread() -> None:
    with pytest.raises(ConfigError, match=r"line 1 has 32 .*comma does in TRES") as e:
        read_saved(DATA / "sacct_P_comma_noheader.txt", sacct_fields=CAPTURE)
    assert "taken to be ','" in str(e.value)


@pytest.mark.parametrize("name", ["sstat_P_header.txt", "sstat_p_noheader.txt", "sstat_P_fields_header.txt"])
def test_sstat_output_is_named(name: str) -> None:
    fmt = detect_format((DATA / name).read_text())
    with pytest.raises(ConfigError, match="this is sstat output") as e:
        read_saved(DATA / name)
    assert "--sacct-fields" not in str(e.value)
    assert fmt in ("sstat", "sacct-parsable2")
    with pytest.raises(SchedulerOutputError, match="this is sstat output"):
        read_sacct_parsable2(DATA / name, None if "noheader" not in name else CAPTURE)


def test_lines_with_another_field_count_are_skipped_and_counted(reference: pd.DataFrame) -> None:
    lines = (DATA / "sacct_p_header.txt").read_text().splitlines()
    lines.insert(5, "2846|2846|a name|with|a|broken")  # a job name holding the delimiter, cut by a newline
    lines.insert(6, "line|")
    pattern = r"2 records skipped: line 6: 6 fields, not 26 .*; line 7: 1 field, not 26"
    with pytest.warns(SkippedRecordsWarning, match=pattern) as w:
        df = read_sacct_parsable2("\n".join(lines) + "\n", None)
    pd.testing.assert_frame_equal(df, reference, check_like=False)
    assert [s.line for s in df.attrs["skipped"]] == [6, 7]
    assert len(w[0].message.skipped) == 2  # type: ignore[union-attr]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "hpcjobs", "report", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_cli_delimiter_errors_and_skipped_line(tmp_path: Path) -> None:
    ok = _cli("--from-file", str(DATA / "sacct_p_brokenbar_noheader.txt"), "--delimiter", "¦",
              "--sacct-fields", ",".join(CAPTURE), "--section",
              "failures", "--table", "failures_by_state", "--csv")
    assert ok.returncode == 0, ok.stderr
    assert "FAILED,4," in ok.stdout
    bad = _cli("--from-file", str(DATA / "sacct_P_reordered26_noheader.txt"), "--sacct-fields", ",".join(CAPTURE))
    assert bad.returncode == 2
    assert "sacct_P_reordered26_noheader.txt: line 1: field 9" in bad.stderr
    assert "-:" not in bad.stderr and "give --sacct-fields" not in bad.stderr
    text = (DATA / "sacct_p_header.txt").read_text().splitlines()
    text.insert(3, "9|x")
    f = tmp_path / "dump.txt"
    f.write_text("\n".join(text) + "\n")
    skipped = _cli("--from-file", str(f), "--section", "failures", "--csv")
    assert skipped.returncode == 0, skipped.stderr
    warn = [ln for ln in skipped.stderr.splitlines() if "skipped" in ln]
    assert warn == ["warning: 1 record skipped: line 4: 2 fields, not 26 ('9|x')"]


# --------------------------------------------------------------------------- generated round trips

_STATES = ["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED by 1000", "OUT_OF_MEMORY", "RUNNING", "PENDING"]
_FIELDS = ["JobID", "User", "State", "ExitCode", "Submit", "ElapsedRaw", "AllocCPUS", "MaxRSS"]
_row = hs.tuples(
    hs.integers(1, 10**7), hs.sampled_from(["alice", "bob", "u1", "ölaf"]), hs.sampled_from(_STATES),
    hs.integers(0, 255), hs.integers(0, 2**31 - 1), hs.integers(0, 10**6), hs.integers(1, 512),
    hs.integers(0, 10**9),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=hs.lists(_row, min_size=1, max_size=8, unique_by=lambda r: r[0]),
       delimiter=hs.sampled_from(["|", ";", "\t", "¦", "§", "→", "#", "~~"]),
       trailing=hs.booleans(), header=hs.booleans())
def test_round_trip_every_spelling(rows: list[tuple[int, str, str, int, int, int, int, int]], delimiter: str,
                                   trailing: bool, header: bool) -> None:
    end = delimiter if trailing else ""
    lines = [delimiter.join(_FIELDS) + end] if header else []
    for jid, user, state, code, submit, elapsed, cpus, rss in rows:
        t = pd.Timestamp(submit, unit="s").strftime("%Y-%m-%dT%H:%M:%S")
        lines.append(delimiter.join([str(jid), user, state, f"{code}:0", t, str(elapsed), str(cpus), f"{rss}K"])
                     + end)
    text = "\n".join(lines) + "\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedRecordsWarning)
        df = read_sacct_parsable2(text, None if header else _FIELDS, delimiter=delimiter)
    assert list(df.job_id) == [str(r[0]) for r in rows]
    assert list(df.user.astype(str)) == [r[1] for r in rows]
    assert list(df.state_raw) == [r[2] for r in rows]
    assert list(df.exit_code) == [r[3] for r in rows]
    assert list(df.submit_time) == [pd.Timestamp(r[4], unit="s", tz="UTC") for r in rows]
    assert list(df.elapsed) == [pd.Timedelta(seconds=r[5]) for r in rows]
    assert list(df.cpus) == [r[6] for r in rows]
    assert list(df.max_rss_bytes) == [r[7] * 1024 for r in rows]
    if delimiter in ("|", ";", "\t", "¦"):
        f = Path(os.environ.get("TMPDIR", "/tmp")) / f"hpcjobs-spelling-{os.getpid()}.txt"
        f.write_text(text)
        try:
            saved = read_saved(f, sacct_fields=None if header else _FIELDS)
        finally:
            f.unlink()
        pd.testing.assert_frame_equal(saved, df)


def test_piped_tables_are_full_width() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-m", "hpcjobs", "report", "--from-file", str(DATA / "sacct_p_header.txt"),
                        "--section", "efficiency", "--table", "worst_cpu_waste"], capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(ROOT)}, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if "job_id" in ln)
    assert len(header) > 80 and "…" not in r.stdout
    assert "wasted GPU-h" in header
