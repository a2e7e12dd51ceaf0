"""Expanding sweeps into points: order, ids, duplicates, random draws, W&B files, overrides, env files."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.sweep import SweepSpec
from hpcjobs.errors import ConfigError
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.overrides import parse_overrides
from hpcjobs.sweep.points.point import Point, canonical_json, env_value, point_env_file_text, point_id

ROOT = Path(__file__).resolve().parents[2]


def _spec(data: dict) -> SweepSpec:
    return SweepSpec.model_validate(data)


def _params(data: dict, overrides: object = ()) -> list[dict]:
    return [p.params for p in expand(_spec(data), overrides)]  # type: ignore[arg-type]


def test_grid_is_nested_loops_first_key_outermost() -> None:
    assert _params({"grid": {"a": [1, 2], "b": ["x", "y"]}}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_parts_combine_as_a_product_in_written_order() -> None:
    pts = _params({"grid": {"a": [1, 2]}, "zip": {"s": [7, 8], "t": ["p", "q"]}, "points": [{"o": "adam"}]})
    assert pts == [
        {"a": 1, "s": 7, "t": "p", "o": "adam"}, {"a": 1, "s": 8, "t": "q", "o": "adam"},
        {"a": 2, "s": 7, "t": "p", "o": "adam"}, {"a": 2, "s": 8, "t": "q", "o": "adam"}]


def test_grid_of_zips() -> None:
    pts = _params({"zip": [{"a": [1, 2], "b": [3, 4]}, {"c": [5, 6], "d": [7, 8]}]})
    assert pts == [{"a": 1, "b": 3, "c": 5, "d": 7}, {"a": 1, "b": 3, "c": 6, "d": 8},
                   {"a": 2, "b": 4, "c": 5, "d": 7}, {"a": 2, "b": 4, "c": 6, "d": 8}]


def test_union_concatenates_sub_sweeps_each_with_its_own_exclude() -> None:
    pts = _params({"grid": {"seed": [1, 2]}, "union": [
        {"grid": {"model": ["cnn"], "depth": [2, 4]}, "exclude": [{"depth": 4}]},
        {"points": [{"model": "mlp"}]},
    ]})
    assert pts == [{"seed": 1, "model": "cnn", "depth": 2}, {"seed": 1, "model": "mlp"},
                   {"seed": 2, "model": "cnn", "depth": 2}, {"seed": 2, "model": "mlp"}]


def test_exclude_matches_all_pairs_lists_mean_any_and_booleans_are_not_numbers() -> None:
    data = {"grid": {"lr": [0.1, 0.01], "depth": [2, 4], "flag": [True, 1]},
            "exclude": [{"lr": 0.1, "depth": [2, 4]}, {"flag": True, "depth": 4.0}]}
    assert _params(data) == [
        {"lr": 0.01, "depth": 2, "flag": True}, {"lr": 0.01, "depth": 2, "flag": 1},
        {"lr": 0.01, "depth": 4, "flag": 1}]


def test_filter_keeps_points_where_true() -> None:
    pts = _params({"grid": {"lr": [0.1, 0.01], "depth": [2, 4]}, "filter": "lr < 0.1 or depth >= 4"})
    assert pts == [{"lr": 0.1, "depth": 4}, {"lr": 0.01, "depth": 2}, {"lr": 0.01, "depth": 4}]


def test_unknown_names_in_exclude_and_filter_are_errors() -> None:
    with pytest.raises(ConfigError, match="exclude rule 0 names 'dpeth'"):
        expand(_spec({"grid": {"depth": [1]}, "exclude": [{"dpeth": 1}]}))
    with pytest.raises(ConfigError, match="filter names 'lrr'"):
        expand(_spec({"grid": {"lr": [1]}, "filter": "lrr > 0"}))
    with pytest.raises(ConfigError, match="fails on"):
        expand(_spec({"grid": {"lr": ["1e-3"]}, "filter": "lr > 0"}))


def test_point_ids_are_sha256_of_canonical_json() -> None:
    (p,) = expand(_spec({"points": [{"b": "é", "a": 0.1, "c": True, "d": None}]}))
    text = '{"a":0.1,"b":"é","c":true,"d":null}'
    assert p == Point(0, hashlib.sha256(text.encode()).hexdigest()[:12], {"b": "é", "a": 0.1, "c": True, "d": None},
                      text)
    assert point_id({"a": 1}) != point_id({"a": 1.0}) != point_id({"a": True})
    assert point_id({"x": 1, "y": 2}) == point_id({"y": 2, "x": 1})


def test_duplicates_are_dropped_first_kept_and_indices_renumbered() -> None:
    pts = expand(_spec({"union": [{"grid": {"a": [1, 2]}}, {"grid": {"a": [2, 3]}}]}))
    assert [(p.index, p.params) for p in pts] == [(0, {"a": 1}), (1, {"a": 2}), (2, {"a": 3})]


def test_empty_sweep_is_one_point_without_parameters() -> None:
    (p,) = expand(None)
    assert (p.index, p.params, p.params_json) == (0, {}, "{}")


def test_random_is_reproducible_and_in_range() -> None:
    data = {"random": {"seed": 42, "samples": 200, "parameters": {
        "u": {"distribution": "uniform", "min": -1, "max": 1},
        "lu": {"distribution": "log_uniform", "min": 1e-4, "max": 1e-1},
        "i": {"distribution": "int_uniform", "min": 2, "max": 4},
        "c": {"distribution": "choice", "values": ["a", "b"]},
        "n": {"distribution": "normal", "mu": 10, "sigma": 0.001},
    }}}
    first, again = expand(_spec(data)), expand(_spec(data))
    assert [p.point_id for p in first] == [p.point_id for p in again]
    assert len(first) == 200
    assert all(-1 <= p.params["u"] <= 1 and 1e-4 <= p.params["lu"] <= 1e-1 for p in first)
    assert {p.params["i"] for p in first} == {2, 3, 4}
    assert {p.params["c"] for p in first} == {"a", "b"}
    assert all(abs(p.params["n"] - 10) < 0.01 for p in first)
    other_seed = expand(_spec({"random": {**data["random"], "seed": 43}}))
    assert [p.point_id for p in other_seed] != [p.point_id for p in first]


def test_random_draws_use_only_random_random_in_parameter_order() -> None:
    # Random.random()'s sequence for a seed is the same on every Python version: the sweep is too.
    (p,) = expand(_spec({"random": {"seed": 1, "samples": 1, "parameters": {
        "lr": {"distribution": "log_uniform", "min": 1e-5, "max": 1e-1},
        "layers": {"distribution": "int_uniform", "min": 2, "max": 12},
        "act": {"distribution": "choice", "values": ["relu", "gelu", "silu"]},
        "drop": {"distribution": "uniform", "min": 0.1, "max": 0.5}}}}))
    r = random.Random(1)
    u1, u2, u3, u4 = r.random(), r.random(), r.random(), r.random()
    assert p.params == {"lr": math.exp(math.log(1e-5) + (math.log(1e-1) - math.log(1e-5)) * u1),
                        "layers": 2 + int(u2 * 11), "act": ["relu", "gelu", "silu"][int(u3 * 3)],
                        "drop": 0.1 + 0.4 * u4}
    assert (u1, u2, u3) == (0.13436424411240122, 0.8474337369372327, 0.763774618976614)  # CPython's MT19937


def test_wandb_grid_sorted_names_int_uniform_and_q_uniform_enumerated() -> None:
    pts = _params({"method": "grid", "parameters": {
        "z": {"values": ["a", "b"]}, "i": {"min": 1, "max": 3}, "k": {"value": 7},
        "q": {"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.5}}})
    assert pts[:3] == [{"i": 1, "k": 7, "q": 0.0, "z": "a"}, {"i": 1, "k": 7, "q": 0.0, "z": "b"},
                       {"i": 1, "k": 7, "q": 0.5, "z": "a"}]
    assert len(pts) == 3 * 1 * 2 * 2  # q_uniform: W&B's arange(min, max, q) excludes max


def test_wandb_run_cap_caps_a_grid_and_counts_random_draws() -> None:
    assert len(_params({"method": "grid", "run_cap": 3, "parameters": {"a": {"values": [1, 2, 3, 4, 5]}}})) == 3
    rnd = {"method": "random", "run_cap": 50, "parameters": {"a": {"min": 0.0, "max": 1.0}}}
    assert len(_params(rnd)) == 50
    assert len(_params({**rnd, "samples": 7})) == 7  # samples wins over run_cap
    assert _params({**rnd, "seed": 0}) == _params(rnd)  # default seed 0


def test_wandb_distribution_semantics() -> None:
    pts = _params({"method": "random", "samples": 300, "seed": 1, "parameters": {
        "lu": {"distribution": "log_uniform", "min": 0, "max": 2},  # exponents: X in [1, e^2]
        "luv": {"distribution": "log_uniform_values", "min": 0.001, "max": 0.1},
        "qluv": {"distribution": "q_log_uniform_values", "min": 1, "max": 1000, "q": 10},
        "ilu": {"distribution": "inv_log_uniform", "min": 0, "max": 2},  # X in [e^-2, 1]
        "iluv": {"distribution": "inv_log_uniform_values", "min": 0.01, "max": 0.1},
        "qn": {"distribution": "q_normal", "mu": 100, "sigma": 5, "q": 2},
        "ln": {"distribution": "log_normal"},
        "cat": {"values": ["x", "y"], "probabilities": [1.0, 0.0]},
        "iu": {"min": 1, "max": 2},
    }})
    for p in pts:
        assert 1 <= p["lu"] <= math.e ** 2
        assert 0.001 <= p["luv"] <= 0.1
        assert isinstance(p["qluv"], int) and p["qluv"] % 10 == 0
        assert math.exp(-2) <= p["ilu"] <= 1
        assert 0.01 <= p["iluv"] <= 0.1
        assert p["qn"] % 2 == 0
        assert p["ln"] > 0
        assert p["cat"] == "x"
        assert p["iu"] in (1, 2)


def test_overrides_parse_hydra_style() -> None:
    assert parse_overrides(["lr=0.1,0.01", "model.depth=2,4", "opt=adam", "+x=null,true,'a,b',\"3\"",
                            "r=range(0,6,2)", "f=range(0, 0.3, 0.1)", "c=choice(sgd, 1)", "e="]) == {
        "lr": [0.1, 0.01], "model.depth": [2, 4], "opt": ["adam"], "x": [None, True, "a,b", "3"],
        "r": [0, 2, 4], "f": [0, 0.1, 0.2], "c": ["sgd", 1], "e": [""]}
    assert parse_overrides(["t=12:00:00"]) == {"t": ["12:00:00"]}  # not YAML 1.1 base-60


@pytest.mark.parametrize(("arg", "message"), [
    ("lr", "expected KEY=VALUE"), ("~lr=1", "deleting a key"), ("1x=2", "not a valid parameter name"),
    ("a=[1,2]", "not a scalar"), ("a=interval(0,1)", "interval() is not supported"), ("a='x", "unterminated"),
    ("a=range(1,2,0)", "step cannot be 0"), ("a=range(x)", "range() takes 1 to 3 numbers"), ("a=.nan", "finite"),
])
def test_bad_overrides(arg: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_overrides([arg])
    with pytest.raises(ConfigError, match="given twice"):
        parse_overrides(["a=1", "a=2"])


def test_overrides_are_the_innermost_loop_and_replace_file_values() -> None:
    data = {"grid": {"lr": [0.1, 0.2], "depth": [2]}, "filter": "opt != 'sgd' or lr < 0.15"}
    assert _params(data, ["opt=adam,sgd"]) == [
        {"lr": 0.1, "depth": 2, "opt": "adam"}, {"lr": 0.1, "depth": 2, "opt": "sgd"},
        {"lr": 0.2, "depth": 2, "opt": "adam"}]
    assert _params({"grid": data["grid"]}, ["lr=0.5", "depth=3,4"]) == [
        {"lr": 0.5, "depth": 3}, {"lr": 0.5, "depth": 4}]  # duplicates of the replaced grid dropped
    assert _params(data, {"opt": ["x"]}) == _params(data, ["opt=x"])
    with pytest.raises(ConfigError, match="both be exported as model_depth"):
        expand(_spec({"grid": {"model.depth": [1]}}), ["model_depth=2"])


def test_env_file_text_exactly() -> None:
    (p,) = expand(_spec({"points": [{"model.depth": 4, "name": "it's", "lr": 0.1, "ok": False, "none": None}]}))
    assert point_env_file_text(p) == (
        f"# hpcjobs sweep point {p.point_id} (index 0)\n"
        "export model_depth=4\n"
        "export name='it'\"'\"'s'\n"
        "export lr=0.1\n"
        "export ok=false\n"
        "export none=''\n"
        f"export HPCJOBS_POINT_ID={p.point_id}\n"
        "export HPCJOBS_POINT_INDEX=0\n"
        "export HPCJOBS_PARAMS_JSON="
        "'{\"lr\":0.1,\"model.depth\":4,\"name\":\"it'\"'\"'s\",\"none\":null,\"ok\":false}'\n")


_names = st.from_regex(r"[a-z][a-z0-9]{0,6}(\.[a-z][a-z0-9]{0,4})?", fullmatch=True)
_hostile = st.one_of(
    st.sampled_from(["$(touch /tmp/hpcjobs-pwned)", "`id`", "'", '"', "a\nb", "\\", "$HOME", "${x:-y}", "; rm -rf ~",
                     "'\"'\"'", "\n", "", " lead", "trail ", "*", "!!", "\t"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30),
    st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_names, _hostile, min_size=1, max_size=5))
def test_hostile_values_come_back_verbatim_when_sourced(tmp_path: Path, params: dict) -> None:
    names = {k.replace(".", "_") for k in params}
    if len(names) != len(params):
        return  # a.b and a_b collide by design (tested elsewhere)
    (p,) = expand(_spec({"points": [params]}))
    env_file = tmp_path / "point.env"
    env_file.write_text(point_env_file_text(p), encoding="utf-8")
    keys = [k.replace(".", "_") for k in p.params]
    quoted = " ".join('"$' + k + '"' for k in keys)
    script = 'source "$1" && printf "%s\\0" ' + quoted + ' "$HPCJOBS_POINT_ID" "$HPCJOBS_PARAMS_JSON"'
    out = subprocess.run(["bash", "--norc", "-c", script, "bash", str(env_file)], capture_output=True, check=True,
                         cwd=tmp_path).stdout.decode("utf-8")
    got = out.split("\0")[:-1]
    assert got[:-2] == [env_value(v) for v in p.params.values()]
    assert got[-2] == p.point_id
    assert json.loads(got[-1]) == p.params
    assert not Path("/tmp/hpcjobs-pwned").exists()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c.d"]), _hostile, min_size=1, max_size=3), min_size=1,
                max_size=8))
def test_fast_canonical_encoder_equals_json_dumps(points: list[dict]) -> None:
    got = expand(_spec({"points": points}))
    assert all(p.params_json == canonical_json(p.params) for p in got)
    assert len({p.point_id for p in got}) == len(got)


@pytest.mark.parametrize(("name", "count"), [("sweep-grid", 14), ("sweep-random", 19), ("sweep-wandb", 12)])
def test_shipped_examples_expand(name: str, count: int) -> None:
    from hpcjobs.config.loading import load_experiment
    from hpcjobs.config.validation import validate_document

    _, doc = load_experiment(ROOT / "examples" / f"{name}.yaml")
    spec = validate_document(SweepSpec, doc, doc.data["sweep"], ("sweep",))
    points = expand(spec)
    assert len(points) == count
    assert [p.point_id for p in points] == [p.point_id for p in expand(spec)]
    for p in points:
        text = point_env_file_text(p)
        assert text.count("\nexport ") == len(p.params) + 3
