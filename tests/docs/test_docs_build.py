"""The manual builds: ``mkdocs build --strict`` on mkdocs.yml, so a broken link or anchor fails.

MkDocs comes with the ``docs`` and ``test`` extras. Without it the test skips with the command that
installs it, except under ``CI=true``, where a missing MkDocs fails (as a missing shellcheck does).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _need_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") is not None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail('mkdocs is not installed (CI installs the test extra: pip install -e ".[test]")')
    pytest.skip('mkdocs not installed (pip install -e ".[docs]")')


def test_the_manual_builds_strictly(tmp_path: Path) -> None:
    _need_mkdocs()
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}{proc.stderr}"
    for page in ("index.html", "getting-started/index.html", "reference/cli/index.html",
                 "accounting/index.html", "architecture/index.html", "CONTRIBUTING/index.html"):
        assert (site / page).is_file(), f"{page} was not built"
    for schema in ("experiment.schema.json", "site.schema.json"):
        assert (site / "schemas" / schema).is_file(), f"the JSON schema {schema} is not published with the manual"


def test_every_page_is_in_the_nav() -> None:
    """A page left out of ``nav:`` would be built but reachable from nowhere."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(items: list) -> set[str]:
        found: set[str] = set()
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            found |= pages(value) if isinstance(value, list) else {value}
        return found

    in_nav = pages(config["nav"])
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), "pages missing from nav: in mkdocs.yml"
    assert in_nav - on_disk == set(), "nav: names pages that do not exist"
