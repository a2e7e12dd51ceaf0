"""docs/reference/cli.md is what scripts/gen_cli_reference.py generates from the click commands.

When a command, option or help text changes, regenerate the page (like cog or sqlite-utils' docs):

    python scripts/gen_cli_reference.py
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_cli_reference.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_cli_reference", module)
    spec.loader.exec_module(module)
    return module


def test_the_committed_cli_reference_is_current() -> None:
    gen = _generator()
    expected = gen.render()
    committed = gen.OUTPUT.read_text(encoding="utf-8") if gen.OUTPUT.exists() else ""
    if committed != expected:
        diff = "".join(difflib.unified_diff(committed.splitlines(True), expected.splitlines(True),
                                            "docs/reference/cli.md (committed)", "generated", n=1))
        raise AssertionError(f"docs/reference/cli.md is stale: run `{gen.REGENERATE}` and commit it.\n"
                             + diff[:4000])


def test_the_reference_is_deterministic_and_complete() -> None:
    gen = _generator()
    text = gen.render()
    assert text == gen.render()
    import click

    from hpcjobs.cli import main
    with click.Context(main, info_name="hpcjobs") as ctx:
        names = [n for n in main.list_commands(ctx) if not main.get_command(ctx, n).hidden]
    for name in names:
        assert f"\n### hpcjobs {name}\n" in text, f"hpcjobs {name} is missing from the reference"
    assert "sweep-run-local" not in text  # hidden: what `sweep --detach` runs, not a user command
    for sub in ("list", "show", "init", "diff", "validate"):
        assert f"\n#### hpcjobs site {sub}\n" in text
    assert "Sentinel" not in text and "UNSET" not in text
