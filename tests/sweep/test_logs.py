"""Each point's stdout/stderr in its run folder, and ``hpcjobs logs``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main
from hpcjobs.sweep.log_files import sweep_logs
from hpcjobs.sweep.logs import follow, read_bounded, tail_text

EXPERIMENT = """\
name: logtest
command: |
  echo "hello from x=$x"
  echo "warming up x=$x" >&2
  test "$x" != 2 || { echo "Traceback: boom at x=$x" >&2; exit 7; }
sweep:
  grid: {x: [1, 2, 3]}
"""


@pytest.fixture
def local_log_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    result = CliRunner().invoke(main, ["sweep", "exp.yaml", "--site", "local", "--json", "--workers", "2"])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["sweep_id"])


def test_output_lands_in_the_run_folder(local_log_sweep: str, tmp_path: Path):
    selected = sweep_logs(local_log_sweep)
    assert [p.index for p in selected] == [0, 1, 2]
    for p in selected:
        x = p.params["x"]
        assert p.stdout.read_text() == f"hello from x={x}\n"
        err = p.stderr.read_text()
        assert err.startswith("=== hpcjobs: job ") and f"warming up x={x}" in err
        # the scheduler-level file is kept, and says where the output went
        assert p.scheduler_out is not None and str(p.stdout.parent) in p.scheduler_out.read_text()
    assert "Traceback: boom at x=2" in selected[1].stderr.read_text()


def test_logs_command_selects_points(local_log_sweep: str):
    runner = CliRunner()
    failed = runner.invoke(main, ["logs", local_log_sweep, "--failed", "--err"])
    assert failed.exit_code == 0, failed.output
    assert "Traceback: boom at x=2" in failed.output and "FAILED, exit 7" in failed.output
    assert "x=1" not in failed.output and "x=3" not in failed.output
    one = runner.invoke(main, ["logs", local_log_sweep, "--index", "2", "--out"]).output
    assert "hello from x=3" in one and "warming" not in one
    pid = sweep_logs(local_log_sweep)[0].point_id
    by_id = runner.invoke(main, ["logs", local_log_sweep, pid[:6], "--tail", "1"]).output
    assert "hello from x=1" in by_id and "x=2" not in by_id
    assert runner.invoke(main, ["logs", local_log_sweep, "nosuchpoint"]).exit_code == 2
    completed = runner.invoke(main, ["logs", local_log_sweep, "--state", "COMPLETED", "--out"]).output
    assert "hello from x=1" in completed and "hello from x=3" in completed and "x=2" not in completed


def test_tail_and_bounded_reads(tmp_path: Path):
    f = tmp_path / "log"
    f.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert tail_text(f, 2) == "line 998\nline 999\n"
    assert tail_text(f, 3, max_bytes=18) == "line 998\nline 999\n"  # only the last bytes are read
    assert tail_text(tmp_path / "missing", 5) == ""
    os.mkfifo(tmp_path / "fifo")
    shown = tail_text(tmp_path / "fifo", 5)  # opened without blocking, and not read
    assert shown.startswith("hpcjobs: not shown: ") and "is a FIFO, not a regular file" in shown
    assert read_bounded(f, 9, tail=True) == b"line 999\n"


def test_follow_yields_appended_text(tmp_path: Path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("old\n")
    steps = iter([lambda: a.open("a").write("new a\n"), lambda: b.write_text("b appears\n"),
                  lambda: a.write_text("x\n")])  # truncated and rewritten: read from the start

    def sleep(_: float) -> None:
        next(steps, lambda: None)()

    seen: list[tuple[str, str]] = []
    gen = follow([a, b], interval=0, sleep=sleep, stop=lambda: len(seen) >= 3)
    for path, text in gen:
        seen.append((path.name, text))
    assert seen == [("a.log", "new a\n"), ("b.log", "b appears\n"), ("a.log", "x\n")]


def test_single_job_log_paths(tmp_path: Path):
    from hpcjobs.render.script import render_experiment
    from hpcjobs.submit import job_log_paths

    site = str(Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml")
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\noutput_dir: logs\ncommand: 'true'\n")
    rendered = render_experiment(exp, site=site)
    assert "--output=logs/%x-%j.out" in rendered.text
    assert job_log_paths(rendered, "1234", tmp_path) == (tmp_path / "logs/one-1234.out", tmp_path / "logs/one-1234.err")
    exp.write_text("name: one\ncommand: 'true'\ndirectives: ['--output=elsewhere.txt']\n")
    assert job_log_paths(render_experiment(exp, site=site), "1234", tmp_path) == (None, None)
