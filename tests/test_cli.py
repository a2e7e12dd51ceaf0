"""The command line: output, exit codes (2 bad input, 1 command failure, 3 bug), and --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs import __version__
from hpcjobs.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_version(runner):
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_render_to_stdout_and_to_dir(runner, tmp_path):
    result = runner.invoke(main, ["render", str(ROOT / "examples/hello.yaml")])
    assert result.exit_code == 0
    assert result.output.startswith("#!/bin/bash\n")
    result = runner.invoke(main, ["render", str(ROOT / "examples/hello.yaml"), "--site", "jean-zay",
                                  "--set", "account=abc", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    written = tmp_path / "out" / "hello.slurm.sh"
    assert result.output.strip() == str(written)
    assert "#SBATCH --account=abc" in written.read_text()
    assert written.stat().st_mode & 0o111


def test_bad_input_exit_2_and_nothing_written(runner, tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text("name: t\ncommand: x\nresources:\n  gpus_per_node: 3\n")
    out = tmp_path / "out"
    result = runner.invoke(main, ["render", str(exp), "--site", "carbon", "-o", str(out)])
    assert result.exit_code == 2
    assert f"{exp}:4:3" in result.output
    assert "the limit is 0" in result.output
    assert not out.exists()


def test_missing_file_exit_2(runner, tmp_path):
    result = runner.invoke(main, ["render", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "file not found" in result.output


def test_unknown_site_exit_2(runner):
    result = runner.invoke(main, ["render", str(ROOT / "examples/hello.yaml"), "--site", "derekho"])
    assert result.exit_code == 2 and "did you mean 'derecho'" in result.output


def test_unexpected_error_exit_3(runner, monkeypatch):
    import hpcjobs.render.script as script

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(script, "render_experiment", boom)
    result = runner.invoke(main, ["render", str(ROOT / "examples/hello.yaml")])
    assert result.exit_code == 3 and "This is a bug in hpcjobs" in result.output


def test_site_list_json(runner):
    result = runner.invoke(main, ["site", "list", "--json"])
    assert result.exit_code == 0
    names = {r["name"] for r in json.loads(result.output)}
    assert {"local", "jean-zay", "derecho", "carbon"} <= names


def test_site_show(runner):
    result = runner.invoke(main, ["site", "show", "derecho"])
    assert result.exit_code == 0 and "main-gpu" in result.output and "12:00:00" in result.output
    data = json.loads(runner.invoke(main, ["site", "show", "jean-zay", "--json"]).output)
    assert data["scheduler"] == "slurm" and data["partitions"]["gpu_p13"]["gpus_per_node"] == 4


def test_site_validate(runner, tmp_path):
    shipped = sorted(str(p) for p in (ROOT / "site-configs").glob("*.yaml"))
    result = runner.invoke(main, ["site", "validate", *shipped])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nscheduler: slurm\npartitions:\n  gpu:\n    gpus_per_node: 2\n    gpu_typs: [a100]\n")
    result = runner.invoke(main, ["site", "validate", shipped[0], str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:6:5" in result.output and "did you mean 'gpu_types'" in result.output
    assert f"ok  {shipped[0]}" in result.output


def test_schema_command_and_published_files(runner):
    for kind in ("experiment", "site"):
        result = runner.invoke(main, ["schema", kind])
        assert result.exit_code == 0
        schema = json.loads(result.output)
        assert schema["additionalProperties"] is False
        published = ROOT / "docs" / "schemas" / f"{kind}.schema.json"
        assert json.loads(published.read_text()) == schema, f"regenerate {published}: hpcjobs schema {kind}"


def test_python_dash_m(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hpcjobs", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and __version__ in proc.stdout


@pytest.mark.parametrize("argv", [["--help"], ["render", str(ROOT / "examples/hello.yaml")], ["site", "list"]])
def test_light_commands_do_not_import_pandas_or_submitit(argv):
    code = (
        "import sys\n"
        f"sys.argv = ['hpcjobs', *{argv!r}]\n"
        "from hpcjobs.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('pandas', 'submitit', 'matplotlib', 'pyarrow', 'numpy') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY=\n" in proc.stdout, proc.stdout + proc.stderr


def _fake_sbatch(monkeypatch, rc: int, stdout: str, stderr: str) -> list[list[str]]:
    from hpcjobs import process
    from hpcjobs.errors import CommandError
    from hpcjobs.process import CommandResult

    calls: list[list[str]] = []

    def fake(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        calls.append(list(argv))
        if argv[0] != "sbatch":  # the queue and accounting answer: no job of this request yet
            return CommandResult(tuple(argv), 0, "", "", 0.0)
        if check and rc:
            raise CommandError(argv, rc, stdout, stderr)
        return CommandResult(tuple(argv), rc, stdout, stderr, 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    return calls


def test_submit_json(runner, tmp_path, monkeypatch):
    calls = _fake_sbatch(monkeypatch, 0, "4242\n", "")
    monkeypatch.chdir(tmp_path)
    site = ROOT / "tests" / "sites" / "hpctest.yaml"
    result = runner.invoke(main, ["submit", str(ROOT / "examples/hello.yaml"), "--site", str(site), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["job_id"] == "4242" and out["scheduler"] == "slurm"
    (sbatch,) = [c for c in calls if c[0] == "sbatch"]
    assert sbatch[:2] == ["sbatch", "--parsable"] and sbatch[2] == f"--comment={out['tag']}"
    assert Path(out["script"]).is_file()


def test_submit_scheduler_failure_exit_1_shows_command_and_stderr(runner, tmp_path, monkeypatch):
    _fake_sbatch(monkeypatch, 1, "", "sbatch: error: Batch job submission failed: Invalid account\n")
    monkeypatch.chdir(tmp_path)
    site = ROOT / "tests" / "sites" / "hpctest.yaml"
    result = runner.invoke(main, ["submit", str(ROOT / "examples/hello.yaml"), "--site", str(site)])
    assert result.exit_code == 1
    assert "command `sbatch --parsable" in result.output and "exited with code 1" in result.output
    assert "Invalid account" in result.output
    assert not list((tmp_path / "hpcjobs-logs" / "scripts").glob("*.sh"))  # nothing left behind
