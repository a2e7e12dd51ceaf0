"""An empty, blank or short id never stands for everything: ``hpcjobs cancel ''`` cancelled the only sweep.

The rule lives in :mod:`hpcjobs.ids` (:func:`check_id_argument`, :func:`match_prefix`); every lookup of a
sweep, job or point that a person types goes through it: :func:`hpcjobs.sweep.find.find_sweep`,
:func:`hpcjobs.sweep.singles_read.find_single`, ``report --sweep``
(:func:`hpcjobs.accounting.report_source.resolve_sweep_name`) and the point of ``logs``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs import process
from hpcjobs.accounting.report_source import resolve_sweep_name
from hpcjobs.cli import main
from hpcjobs.errors import ConfigError, IdArgumentError
from hpcjobs.ids import MIN_PREFIX, check_id_argument, is_blank, match_prefix
from hpcjobs.sweep.find import find_sweep
from hpcjobs.sweep.identity import name_of
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.log_files import sweep_logs
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.singles_read import find_single
from hpcjobs.sweep.submitter import open_ledger
from tests.hostile._lying_helpers import experiment

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")
FIXTURE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: Text that shows nothing: whitespace, and control and format characters of every kind.
BLANK = st.text(alphabet=st.one_of(st.characters(categories=("Zs", "Zl", "Zp", "Cc", "Cf")),
                                   st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\u200b\u2028\ufeff")), max_size=8)
#: Any text, weighted towards the start of the sweep ids below (prefixes, names, near misses).
IDS = ("lr-1a2b3c4d", "lr-5e6f7a8b-2", "ab-00000000", "big-0badf00d", "bigger-12345678")
TEXT = st.one_of(st.text(max_size=14),
                 st.builds(lambda i, n: i[:n], st.sampled_from(IDS), st.integers(0, 14)),
                 st.builds(lambda i, n, tail: i[:n] + tail, st.sampled_from(IDS), st.integers(0, 14),
                           st.text(max_size=3)))


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sweep root with the folders of :data:`IDS` (each holding a ledger file), the current folder above it."""
    root = tmp_path / "hpcjobs-sweeps"
    for sweep_id in IDS:
        (root / sweep_id).mkdir(parents=True)
        (root / sweep_id / "ledger.sqlite").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return root


def _expected(text: str) -> str | None:
    """What find_sweep must answer for ``text`` among :data:`IDS` (``None``: an error)."""
    if is_blank(text) or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        return None
    if text in IDS:
        return text
    named = [i for i in IDS if name_of(i) == text]
    if named:
        return named[0] if len(named) == 1 else None
    prefixed = [i for i in IDS if i.startswith(text)]
    return prefixed[0] if len(prefixed) == 1 and len(text) >= MIN_PREFIX else None


# ------------------------------------------------------------------------------ the rule itself


@given(BLANK)
def test_every_blank_id_is_refused(text: str) -> None:
    assert is_blank(text)
    with pytest.raises(IdArgumentError):
        check_id_argument(text)
    with pytest.raises(IdArgumentError):
        match_prefix(text, ["lr-1a2b3c4d"])


@given(st.text(max_size=10), st.lists(st.text(max_size=10), max_size=6))
def test_a_prefix_names_one_id_and_has_the_minimum_length(text: str, candidates: list[str]) -> None:
    hits = {c for c in candidates if c.startswith(text)}
    try:
        found = match_prefix(text, candidates)
    except IdArgumentError as exc:
        assert is_blank(text) or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text) or len(text) < MIN_PREFIX \
            or len(hits) > 1
        message = str(exc)
        assert repr(text) in message
        if hits and not is_blank(text) and len(text) < MIN_PREFIX:
            assert f"at least {MIN_PREFIX} characters" in message
        if len(hits) > 1 and len(text) >= MIN_PREFIX:
            assert "ambiguous" in message and all(h in message for h in sorted(hits)[:5])
        return
    if found is None:
        assert not hits
    else:
        assert hits == {found} and len(text) >= MIN_PREFIX


@FIXTURE
@given(TEXT)
def test_find_sweep_never_takes_a_blank_or_short_prefix(fake_root: Path, text: str) -> None:
    expected = _expected(text)
    try:
        found = find_sweep(text)
    except ConfigError:
        assert expected is None, (text, expected)
        return
    assert found == fake_root / expected, (text, found)


