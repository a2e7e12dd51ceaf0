"""A plain (non-editable) ``pip install`` ships the templates and site configs inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("hpcjobs-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_contains_templates_and_sites(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for t in (ROOT / "templates").rglob("*.j2"):
        assert f"hpcjobs/_shipped/templates/{t.relative_to(ROOT / 'templates')}" in names
    for s in (ROOT / "site-configs").glob("*.yaml"):
        assert f"hpcjobs/_shipped/site-configs/{s.name}" in names


@pytest.mark.slow
def test_wheel_carries_the_compiled_scanner_in_its_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    compiled = [n for n in names if n.endswith((".so", ".pyd"))]
    # hatch_build.py compiles hpcjobs/accounting/sacct/_scan.c when it can; a wheel without it is pure Python
    assert all(n.startswith("hpcjobs/accounting/sacct/_scan.") for n in compiled), compiled
    pure = wheel.name.endswith("-py3-none-any.whl")
    assert pure == (not compiled), (wheel.name, compiled)


@pytest.mark.slow
def test_installed_wheel_renders_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = venv / "bin" / "pip"
    proc = subprocess.run([str(pip), "install", "--no-deps", "-q", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "exp.yaml").write_text((ROOT / "examples" / "hello.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import hpcjobs.resources as r; print(r.shipped_dir('templates'))"],
                           capture_output=True, text=True, cwd=work, env=env)
    assert str(venv) in where.stdout, where.stdout + where.stderr
    scanner = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "from hpcjobs.accounting.sacct import scan; print(scan.AVAILABLE)"],
                             capture_output=True, text=True, cwd=work, env=env)
    compiled = any(n.endswith((".so", ".pyd")) for n in zipfile.ZipFile(wheel).namelist())
    assert scanner.stdout.strip() == str(compiled), scanner.stdout + scanner.stderr
    out = subprocess.run([str(venv / "bin" / "hpcjobs"), "render", "exp.yaml", "--site", "derecho",
                          "--set", "account=abc"], capture_output=True, text=True, cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    assert "#PBS -l select=1:ncpus=1:mpiprocs=1:ompthreads=1:mem=512mb" in out.stdout
    assert 'export TMPDIR="${SCRATCH' in out.stdout  # the shipped site template layer
