"""Streamed sweeps: the same points as a list, produced again on each read, never all held; chunk files in one pass."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.sweep import SweepSpec
from hpcjobs.errors import ConfigError, LedgerError
from hpcjobs.sweep.chunk_files import env_file_text, write_chunk_files
from hpcjobs.sweep.chunks import Chunk
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import point_env_lines
from hpcjobs.sweep.points.stream import SweepPoints, sweep_points
from hpcjobs.sweep.prepare import chunk_env_text, prepare_sweep

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")

SPECS: list[tuple[dict[str, Any], list[str]]] = [
    ({"grid": {"a": [1, 2], "b": ["x", "y"]}}, []),
    ({"grid": {"b": [1, 2.5, True, None, "it's", "a\nb", "é", "$(x)"], "a": [0.0, -0.0, 1e16]}}, ["z=0.00005,2"]),
    ({"grid": {"a": [1, 2]}, "zip": {"s": [7, 8], "t": ["p", "q"]}, "points": [{"o": "adam"}, {"p": 3}]}, []),
    ({"grid": {"seed": [1, 2]}, "union": [{"grid": {"model": ["cnn"], "depth": [2, 4]}, "exclude": [{"depth": 4}]},
                                          {"grid": {"model": ["mlp"]}}]}, ["lr=1,2"]),
    ({"random": {"seed": 3, "samples": 20, "parameters": {
        "lr": {"distribution": "log_uniform", "min": 1e-5, "max": 1e-1},
        "c": {"distribution": "choice", "values": [1, 2]}}}}, []),
    ({"grid": {"a": [1, 2, 3]}, "filter": "a != 2"}, []),
    ({"grid": {"lr": [1, 2]}}, ["lr=5"]),  # the override replaces the file's values: duplicates dropped
    ({}, []),
    ({}, ["q=1,2"]),
    ({"method": "grid", "parameters": {"lr": {"values": [0.1, 0.2]}, "n": {"min": 1, "max": 3}}, "run_cap": 4}, []),
]


@pytest.mark.parametrize(("data", "overrides"), SPECS)
def test_every_read_is_the_expanded_list(data: dict[str, Any], overrides: list[str]) -> None:
    spec = SweepSpec.model_validate(data)
    points = expand(spec, overrides)
    sp = sweep_points(spec, overrides)
    assert list(sp) == points and list(sp) == points  # again: produced anew, the same
    assert len(sp) == len(points) and sp[0] == points[0] and list(sp[-2:]) == points[-2:]
    assert list(sweep_points(spec, overrides).ledger_rows()) == [(p.index, p.point_id, p.params_json) for p in points]
    wanted = {p.point_id: 0 for p in points[::2]}
    assert list(sweep_points(spec, overrides).env_bodies(wanted)) == [
        (p.point_id, "".join(f"    {line}\n" for line in point_env_lines(p))) for p in points[::2]]
    assert sweep_points(spec, overrides).digest() == SweepPoints(spec, sp.grid, spellings=sp.spellings).digest()


values = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                   st.none(),
                   # no lone surrogates: a spec refuses them (not valid Unicode text), which other tests hold
                   st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                           max_size=8))


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(grid=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True),
                            st.lists(values, min_size=1, max_size=4), min_size=1, max_size=3))
def test_a_plain_grid_read_piece_by_piece_equals_the_point_by_point_expansion(grid: dict[str, list[Any]]) -> None:
    try:
        spec = SweepSpec.model_validate({"grid": grid})
        points = expand(spec)
    except ConfigError:  # a value listed twice, or a name reserved: refused both ways
        with pytest.raises(ConfigError):
            list(sweep_points(SweepSpec.model_validate({"grid": grid})))
        return
    sp = sweep_points(spec)
    assert sp.is_plain_grid and len(sp) == len(points)
    assert list(sp.ledger_rows()) == [(p.index, p.point_id, p.params_json) for p in points]
    wanted = {p.point_id: 0 for p in points}
    assert list(sp.env_bodies(wanted)) == [(p.point_id, "".join(f"    {x}\n" for x in point_env_lines(p)))
                                           for p in points]


def test_a_million_point_grid_is_counted_and_read_without_being_held() -> None:
    sp = sweep_points(SweepSpec.model_validate({"grid": {"a": list(range(1000)), "b": list(range(1000))}}))
    assert len(sp) == 1_000_000 and sp.is_plain_grid
    first = list(itertools.islice(sp.ledger_rows(), 3))
    assert [r[0] for r in first] == [0, 1, 2] and first[1][2] == '{"a":0,"b":1}'
    assert sp._list is None  # nothing was materialised


def test_a_filter_that_fails_on_a_point_fails_when_the_sweep_is_prepared(tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text("name: f\ncommand: echo\nsweep:\n  grid:\n    a: [1, 0]\n  filter: 1 / a > 0\n")
    with pytest.raises(ConfigError, match="filter"):
        prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")


def test_a_prepared_sweep_streams_its_points(tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text("name: s\ncommand: echo $a\nsweep:\n  grid:\n    a: [1, 2, 3]\n")
    prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sweeps")
    assert isinstance(prepared.points, SweepPoints) and len(prepared.points) == 3
    assert prepared.shape_of["anything"] == 0 and len(prepared.shape_of) == 0  # one shape: nothing per point


# ------------------------------------------------------------------------------------------ chunk files

class _Prepared:
    def __init__(self, folder: Path, points: Any) -> None:
        self.sweep_id = "s-00000000"
        self.folder = folder
        self.points = points


@pytest.mark.parametrize(("data", "overrides"), SPECS[:4])
def test_chunk_files_written_in_one_pass_are_those_of_one_chunk_at_a_time(tmp_path: Path, data: dict[str, Any],
                                                                         overrides: list[str]) -> None:
    spec = SweepSpec.model_validate(data)
    points = expand(spec, overrides)
    ids = [p.point_id for p in points]
    chunks = [Chunk(3, tuple(ids[1::2])), Chunk(4, tuple(reversed(ids[::2])))]  # any order, any points
    write_chunk_files(_Prepared(tmp_path, sweep_points(spec, overrides)), chunks)
    for chunk in chunks:
        env = (tmp_path / "chunks" / f"{chunk.number}.env").read_text()
        assert env == chunk_env_text(_Prepared(tmp_path, points), chunk.point_ids)  # type: ignore[arg-type]
        assert env == env_file_text("s-00000000", [point_env_lines(next(p for p in points if p.point_id == i))
                                                   for i in chunk.point_ids])
        assert (tmp_path / "chunks" / f"{chunk.number}.ids").read_text() == "".join(f"{i}\n" for i in chunk.point_ids)


def test_the_chunk_file_format_is_unchanged() -> None:
    points = expand(SweepSpec.model_validate({"grid": {"x": [1, "a b"]}}))
    assert env_file_text("s-1", [point_env_lines(p) for p in points]) == (
        "# hpcjobs sweep s-1: parameters by array index (generated; do not edit)\n"
        'case "$HPCJOBS_ARRAY_INDEX" in\n'
        "0)\n"
        "    export x=1\n"
        f"    export HPCJOBS_POINT_ID={points[0].point_id}\n"
        "    export HPCJOBS_POINT_INDEX=0\n"
        """    export HPCJOBS_PARAMS_JSON='{"x":1}'\n"""
        "    ;;\n"
        "1)\n"
        "    export x='a b'\n"
        f"    export HPCJOBS_POINT_ID={points[1].point_id}\n"
        "    export HPCJOBS_POINT_INDEX=1\n"
        """    export HPCJOBS_PARAMS_JSON='{"x":"a b"}'\n"""
        "    ;;\n"
        '*) echo "hpcjobs: no sweep point for array index $HPCJOBS_ARRAY_INDEX" >&2; exit 2;;\n'
        "esac\n")


def test_a_chunk_point_the_sweep_no_longer_has_is_refused(tmp_path: Path) -> None:
    sp = sweep_points(SweepSpec.model_validate({"grid": {"x": [1, 2]}}))
    with pytest.raises(LedgerError, match="point 000000000000 of chunk 0 is not among"):
        write_chunk_files(_Prepared(tmp_path, sp), [Chunk(0, ("000000000000",))])
