"""Secrets: never written into a script or a sweep folder, read by the job at run time; scripts
private to their owner whatever the umask; a warning for credentials put in `environment:`."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcjobs.process import run_command
from hpcjobs.render.script import render_experiment
from hpcjobs.submit import submit_rendered

from ._policy_helpers import SITES, assert_refused, bash_n, cli, run_bash, write

TOKEN = "hf_S3cr3t-t0ken $(touch PWNED) `id` 'q\" end"
PASSWORD = "db-pa55word!*"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _files_containing(root: Path, *values: str) -> list[Path]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(v.encode() in data for v in values):
                hits.append(path)
    return hits


def _secret_file(folder: Path, value: str, mode: int = 0o600) -> Path:
    path = folder / "db password"
    path.write_text(value + "\n")
    path.chmod(mode)
    return path


SECRET_EXPERIMENT = """\
name: sec
secrets:
  HF_TOKEN: {{env: HPCJOBS_TEST_TOKEN_SRC}}
  DB_PASSWORD: {{file: {file}}}
command: |
  printf '%s' "$HF_TOKEN" | sha256sum | cut -d' ' -f1 > {out}/token.sha
  printf '%s' "$DB_PASSWORD" | sha256sum | cut -d' ' -f1 > {out}/password.sha
"""


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_scripts_are_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: None,
                                                 mask: int):
    os.umask(mask)
    monkeypatch.chdir(tmp_path)
    exp = write(tmp_path / "e.yaml", "name: modes\nenvironment: {API_URL: x}\ncommand: 'true'\n"
                                     "sweep: {grid: {x: [1, 2]}}\n")
    assert cli("render", str(exp), "-o", str(tmp_path / "out")).code == 0
    assert _mode(tmp_path / "out" / "modes.local.sh") == 0o700
    result = cli("sweep", str(exp), "--site", "local", "--json")
    assert result.code == 0, result.output
    folder = tmp_path / "hpcjobs-sweeps" / json.loads(result.output)["sweep_id"]
    scripts = list((folder / "scripts").glob("*.sh"))
    chunks = list((folder / "chunks").iterdir())
    assert scripts and chunks
    assert {_mode(p) for p in scripts} == {0o700}
    assert {_mode(p) for p in chunks} == {0o600}

    class Client:
        def submit(self, script: Path, options: object, cwd: str) -> str:
            return "1"

    rendered = render_experiment(exp)
    sub = submit_rendered(rendered, client=Client(), submit_dir=tmp_path)  # type: ignore[arg-type]
    assert _mode(sub.script) == 0o700


def test_local_job_reads_secrets_and_no_file_holds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCJOBS_TEST_TOKEN_SRC", TOKEN)
    secret = _secret_file(tmp_path, PASSWORD)
    results = tmp_path / "results"
    results.mkdir()
    text = SECRET_EXPERIMENT.format(file=json.dumps(str(secret)), out=results) + "sweep: {grid: {x: [1]}}\n"
    exp = write(tmp_path / "e.yaml", text)
    result = cli("render", str(exp), "-o", str(tmp_path / "rendered"))
    assert result.code == 0, result.output
    assert "warning" not in result.output
    result = cli("sweep", str(exp), "--site", "local", "--json")
    assert result.code == 0, result.output
    sweep_id = json.loads(result.output)["sweep_id"]
    status = json.loads(cli("status", sweep_id, "--json").output)
    assert status["counts"] == {"COMPLETED": 1}, status
    assert (results / "token.sha").read_text().strip() == _sha(TOKEN)
    assert (results / "password.sha").read_text().strip() == _sha(PASSWORD)
    assert not list(tmp_path.rglob("PWNED"))
    leaked = _files_containing(tmp_path, TOKEN, PASSWORD, "hf_S3cr3t", "pa55word")
    assert leaked == [secret], leaked  # only the secret file itself


def _render_to(tmp_path: Path, text: str) -> Path:
    exp = write(tmp_path / "e.yaml", text)
    assert cli("render", str(exp), "-o", str(tmp_path / "out")).code == 0
    return tmp_path / "out" / "sec.local.sh"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_secret_file_others_can_read_stops_the_job(tmp_path: Path, mode: int):
    secret = _secret_file(tmp_path, PASSWORD, mode)
    script = _render_to(tmp_path, SECRET_EXPERIMENT.format(file=json.dumps(str(secret)), out=tmp_path))
    ran = run_bash(script, env={**os.environ, "HPCJOBS_TEST_TOKEN_SRC": TOKEN})
    assert ran.returncode == 2
    assert "readable by group or others" in ran.stderr and "chmod 600" in ran.stderr
    assert not (tmp_path / "password.sha").exists()


def test_missing_secret_file_or_variable_stops_the_job(tmp_path: Path):
    script = _render_to(tmp_path, SECRET_EXPERIMENT.format(file="~/no-such-hpcjobs-secret", out=tmp_path))
    env = {k: v for k, v in os.environ.items() if k != "HPCJOBS_TEST_TOKEN_SRC"}
    ran = run_bash(script, env=env)
    assert ran.returncode == 2 and "HPCJOBS_TEST_TOKEN_SRC was not set" in ran.stderr
    ran = run_bash(script, env={**env, "HPCJOBS_TEST_TOKEN_SRC": "x"})
    assert ran.returncode == 2 and "cannot read the file" in ran.stderr and "no-such-hpcjobs-secret" in ran.stderr


@pytest.mark.parametrize(("body", "needle"), [
    ("secrets: {A_TOKEN: {env: X, file: /y}}", "exactly one of 'env' or 'file'"),
    ("secrets: {A_TOKEN: {}}", "exactly one of 'env' or 'file'"),
    ("secrets: {A_TOKEN: {value: abc}}", "unknown key 'value'"),
    ("secrets: {A_TOKEN: {env: \"X\\n\"}}", "not a valid environment variable name"),
    ("secrets: {A_TOKEN: {file: \"/a\\nb\"}}", "single line"),
    ("secrets: {A_TOKEN: {env: X}}\nenvironment: {A_TOKEN: y}", "set both as a secret"),
])
def test_bad_secrets_are_refused(tmp_path: Path, body: str, needle: str):
    exp = write(tmp_path / "e.yaml", f"name: sec\ncommand: 'true'\n{body}\n")
    assert_refused(cli("render", str(exp)), exp, needle)


@pytest.mark.parametrize("site", ["pbstest.yaml", "torquetest.yaml"])
def test_environment_secrets_are_refused_on_pbs_and_torque(tmp_path: Path, site: str):
    exp = write(tmp_path / "e.yaml", "name: sec\ncommand: 'true'\nsecrets: {HF_TOKEN: {env: HF_TOKEN}}\n")
    assert_refused(cli("render", str(exp), "--site", str(SITES / site)), exp, "qstat -f", "use `file:`")
    exp2 = write(tmp_path / "e2.yaml", "name: sec\ncommand: 'true'\nsecrets: {HF_TOKEN: {file: ~/.hf}}\n")
    result = cli("render", str(exp2), "--site", str(SITES / site))
    assert result.code == 0, result.output
    assert bash_n(result.output).returncode == 0


def test_environment_secret_refused_when_sbatch_would_not_export_it(tmp_path: Path):
    exp = write(tmp_path / "e.yaml", "name: sec\ncommand: 'true'\nsecrets: {HF_TOKEN: {env: HF_TOKEN}}\n"
                                     "directives: ['--export=NONE']\n")
    assert_refused(cli("render", str(exp), "--site", str(SITES / "hpctest.yaml")), exp, "--export")


def test_credentials_in_environment_or_params_warn(tmp_path: Path):
    """A warning on stderr (a real ``hpcjobs`` process), the script still on stdout, exit 0."""
    exp = write(tmp_path / "e.yaml", "name: sec\ncommand: 'true'\nenvironment: {WANDB_API_KEY: abc, MODE: x}\n"
                                     "params: {db_password: hunter2}\n")
    ran = subprocess.run([sys.executable, "-m", "hpcjobs", "render", str(exp)], capture_output=True, text=True,
                         check=False, timeout=120)
    assert ran.returncode == 0 and ran.stdout.startswith("#!/bin/bash"), ran
    assert f"{exp}:3:" in ran.stderr and "environment.WANDB_API_KEY" in ran.stderr
    assert f"{exp}:4:" in ran.stderr and "params.db_password" in ran.stderr and "secrets:" in ran.stderr
    assert "MODE" not in ran.stderr


def _slurm_problem() -> str | None:
    try:
        result = run_command(["sinfo", "--noheader"], timeout=15.0, check=False)
    except Exception as exc:  # no Slurm client on this machine
        return str(exc)
    return None if result.returncode == 0 else result.stderr.strip()


@pytest.mark.slurm
def test_slurm_job_reads_secrets_and_no_file_holds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    problem = _slurm_problem()
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Slurm testbed does not answer ({problem})")
        pytest.skip(f"no Slurm testbed ({problem})")
    tmp_path.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCJOBS_TEST_TOKEN_SRC", TOKEN)
    secret = _secret_file(tmp_path, PASSWORD)
    results = tmp_path / "results"
    results.mkdir()
    exp = write(tmp_path / "e.yaml", SECRET_EXPERIMENT.format(file=json.dumps(str(secret)), out=results))
    result = cli("submit", str(exp), "--site", str(SITES / "hpctest.yaml"), "--json")
    assert result.code == 0, result.output
    job_id = json.loads(result.output.splitlines()[-1])["job_id"]
    deadline = time.monotonic() + 180
    while run_command(["squeue", "--noheader", "--jobs", job_id], check=False).stdout.strip():
        assert time.monotonic() < deadline, f"job {job_id} still queued"
        time.sleep(1)
    assert (results / "token.sha").read_text().strip() == _sha(TOKEN)
    assert (results / "password.sha").read_text().strip() == _sha(PASSWORD)
    leaked = _files_containing(tmp_path, TOKEN, PASSWORD, "hf_S3cr3t", "pa55word")
    assert leaked == [secret], leaked

