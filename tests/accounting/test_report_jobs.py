"""`hpcjobs report --jobs [--columns]`: one row per job with its exit explained, like reportseff."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.accounting.report_source import ReportFilters, load_report_frame
from hpcjobs.accounting.reports.jobs import DEFAULT_JOB_COLUMNS, jobs_table
from hpcjobs.cli import main

# real sacct --parsable2 -X output of the Slurm testbed (tests/data/SOURCES.md)
CAPTURE = Path(__file__).resolve().parent.parent / "data" / "slurm" / "testbed" / "sacct_header_X.txt"


def test_one_row_per_job_with_the_exit_explained() -> None:
    df = load_report_frame(ReportFilters(), from_file=str(CAPTURE))
    table = jobs_table(df)
    assert list(table.columns) == list(DEFAULT_JOB_COLUMNS)
    assert len(table) == df["job_id"].nunique() and table["job_id"].is_unique
    by_name = table.set_index("job_name")
    assert by_name.loc["cap-exit3", "exit"] == "exit 3"
    assert by_name.loc["cap-timeout", "exit"] == "time limit reached"
    assert by_name.loc["cap-completed", "state"] == "COMPLETED" and by_name.loc["cap-completed", "exit"] == "success"


def test_cli_columns_csv_and_refusals() -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["report", "--from-file", str(CAPTURE), "--jobs", "--columns", "job_id,state,exit,wait",
                               "--csv"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(rows[0]) == ["job_id", "state", "exit", "wait"]
    assert {r["job_id"]: r["exit"] for r in rows}["5"] == "exit 3"
    bad = runner.invoke(main, ["report", "--from-file", str(CAPTURE), "--jobs", "--columns", "job_id,nope"])
    assert bad.exit_code == 2 and "no job column 'nope'" in bad.output and "cpu_efficiency" in bad.output
    alone = runner.invoke(main, ["report", "--from-file", str(CAPTURE), "--columns", "job_id"])
    assert alone.exit_code == 2 and "--columns goes with --jobs" in alone.output


def test_headerless_text_in_hpcjobs_query_order_is_read(tmp_path: Path) -> None:
    """Text saved headerless with the 30 fields hpcjobs' live query asks for is read without --sacct-fields.

    Built from the real capture (its values, re-ordered to SACCT_QUERY_FIELDS); the five fields the capture
    lacks are left empty, as sacct prints them for jobs without steps or comments.
    """
    from hpcjobs.accounting.sources.slurm import SACCT_QUERY_FIELDS

    lines = CAPTURE.read_text().splitlines()
    names = lines[0].split("|")
    rows = [dict(zip(names, line.split("|"), strict=True)) for line in lines[1:]]
    saved = tmp_path / "query-order.txt"
    saved.write_text("".join("|".join(r.get(f, "") for f in SACCT_QUERY_FIELDS) + "\n" for r in rows))
    out = CliRunner().invoke(main, ["report", "--from-file", str(saved), "--jobs", "--columns", "job_id,state,exit",
                                    "--csv"])
    assert out.exit_code == 0, out.output
    got = {r["job_id"]: (r["state"], r["exit"]) for r in csv.DictReader(io.StringIO(out.stdout))}
    assert got["5"] == ("FAILED", "exit 3") and len(got) == len(rows)


def test_report_sweep_accepts_what_status_accepts_and_refuses_unknown(tmp_path: Path, monkeypatch) -> None:
    """--sweep: exact id, name, unique prefix (as status/cancel/resubmit); unknown or ambiguous: exit 2."""
    from hpcjobs.accounting.report_source import resolve_sweep_name
    from hpcjobs.errors import ConfigError

    monkeypatch.chdir(tmp_path)  # no sweep folder here: the ids in the data answer
    ids = ["fates-c86a1e4b", "fates2-00aa11bb", "it-timeout"]
    assert resolve_sweep_name("fates-c86a1e4b", ids) == "fates-c86a1e4b"
    assert resolve_sweep_name("fates", ids) == "fates-c86a1e4b"  # the name beats the prefix
    assert resolve_sweep_name("fates2", ids) == "fates2-00aa11bb"
    assert resolve_sweep_name("it-t", ids) == "it-timeout"
    with pytest.raises(ConfigError, match="is ambiguous"):
        resolve_sweep_name("fa", ids)
    with pytest.raises(ConfigError, match=r"no sweep 'nosuch'.*fates-c86a1e4b"):
        resolve_sweep_name("nosuch", ids)
    # saved sacct text of the Slurm testbed holding a sweep's jobs (tests/data/SOURCES.md)
    saved = CAPTURE.parent.parent / "spellings" / "sacct_p_header.txt"
    out = CliRunner().invoke(main, ["report", "--from-file", str(saved), "--sweep", "fates", "--jobs", "--csv",
                                    "--columns", "job_id,sweep_id"])
    assert out.exit_code == 0, out.output
    assert {r["sweep_id"] for r in csv.DictReader(io.StringIO(out.stdout))} == {"fates-c86a1e4b"}
    bad = CliRunner().invoke(main, ["report", "--from-file", str(saved), "--sweep", "nosuch"])
    assert bad.exit_code == 2 and "no sweep 'nosuch'" in bad.output
