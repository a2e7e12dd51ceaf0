"""Bytes from schedulers: invalid UTF-8, 100 MB and endless outputs, unreadable answers.

Fake ``sbatch``/``sacct``/``squeue`` are shell scripts first on ``PATH``, run through the real
:func:`hpcjobs.process.run_command`; the CLI runs in a child Python so its peak memory can be
measured. Every failure must be exit 1 with the command line shown, no traceback, and a bounded
message; what the sweep ledger stores about a failure is bounded too.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import (
    MESSAGE_EXCERPT_BYTES,
    CommandError,
    CommandTimeout,
    SchedulerOutputError,
    excerpt,
)
from hpcjobs.process import output_limits, run_command
from hpcjobs.sweep.ledger.schema import LEDGER_FILE
from tests.hostile._bytes_helpers import HELLO, HUNDRED_MB, SLURM_SITE, fake_bin, path_with, run_cli

MESSAGE_BOUND = 200 * 1024  # bytes of error output the CLI may print
RSS_BOUND_MIB = 300  # generous: the CLI itself takes about 100 MiB; a whole 100 MB output would take ~1 GiB

BAD_UTF8 = r"printf 'sbatch: error: \xff\xfe bad \x80\x80 bytes \xc3(\n' >&2"


def _submit(tmp_path: Path, sbatch: str, *, timeout: float = 60.0):
    # the tag query a new job makes first (nothing of it queued yet) answers as an empty Slurm would
    bin_dir = fake_bin(tmp_path, sbatch=sbatch, squeue="exit 0", sacct="exit 0")
    return run_cli(tmp_path, bin_dir, "submit", str(HELLO), "--site", str(SLURM_SITE), submit_timeout=timeout)


def _assert_command_failure(run, *, code: int = 1) -> str:
    text = run.err_text
    assert run.rc == code, text[-2000:]
    assert "Traceback" not in text and "unexpected error" not in text, text[-3000:]
    assert "`sbatch --parsable" in text, text[-2000:]  # the command line is shown
    assert len(run.stderr) < MESSAGE_BOUND, len(run.stderr)
    return text


# ------------------------------------------------------------------------------ run_command itself

def test_invalid_utf8_is_replaced_not_raised(tmp_path: Path) -> None:
    script = r"printf 'id\xff\xfe\x80|\xc3\n'; printf 'lone \x80 continuation\r\n' >&2"
    result = run_command(["bash", "-c", script])
    assert result.stdout == "id\ufffd\ufffd\ufffd|\ufffd\n"
    assert result.stderr == "lone \ufffd continuation\n"  # universal newlines, as before
    assert not result.truncated


def test_failed_command_with_invalid_utf8_shows_command_code_and_stderr() -> None:
    with pytest.raises(CommandError) as err:
        run_command(["bash", "-c", BAD_UTF8 + "; exit 7", "fake sbatch"])
    text = str(err.value)
    assert text.startswith("command `bash -c ")
    assert "'fake sbatch'" in text and "exited with code 7" in text
    assert "sbatch: error: \ufffd\ufffd bad \ufffd\ufffd bytes \ufffd(" in text


def test_100mb_stdout_is_kept_bounded_with_head_and_tail() -> None:
    script = f"printf 'FIRST\\n'; head -c {HUNDRED_MB} /dev/zero | tr '\\0' y; printf '\\nLAST 4242\\n'"
    result = run_command(["bash", "-c", script])
    assert result.returncode == 0 and result.truncated
    assert result.stdout.startswith("FIRST\nyyy") and result.stdout.endswith("yyy\nLAST 4242\n")
    assert len(result.stdout) < process.DEFAULT_MAX_STDOUT + 100
    kept = len(result.stdout.encode()) - len(re.search(r"\n\.\.\. \d+ bytes omitted \.\.\.\n", result.stdout)[0])
    assert kept + result.stdout_omitted == HUNDRED_MB + len("FIRST\n\nLAST 4242\n")  # every byte counted
    assert f"\n... {result.stdout_omitted} bytes omitted ...\n" in result.stdout


def test_bulk_readers_lift_the_bound_and_input_still_reaches_the_command() -> None:
    n = process.DEFAULT_MAX_STDOUT + 12345
    with output_limits(None):
        result = run_command(["head", "-c", str(n), "/dev/zero"])
    assert len(result.stdout) == n and not result.truncated
    text = "é|x\n" * 300_000  # larger than a pipe buffer: written while stdout is read
    assert run_command(["cat"], input=text).stdout == text


def test_100mb_stderr_error_is_capped_at_64kib(tmp_path: Path) -> None:
    script = f"echo 'sbatch: error: first' >&2; head -c {HUNDRED_MB} /dev/zero | tr '\\0' e >&2; " \
             "echo 'sbatch: error: Invalid account' >&2; exit 1"
    with pytest.raises(CommandError) as err:
        run_command(["bash", "-c", script])
    exc = err.value
    assert exc.returncode == 1
    assert exc.stderr.startswith("sbatch: error: first") and exc.stderr.endswith("Invalid account\n")
    assert len(exc.stderr.encode()) < MESSAGE_EXCERPT_BYTES + 100
    assert exc.stderr_omitted > HUNDRED_MB - MESSAGE_EXCERPT_BYTES
    assert f"... {exc.stderr_omitted} bytes omitted ..." in str(exc)
    assert len(str(exc).encode()) < MESSAGE_BOUND
    assert exc.stderr_excerpt == exc.stderr


def test_endless_output_times_out_with_what_was_kept() -> None:
    # a grandchild keeps the pipes open after the timeout kill: they are closed on it
    with pytest.raises(CommandTimeout) as err:
        run_command(["bash", "-c", "yes & yes >&2; wait"], timeout=1)
    exc = err.value
    assert exc.returncode is None and "timed out after 1 s" in str(exc)
    assert exc.stdout_omitted > 0 and len(str(exc).encode()) < MESSAGE_BOUND


def test_excerpt_cuts_on_character_boundaries() -> None:
    assert excerpt("short") == "short"
    text = "é" * 1000 + "x" * 10 + "€" * 1000
    cut = excerpt(text, 101)
    head, _, tail = cut.partition("\n... ")
    assert set(head) == {"é"} and set(tail.partition(" bytes omitted ...\n")[2]) == {"€"}
    assert len(head.encode()) <= 50 and len(cut.encode()) < 101 + 40


def test_control_characters_are_escaped_in_messages() -> None:
    with pytest.raises(CommandError) as err:
        run_command(["bash", "-c", r"printf 'red \033[31m ring \a\r over\n' >&2; exit 2"])
    text = str(err.value)
    assert "\x1b" not in text and "\a" not in text
    assert r"red \x1b[31m ring \x07" in text


# ------------------------------------------------------------------------------ parse errors name the command

def test_status_parse_error_shows_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.schedulers.client import SchedulerClient
    from hpcjobs.schedulers.registry import get_backend

    bin_dir = fake_bin(tmp_path, sacct=r"printf 'not-a-job|\xff|x\n'")
    monkeypatch.setenv("PATH", path_with(bin_dir))
    with pytest.raises(SchedulerOutputError) as err:
        SchedulerClient(get_backend("slurm")).status(["123"])
    exc = err.value
    assert exc.argv is not None and exc.argv[0] == "sacct" and exc.returncode == 0
    text = str(exc)
    assert text.startswith("could not read the output of `sacct ") and "(exit code 0)" in text
    assert "not a Slurm job id: 'not-a-job'" in text and "not-a-job|\ufffd|x" in text


def test_report_sacct_keeps_all_rows_and_replaces_bad_bytes(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.accounting.sources import slurm as acct

    def row(i: int) -> str:
        values = {"jobid": str(i), "jobidraw": str(i), "jobname": "n\udcffme", "user": "alice",
                  "state": "COMPLETED", "exitcode": "0:0", "submit": "2026-12-01T10:00:00",
                  "eligible": "2026-12-01T10:00:00", "start": "2026-12-01T10:00:00",
                  "end": "2026-12-01T11:00:00", "elapsedraw": "3600", "timelimit": "01:00:00", "nnodes": "1",
                  "alloccpus": "1", "reqmem": "1G"}
        return "|".join(values.get(f.lower(), "") for f in acct.SACCT_QUERY_FIELDS)

    n = 60_000  # more than the default bound of a command's stdout
    data = ("\n".join(row(i) for i in range(1, n + 1)) + "\n").encode("utf-8", "surrogateescape")
    assert len(data) > process.DEFAULT_MAX_STDOUT
    (tmp_path / "sacct.out").write_bytes(data)
    bin_dir = fake_bin(tmp_path, sacct=f"cat {tmp_path / 'sacct.out'}")
    monkeypatch.setenv("PATH", path_with(bin_dir))
    start = datetime(2026, 12, 1, tzinfo=timezone.utc)
    df = acct.query_sacct(start, start + timedelta(days=1), window=timedelta(days=1), cache=False,
                          now=start + timedelta(days=3))
    assert len(df) == n and set(df["job_name"]) == {"n\ufffdme"}

    (tmp_path / "sacct.out").write_text("1|only|three\n")
    with pytest.raises(SchedulerOutputError) as err:
        acct.query_sacct(start, start + timedelta(days=1), window=timedelta(days=1), cache=False,
                         now=start + timedelta(days=3))
    assert str(err.value).startswith("could not read the output of `sacct ")


# ------------------------------------------------------------------------------ the CLI, measured

def test_cli_invalid_utf8_stderr_exit_1(tmp_path: Path) -> None:
    text = _assert_command_failure(_submit(tmp_path, BAD_UTF8 + "; exit 1"))
    assert "exited with code 1" in text and "\ufffd\ufffd bad" in text


def test_cli_100mb_stdout_failure_bounded(tmp_path: Path) -> None:
    run = _submit(tmp_path, f"head -c {HUNDRED_MB} /dev/zero | tr '\\0' y; "
                            "echo 'sbatch: error: Invalid account' >&2; exit 1")
    text = _assert_command_failure(run)
    assert "exited with code 1" in text and "Invalid account" in text and "bytes omitted" in text
    assert run.maxrss_mib < RSS_BOUND_MIB, run.maxrss_mib


def test_cli_100mb_stdout_then_job_id_is_accepted(tmp_path: Path) -> None:
    run = _submit(tmp_path, f"head -c {HUNDRED_MB} /dev/zero | tr '\\0' x; printf '\\n4242\\n'")
    assert run.rc == 0, run.err_text[-2000:]
    assert b"submitted job 4242" in run.stdout
    assert run.maxrss_mib < RSS_BOUND_MIB, run.maxrss_mib


def test_cli_100mb_of_nul_without_newline_is_a_parse_error(tmp_path: Path) -> None:
    run = _submit(tmp_path, f"head -c {HUNDRED_MB} /dev/zero")
    text = _assert_command_failure(run)
    assert "could not read the output of `sbatch --parsable" in text and "(exit code 0)" in text
    assert "\\x00" in text and "\x00" not in text
    assert run.maxrss_mib < RSS_BOUND_MIB, run.maxrss_mib


def test_cli_endless_stdout_times_out(tmp_path: Path) -> None:
    run = _submit(tmp_path, "exec yes", timeout=2)
    text = _assert_command_failure(run)
    assert "timed out after 2 s" in text
    assert run.maxrss_mib < RSS_BOUND_MIB, run.maxrss_mib


def test_cli_unreadable_answer_shows_the_command(tmp_path: Path) -> None:
    text = _assert_command_failure(_submit(tmp_path, "echo 'Submitted batch job'"))
    assert "could not read the output of `sbatch --parsable" in text
    assert "sbatch --parsable printed 'Submitted batch job'" in text


def test_sweep_ledger_stores_a_bounded_error(tmp_path: Path) -> None:
    bin_dir = fake_bin(
        tmp_path,
        sbatch=f"echo 'sbatch: error: first' >&2; head -c {HUNDRED_MB} /dev/zero | tr '\\0' e >&2; "
               "echo 'sbatch: error: Batch job submission failed: Invalid account' >&2; exit 1",
        scontrol="echo 'ClusterName = fake'; echo 'MaxArraySize = 1001'",
        sacctmgr="exit 1",
        squeue="exit 0",
        sacct="exit 0",
    )
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: bytes\ncommand: echo $x\nsweep:\n  grid:\n    x: [1, 2, 3]\n")
    run = run_cli(tmp_path, bin_dir, "sweep", str(exp), "--site", str(SLURM_SITE))
    text = _assert_command_failure(run)
    assert "Invalid account" in text
    assert run.maxrss_mib < RSS_BOUND_MIB, run.maxrss_mib
    (ledger,) = (tmp_path / "sweeps").glob(f"*/{LEDGER_FILE}")
    with sqlite3.connect(ledger) as con:
        rows = con.execute("SELECT state, stderr FROM submissions").fetchall()
    assert rows and all(len((err or "").encode()) < MESSAGE_EXCERPT_BYTES + 100 for _state, err in rows)
    assert any("Invalid account" in (err or "") and "bytes omitted" in (err or "") for _state, err in rows)


#: A fake command's first call exits 0 with no output; later calls run what follows.
_FIRST_CALL_ANSWERS = 'n=$(cat "$0.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.calls"; [ "$n" = 0 ] && exit 0; '


def test_wrapped_failure_still_shows_the_command(tmp_path: Path) -> None:
    # an ambiguous answer whose queue cannot be read: the sweep's own message is followed by the sbatch failure
    bin_dir = fake_bin(
        tmp_path,
        sbatch=r"printf 'sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\xff\n'"
               " >&2; exit 1",
        scontrol="echo 'ClusterName = fake'; echo 'MaxArraySize = 1001'",
        sacctmgr="exit 1",
        # the first tag query (is anything of this new sweep queued already?) answers; then the queue breaks
        squeue=_FIRST_CALL_ANSWERS + r"printf 'squeue: error: \033[2J cannot connect\n' >&2; exit 1",
        sacct=_FIRST_CALL_ANSWERS + "exit 1",
    )
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: bytes\ncommand: echo $x\nsweep:\n  grid:\n    x: [1, 2]\n")
    run = run_cli(tmp_path, bin_dir, "sweep", str(exp), "--site", str(SLURM_SITE),
                  env={"HPCJOBS_SUBMIT_LOOKUP_S": "1"})
    text = _assert_command_failure(run)
    message = text[text.index("error: chunk"):]  # the lines before are warnings logged while looking up
    assert "ambiguous" in message and "caused by: command `sbatch --parsable" in message, message
    assert "exited with code 1" in message and "Socket timed out on send/recv operation\ufffd" in message