def test_the_current_folder_is_not_the_empty_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "hpcjobs-sweeps" / "lr-1a2b3c4d"
    folder.mkdir(parents=True)
    (folder / "ledger.sqlite").write_bytes(b"")
    monkeypatch.chdir(folder)  # Path('') is '.', which holds a ledger
    for text in ("", " ", "\t", "\u200b"):
        with pytest.raises(IdArgumentError, match="blank|empty"):
            find_sweep(text)
    assert find_sweep(".") == folder  # a folder given as such still is one


def test_short_exact_ids_and_names_still_match(fake_root: Path) -> None:
    assert find_sweep("ab") == fake_root / "ab-00000000"  # an exact name shorter than the minimum
    assert find_sweep("big") == fake_root / "big-0badf00d"
    assert find_sweep("bigg") == fake_root / "bigger-12345678"
    with pytest.raises(IdArgumentError, match="at least 4 characters"):
        find_sweep("bi")
    with pytest.raises(ConfigError, match="ambiguous"):
        find_sweep("lr-")


def test_single_jobs_refuse_blank_ids(fake_root: Path) -> None:
    for text in ("", "  ", "\x00"):
        with pytest.raises(IdArgumentError):
            find_single(text, fake_root)


def test_report_sweep_names_follow_the_same_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no sweep here: the accounting data's sweep ids are matched
    ids = ["lr-1a2b3c4d", "lr-5e6f7a8b", "other-0badf00d"]
    for text in ("", " ", "\n"):
        with pytest.raises(IdArgumentError):
            resolve_sweep_name(text, ids)
    with pytest.raises(IdArgumentError, match="at least 4"):
        resolve_sweep_name("ot", ids)
    with pytest.raises(ConfigError, match="ambiguous"):
        resolve_sweep_name("lr", ids)
    with pytest.raises(IdArgumentError, match="ambiguous"):
        resolve_sweep_name("lr-1a2b3c4d"[:4], ids + ["lr-1a2b3c4d-2"])
    assert resolve_sweep_name("othe", ids) == "other-0badf00d"
    assert resolve_sweep_name("other", ids) == "other-0badf00d"


def _planned_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int = 3) -> Path:
    """A Slurm sweep planned, not submitted: its points are PLANNED (``cancel`` would cancel them)."""
    monkeypatch.chdir(tmp_path)
    prepared = prepare_sweep(experiment(tmp_path, n), site=SITE, root=tmp_path / "hpcjobs-sweeps")
    open_ledger(prepared).close()
    return prepared.folder


def test_a_point_prefix_needs_the_minimum_length(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _planned_sweep(tmp_path, monkeypatch, n=1)
    with Ledger.open(folder) as ledger:
        (point,) = ledger.points()
    for text in ("", " ", point.point_id[:MIN_PREFIX - 1]):
        with pytest.raises(IdArgumentError):
            sweep_logs(folder, point=text, poll=False)
    (found,) = sweep_logs(folder, point=point.point_id[:MIN_PREFIX], poll=False)
    assert found.point_id == point.point_id


# ------------------------------------------------------------------------------ the command line


COMMANDS = [("cancel", ""), ("status", " "), ("status", ""), ("resubmit", ""), ("results", ""), ("logs", ""),
            ("report", "--sweep", ""), ("cancel", "\t"), ("cancel", "ly"), ("logs", "\u00a0"), ("watch", ""),
            ("watch", " "), ("metrics", ""), ("why", "")]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(repr(a) for a in c) for c in COMMANDS])
def test_the_cli_refuses_blank_ids_and_cancels_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       args: tuple[str, ...]) -> None:
    folder = _planned_sweep(tmp_path, monkeypatch)
    calls: list[list[str]] = []

    def no_scheduler(argv, **kw):  # nothing may reach the scheduler
        calls.append(list(argv))
        raise AssertionError(f"ran {argv}")

    monkeypatch.setattr(process, "run_command", no_scheduler)
    before = os.stat(folder / "ledger.sqlite").st_mtime_ns
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2, result.output
    assert calls == []
    text = args[-1]
    assert repr(text) in result.output
    said = result.output
    assert ("at least 4" in said) if text.strip() else ("is blank" in said or "an empty" in said)
    assert os.stat(folder / "ledger.sqlite").st_mtime_ns == before
    with Ledger.open(folder, allow_read_only=True) as ledger:
        assert ledger.summary() == {"PLANNED": 3}  # nothing cancelled, nothing submitted


def test_the_cli_still_takes_a_long_enough_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _planned_sweep(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["cancel", folder.name[:MIN_PREFIX]])
    assert result.exit_code == 0, result.output
    with Ledger.open(folder, allow_read_only=True) as ledger:
        assert ledger.summary() == {"CANCELLED": 3}
