"""The ``sweep:`` models: what is accepted, and the messages for what is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hpcjobs.config.sweep import (
    SweepSpec,
    env_name,
    env_names,
    flatten_wandb,
    parse_sweep,
)
from hpcjobs.config.sweep_filter import FilterError, compile_filter
from hpcjobs.config.types import StrictModel
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.errors import ConfigError


class _Doc(StrictModel):
    sweep: SweepSpec | None = None


def _problems(yaml_text: str) -> list[str]:
    doc = parse_yaml(yaml_text, "exp.yaml")
    with pytest.raises(ConfigError) as info:
        validate_document(_Doc, doc)
    return [str(p) for p in info.value.problems]


def _error(data: dict) -> str:
    with pytest.raises(ValidationError) as info:
        SweepSpec.model_validate(data)
    return str(info.value)


def test_native_parts_parse() -> None:
    s = SweepSpec.model_validate({
        "grid": {"lr": [0.1, 0.01], "model.depth": [2, 4]},
        "zip": {"seed": [1, 2], "tag": ["a", "b"]},
        "points": [{"opt": "adam"}, {"opt": "sgd", "momentum": 0.9}],
        "random": {"seed": 3, "samples": 5, "parameters": {"wd": {"distribution": "log_uniform", "min": 1e-5,
                                                                   "max": 1e-2}}},
        "exclude": [{"lr": 0.1, "model.depth": [2, 4]}],
        "filter": "lr < 0.1 or seed == 1",
    })
    assert s.zip == [{"seed": [1, 2], "tag": ["a", "b"]}]  # one mapping is one zip group
    assert s.param_names() == ["lr", "model.depth", "seed", "tag", "opt", "momentum", "wd"]
    assert not s.is_wandb


def test_values_keep_their_yaml_types() -> None:
    s = SweepSpec.model_validate({"grid": {"x": [True, 1, 1.0, "1", None]}})
    assert [type(v) for v in s.grid["x"]] == [bool, int, float, str, type(None)]


def test_zip_of_unequal_lengths_names_params_and_lengths() -> None:
    problems = _problems("sweep:\n  zip:\n    seed: [1, 2, 3]\n    tag: [a, b]\n")
    assert problems == ["exp.yaml:2:3: sweep.zip: zip needs lists of equal length: seed has 3, tag has 2"]


def test_unknown_key_is_located_with_a_suggestion() -> None:
    problems = _problems("sweep:\n  gird:\n    lr: [1]\n")
    assert problems[0].startswith("exp.yaml:2:3: sweep.gird: unknown key 'gird'; did you mean 'grid'?")


def test_grid_of_zips_as_a_list_of_groups() -> None:
    s = SweepSpec.model_validate({"zip": [{"a": [1, 2], "b": [3, 4]}, {"c": [5], "d": [6]}]})
    assert len(s.zip) == 2
    assert "zip needs lists of equal length: c has 1, d has 2" in _error({"zip": [{"a": [1]}, {"c": [5], "d": [6, 7]}]})


@pytest.mark.parametrize(("data", "message"), [
    ({"grid": {"lr": []}}, "at least 1 item"),
    ({"grid": {"1lr": [1]}}, "'1lr' is not a valid parameter name"),
    ({"grid": {"lr": [[1, 2]]}}, "Input should be a valid"),
    ({"grid": {"lr": [float("nan")]}}, "finite numbers"),
    ({"grid": {"name": ["a\x00b"]}}, "NUL"),
    ({"grid": {"lr": [1]}, "zip": {"lr": [2]}}, "parameter 'lr' is defined by both grid and zip"),
    ({"points": [{"a": 1}], "union": [{"grid": {"a": [1]}}]}, "parameter 'a' is defined by both points and union"),
    ({"random": {"seed": 1, "samples": 0, "parameters": {"a": {"distribution": "uniform", "min": 0, "max": 1}}}},
     "greater than 0"),
    ({"random": {"samples": 2, "parameters": {"a": {"distribution": "uniform", "min": 0, "max": 1}}}}, "seed"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "uniform", "min": 0}}}},
     "distribution uniform needs min, max (missing max)"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "uniform", "min": 0, "max": 1,
                                                                "values": [1]}}}},
     "distribution uniform takes min, max, not values"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "log_uniform", "min": 0, "max": 1}}}},
     "log_uniform needs 0 < min"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "int_uniform", "min": 0, "max": 1.5}}}},
     "int_uniform needs integer min and max"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "uniform", "min": 2, "max": 1}}}},
     "min (2) must be below max (1)"),
    ({"random": {"seed": 1, "samples": 2, "parameters": {"a": {"distribution": "beta", "min": 0, "max": 1}}}},
     "'uniform', 'log_uniform', 'int_uniform', 'choice' or 'normal'"),
    ({"filter": "lr <"}, "is not a valid expression"),
    ({"filter": "__import__('os').system('true')"}, "unsupported syntax in filter: Call"),
    ({"grid": {"a.b": [1], "a_b": [2]}}, "parameters 'a.b' and 'a_b' would both be exported as a_b"),
    ({"grid": {"PATH": ["/tmp"]}}, "would set the environment variable PATH"),
])
def test_invalid_native_sweeps(data: dict, message: str) -> None:
    assert message in _error(data)


# ------------------------------------------------------------------------------------------------ W&B

WANDB = {
    "program": "train.py", "method": "random", "name": "s", "description": "d",
    "metric": {"name": "val_loss", "goal": "minimize"}, "early_terminate": {"type": "hyperband", "min_iter": 3},
    "command": ["${env}", "${interpreter}", "${program}", "${args}"], "run_cap": 10,
    "parameters": {
        "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 0.1},
        "batch_size": {"values": [16, 32]},
        "epochs": {"value": 5},
        "layers": {"min": 2, "max": 6},
        "dropout": {"min": 0.0, "max": 0.5},
        "optimizer": {"parameters": {"momentum": {"value": 0.9}, "name": {"values": ["sgd", "adam"]}}},
    },
}


def test_wandb_file_with_ignored_keys_parses_and_infers_distributions() -> None:
    s = SweepSpec.model_validate(WANDB)
    assert s.is_wandb
    flat = flatten_wandb(s.parameters)
    assert list(flat) == ["batch_size", "dropout", "epochs", "layers", "lr", "optimizer.momentum", "optimizer.name"]
    kinds = {n: p.kind() for n, p in flat.items()}
    assert kinds == {"batch_size": "categorical", "dropout": "uniform", "epochs": "constant",
                     "layers": "int_uniform", "lr": "log_uniform_values", "optimizer.momentum": "constant",
                     "optimizer.name": "categorical"}


@pytest.mark.parametrize(("data", "message"), [
    ({"method": "bayes", "parameters": {"a": {"values": [1]}}}, "method 'bayes' is not supported"),
    ({"method": "random", "parameters": {"a": {"values": [1]}}}, "needs run_cap (or samples)"),
    ({"method": "grid", "parameters": {"a": {"min": 0.0, "max": 1.0}}}, "a is continuous (use method: random)"),
    ({"method": "grid", "parameters": {"a": {"values": [1, 2], "probabilities": [0.5, 0.5]}}},
     "probabilities are not allowed in grid search"),
    ({"method": "random", "run_cap": 2, "parameters": {"a": {"values": [1, 2], "probabilities": [0.5, 0.6]}}},
     "must sum to 1"),
    ({"method": "random", "run_cap": 2, "parameters": {"a": {"distribution": "beta"}}}, "'q_log_normal'"),
    ({"method": "random", "run_cap": 2, "parameters": {"a": {"distribution": "q_uniform", "max": 3}}},
     "distribution q_uniform needs 'min' and 'max'"),
    ({"method": "grid", "grid": {"a": [1]}, "parameters": {"b": {"values": [1]}}}, "cannot also have grid"),
    ({"grid": {"a": [1]}, "run_cap": 3}, "run_cap belong to a W&B-format sweep: add method"),
    ({"method": "random", "run_cap": 2}, "needs 'parameters'"),
])
def test_invalid_wandb_sweeps(data: dict, message: str) -> None:
    assert message in _error(data)


def test_wandb_sweep_nests_inside_a_union() -> None:
    s = SweepSpec.model_validate({"union": [{"grid": {"a": [1]}}, {"method": "grid", "parameters": {
        "b": {"values": [1, 2]}}}]})
    assert s.param_names() == ["a", "b"]


# ------------------------------------------------------------------------------------- names, filter

def test_env_name_maps_dots_and_refuses_what_cannot_be_exported() -> None:
    assert env_name("model.depth") == "model_depth"
    assert env_name("lr") == "lr"
    with pytest.raises(ConfigError, match="not a valid environment variable name"):
        env_name("a b")
    with pytest.raises(ConfigError, match="HPCJOBS_X"):
        env_name("HPCJOBS.X")
    with pytest.raises(ConfigError, match="both be exported as model_depth"):
        env_names(["model.depth", "model_depth"])
    assert env_names(["a.b", "c"]) == {"a.b": "a_b", "c": "c"}


@pytest.mark.parametrize(("expr", "params", "kept"), [
    ("lr < 0.1 and depth >= 4", {"lr": 0.01, "depth": 4}, True),
    ("lr < 0.1 and depth >= 4", {"lr": 0.1, "depth": 4}, False),
    ("not (opt == 'adam')", {"opt": "sgd"}, True),
    ("2 <= depth < 8", {"depth": 8}, False),
    ("model.depth in [2, 4]", {"model.depth": 4}, True),
    ("opt not in ('sgd', 'adam')", {"opt": "adam"}, False),
    ("lr * batch / 2 >= 1.5 or -lr > 0", {"lr": 0.1, "batch": 32}, True),
    ("momentum == null", {"opt": "adam"}, True),  # a name a point lacks is null
    ("flag == true", {"flag": True}, True),
    ("depth % 2 == 0 and depth // 2 == 3", {"depth": 6}, True),
])
def test_filter_evaluates_by_hand(expr: str, params: dict, kept: bool) -> None:
    assert compile_filter(expr)(params) is kept


@pytest.mark.parametrize("expr", [
    "open('/etc/passwd')", "(1).real", "'a'.upper", "x[0]", "2 ** 1000", "lambda: 1", "[x for x in y]",
    "a if b else c", "f'{a}'", "a := 1", "b'x' == a", "a is None",
])
def test_filter_refuses_everything_outside_the_whitelist(expr: str) -> None:
    with pytest.raises(FilterError):
        compile_filter(expr)


def test_dotted_names_are_parameter_names_not_attribute_access() -> None:
    f = compile_filter("lr.__class__ == null")
    assert f.names == frozenset({"lr.__class__"})
    assert f({"lr": 0.1}) is True  # looked up as the (absent) parameter "lr.__class__", never getattr


def test_filter_names_and_type_errors() -> None:
    f = compile_filter("lr < 0.01 and model.depth > 2")
    assert f.names == frozenset({"lr", "model.depth"})
    with pytest.raises(FilterError, match=r"fails on \{'lr': '1e-3', 'model.depth': 4\}.*write 1.0e-3"):
        f({"lr": "1e-3", "model.depth": 4})
    with pytest.raises(FilterError, match="needs numbers"):
        compile_filter("name * 3 == 'aaa'")({"name": "a"})


def test_parse_sweep_gives_keyed_problems() -> None:
    assert parse_sweep(None) == SweepSpec()
    with pytest.raises(ConfigError) as info:
        parse_sweep({"grid": {"lr": []}, "zip": {"a": [1], "b": [1, 2]}})
    keys = sorted(p.key or "" for p in info.value.problems)
    assert keys == ["sweep.grid.lr", "sweep.zip"]


def test_json_schema_accepts_the_examples_and_both_zip_forms() -> None:
    import jsonschema
    import yaml

    schema = SweepSpec.model_json_schema()
    root = Path(__file__).resolve().parents[2]
    for example in sorted((root / "examples").glob("sweep-*.yaml")):
        jsonschema.validate(yaml.safe_load(example.read_text())["sweep"], schema)
    jsonschema.validate({"zip": {"a": [1], "b": [2]}}, schema)
    jsonschema.validate({"zip": [{"a": [1]}, {"b": [2]}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"gird": {}}, schema)
