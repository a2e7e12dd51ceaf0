"""Numbers that come in (options, the environment, scheduler output) are refused or read, never a crash.

Classes: a count option with no upper bound (``status --points --offset 10**20`` overflowed SQLite's
INTEGER), a digit test that is true of digits ``int`` refuses or reads otherwise (``"²".isdigit()``),
and a number of seconds that is infinite or NaN (an ``inf`` timeout overflowed ``selectors``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from hpcjobs.cli import MAX_COUNT, main
from hpcjobs.errors import ConfigError
from hpcjobs.units import is_ascii_digits

PACKAGE = Path(__file__).resolve().parents[2] / "hpcjobs"


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))


def test_every_integer_option_has_an_upper_bound() -> None:
    unbounded = [(" ".join(path), p.name) for path, cmd in _commands(main) for p in cmd.params
                 if isinstance(p.type, click.IntRange) and p.type.max is None]
    bare = [(" ".join(path), p.name) for path, cmd in _commands(main) for p in cmd.params
            if p.type is click.INT]
    assert not unbounded and not bare, (unbounded, bare)


@pytest.mark.parametrize("args", [["status", "x", "--points", "--offset", str(10**20)],
                                  ["status", "x", "--points", "--limit", str(MAX_COUNT + 1)],
                                  ["logs", "x", "--index", str(10**30)],
                                  ["sweep", "exp.yaml", "--workers", str(10**19)]])
def test_a_huge_count_is_bad_input(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "is not in the range" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_no_module_tests_digits_with_isdigit() -> None:
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(PACKAGE)}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr == "isdigit" and path.name != "units.py"]
    assert not found, f"use hpcjobs.units.is_ascii_digits: {found}"


@given(st.text())
def test_ascii_digits_are_what_int_reads_as_written(text: str) -> None:
    if is_ascii_digits(text):
        assert int(text) == int(text.encode("ascii"))
        assert all("0" <= c <= "9" for c in text)
    else:
        assert not text or any(not "0" <= c <= "9" for c in text)


@pytest.mark.parametrize("value", ["²", "٣", "1²", "¹²³", "Ⅻ", "𝟗"])
def test_max_points_setting_with_other_digits_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from hpcjobs.config.sweep_size import MAX_POINTS_ENV, max_points_limit

    monkeypatch.setenv(MAX_POINTS_ENV, value)
    with pytest.raises(ConfigError, match=MAX_POINTS_ENV):
        max_points_limit()


@pytest.mark.parametrize("name", ["HPCJOBS_SCHEDULER_TIMEOUT_S", "HPCJOBS_LIMITS_TTL_S"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "-1", "ten", "1e9"])
def test_seconds_settings_that_are_not_a_finite_wait_are_bad_input(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                  value: str) -> None:
    from hpcjobs.schedulers import limits_cache

    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        limits_cache.query_timeout_s() if name.endswith("TIMEOUT_S") else limits_cache.ttl_s()


def test_seconds_settings_in_range_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.schedulers import limits_cache

    monkeypatch.setenv("HPCJOBS_SCHEDULER_TIMEOUT_S", "2.5")
    monkeypatch.setenv("HPCJOBS_LIMITS_TTL_S", "0")
    assert limits_cache.query_timeout_s() == 2.5 and limits_cache.ttl_s() == 0


@pytest.mark.parametrize("version", ["'abc'", "'２'", "1.5", "x'00'", "-3", "0", "99999999999"])
def test_a_ledger_schema_version_that_is_no_version_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     version: str) -> None:
    import sqlite3

    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text("name: ver\ncommand: echo $x\nsweep:\n  grid: {x: [1]}\n")
    assert CliRunner().invoke(main, ["sweep", "exp.yaml", "--site", "local"]).exit_code == 0
    (ledger,) = (tmp_path / "hpcjobs-sweeps").glob("*/ledger.sqlite")
    with sqlite3.connect(ledger) as con:
        con.execute(f"UPDATE sweep SET schema_version = {version}")
    result = CliRunner().invoke(main, ["status", "ver"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "schema version" in result.output or "is empty" in result.output, result.output
