"""Hostile input to ``hpcjobs report``: exit 2 with the file, line, column and field, never a traceback.

The crafted files start from real captures of the Slurm testbed (tests/data/slurm/, see SOURCES.md)
with one value changed, so everything else about the format is real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hpcjobs.accounting import efficiency, input_warnings
from hpcjobs.accounting.sources.slurm import read_sacct_json
from hpcjobs.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
STEPS = DATA / "testbed-22.05_sacct-steps-parsable2.txt"
SACCT_JSON = DATA / "testbed-22.05_sacct.json"
HEADER = ("JobID|JobIDRaw|JobName|Partition|State|ExitCode|Submit|Start|End|Elapsed|AllocCPUS|ReqMem|MaxRSS|"
          "TotalCPU|AllocTRES|ReqTRES|Timelimit|NodeList")  # the --format of that capture (SOURCES.md)
BIG = "123456789012345678901234567890"


def _report(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["report", *args])
    return result.exit_code, " ".join(result.output.split())


def _sacct_text(tmp_path: Path, old: str, new: str) -> tuple[Path, int, int]:
    """The steps capture with its header and the first ``old`` on line 2 replaced: (file, line, column of new)."""
    lines = [HEADER, *STEPS.read_text().splitlines()]
    assert old in lines[1]
    column = lines[1].index(old) + 1
    lines[1] = lines[1].replace(old, new, 1)
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(lines) + "\n")
    return path, 2, column


def test_the_unchanged_capture_reads(tmp_path: Path) -> None:
    path, _, _ = _sacct_text(tmp_path, "|plain|", "|plain|")
    code, out = _report("--from-file", str(path), "--json", "--section", "failures")
    assert code == 0, out


@pytest.mark.parametrize(("old", "new", "field", "shift"), [
    ("|1|1G|", f"|{BIG}|1G|", "AllocCPUS", 1),
    ("|00:00:02|1|", f"|{BIG}:00:02|1|", "Elapsed", 1),
    ("billing=1,cpu=1,mem=1G", f"billing=1,cpu={BIG},mem=1G", "AllocTRES", 0),
    ("|1G|", f"|{BIG}G|", "ReqMem", 1),
])
def test_sacct_text_number_too_large_names_file_line_column_and_field(
        tmp_path: Path, old: str, new: str, field: str, shift: int) -> None:
    path, line, column = _sacct_text(tmp_path, old, new)
    code, out = _report("--from-file", str(path), "--json")
    assert code == 2, out
    assert f"{path}:{line}:{column + shift}: {field}: " in out, out
    assert "out of range" in out and BIG in out and "Traceback" not in out


def _sacct_json(tmp_path: Path, change: object) -> Path:
    doc = json.loads(SACCT_JSON.read_text())
    change(doc["jobs"][0])  # type: ignore[operator]
    path = tmp_path / "sacct.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize(("where", "key"), [
    ("time.elapsed", "jobs[0].time.elapsed"),
    ("time.start", "jobs[0].time.start"),
    ("time.total.seconds", "jobs[0].time.total.seconds"),
    ("exit_code.return_code", "jobs[0].exit_code.return_code"),
])
def test_sacct_json_number_too_large_names_file_line_and_field(tmp_path: Path, where: str, key: str) -> None:
    def change(job: dict) -> None:
        *head, last = where.split(".")
        node = job
        for k in head:
            node = node[k]
        node[last] = int(BIG)

    path = _sacct_json(tmp_path, change)
    code, out = _report("--from-file", str(path), "--json")
    assert code == 2, out
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if BIG in text)
    assert f"{path}:{line}:" in out and f"{key}: " in out and "out of range" in out, out


def test_json_nested_100000_deep(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, out = _report("--from-file", str(path))
    assert code == 2, out
    assert f"{path}: JSON nested far deeper" in out and "Traceback" not in out
    with pytest.raises(Exception, match="nested too deeply"):
        read_sacct_json(path.read_text())


def test_invalid_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"jobs": [\n  {"a": 1,,}\n]}\n')
    code, out = _report("--from-file", str(path))
    assert code == 2 and f"{path}:2:" in out, out


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--since", "99999999d", "at most 100 years: 36525d"),
    ("--since", "9" * 40 + "w", "at most 100 years"),
    ("--since", "1960-01-01", "not before 1970-01-01"),
    ("--until", "9999-01-01", "more than 100 years from now"),
])
def test_report_window_limits(tmp_path: Path, option: str, value: str, said: str) -> None:
    path, _, _ = _sacct_text(tmp_path, "|plain|", "|plain|")
    code, out = _report("--from-file", str(path), option, value)
    assert code == 2 and f"{option}: " in out and said in out, out


def test_unknown_time_zone_says_how_to_spell_one(tmp_path: Path) -> None:
    path, _, _ = _sacct_text(tmp_path, "|plain|", "|plain|")
    for zone in ("Mars/Olympus", "../../etc/passwd", ""):
        code, out = _report("--from-file", str(path), "--tz", zone)
        assert code == 2 and "Europe/Paris" in out and "UTC" in out, out
    code, out = _report("--from-file", str(path), "--tz", "Europe/Paris", "--json", "--section", "failures")
    assert code == 0, out


def test_negative_elapsed_gives_empty_efficiency_and_a_counted_warning(tmp_path: Path) -> None:
    def backwards(job: dict) -> None:
        job["time"]["end"] = job["time"]["start"] - 100
        job["time"]["elapsed"] = -100

    path = _sacct_json(tmp_path, backwards)
    result = CliRunner().invoke(main, ["report", "--from-file", str(path), "--json", "--section", "efficiency"])
    assert result.exit_code == 0, result.output
    assert "warning: 1 job with a negative elapsed time" in " ".join(result.output.split())
    eff = efficiency(read_sacct_json(path))
    row = eff[eff["job_id"] == "2"].iloc[0]  # the first job of the capture, a plain one
    for column in ("cpu_efficiency", "time_efficiency", "core_hours", "core_hours_wasted", "gpu_hours"):
        assert row[column] is pd.NA, (column, row[column])
    for column in ("cpu_efficiency", "core_hours", "core_hours_used", "core_hours_wasted", "gpu_hours"):
        assert (eff[column].dropna() >= 0).all(), column
    assert input_warnings(read_sacct_json(SACCT_JSON)) == []
