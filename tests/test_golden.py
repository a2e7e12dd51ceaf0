"""Golden rendered scripts for every shipped site × every example.

Regenerate after an intended change with ``pytest tests/test_golden.py --update-golden``
and review the diff. A pair the site cannot run (a GPU example on a CPU-only site)
has a golden ``.err`` file holding the error instead.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment
from hpcjobs.sweep.prepare import render_packed

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
SITES = sorted(p.stem for p in (ROOT / "site-configs").glob("*.yaml"))
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml") if not p.stem.startswith("sweep"))


def _render(site: str, example: str) -> tuple[str, str]:
    cfg = load_site_file(ROOT / "site-configs" / f"{site}.yaml")
    overrides = ("account=abc123",) if cfg.account_required else ()
    try:
        path = ROOT / "examples" / f"{example}.yaml"
        packed = render_packed(path, site=site, overrides=overrides, root="/scratch/hpcjobs-sweeps")
        return "sh", (packed or render_experiment(path, site=site, overrides=overrides)).text
    except ConfigError as exc:
        return "err", str(exc).replace(str(ROOT) + "/", "") + "\n"


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("example", EXAMPLES)
def test_golden(site: str, example: str, update_golden: bool) -> None:
    kind, text = _render(site, example)
    path = GOLDEN / site / f"{example}.{kind}"
    other = path.with_suffix(".err" if kind == "sh" else ".sh")
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        other.unlink(missing_ok=True)
        return
    assert path.exists(), f"no golden file {path}; run pytest {__file__} --update-golden"
    assert not other.exists(), f"stale golden file {other}"
    assert text == path.read_text(), f"{path} differs; if intended, regenerate with --update-golden"


def _golden_scripts() -> list[Path]:
    return sorted(GOLDEN.glob("*/*.sh"))


def test_every_site_has_a_rendered_script() -> None:
    assert {p.parent.name for p in _golden_scripts()} == set(SITES)


@pytest.mark.parametrize("script", _golden_scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_scripts_pass_bash_n(script: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", _golden_scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_scripts_pass_shellcheck(script: Path) -> None:
    if not shutil.which("shellcheck"):
        if __import__("os").environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (CI installs the Debian package)")
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", "--shell=bash", "--severity=style",
                           "--exclude=SC1091",  # a user's `source` of a file that only exists on the cluster
                           str(script)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
