"""Random-search distributions with hostile numbers: refused at file:line, or points that are finite and in bounds.

Class: a distribution's numbers that the sampler cannot honour. NaN or infinite bounds (``max: .inf``,
``mu: .nan``) were accepted, drew NaN/inf and ``--json`` printed ``NaN``/``Infinity`` (not JSON); bounds
whose difference or ``exp`` overflows (``-1e308..1e308``, W&B ``log_uniform`` exponents up to 1000,
``log_normal`` ``mu: 1000``) raised ``OverflowError``/``ValueError`` (a crash, exit 3); a tiny or NaN ``q``
overflowed ``round(x / q)``; booleans were read as 0 and 1.

Hypothesis writes experiment files in both syntaxes (the native ``random:`` block and a W&B file, random
and grid), every distribution, bounds drawn from all floats (NaN and infinities included), booleans,
huge and tiny numbers, and runs ``hpcjobs sweep FILE --dry-run --json --site local``. Each run either
exits 2 naming the file and line, or exits 0 with strict JSON (no ``NaN``/``Infinity`` constant) whose
points are all finite numbers inside the distribution's bounds. A boolean or a non-finite number
anywhere is always refused. :func:`hpcjobs.sweep.points.sampling.guarded` (the sampler's last guard) and
:func:`hpcjobs.cli.echo_json` (the one way ``--json`` is printed) are checked directly.
"""

from __future__ import annotations

import ast
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.cli import echo_json, main
from hpcjobs.errors import ConfigError, NotJsonError
from hpcjobs.sweep.points.sampling import guarded

PACKAGE = Path(__file__).resolve().parents[2] / "hpcjobs"

NATIVE_KEYS = {"uniform": ("min", "max"), "log_uniform": ("min", "max"), "int_uniform": ("min", "max"),
               "normal": ("mu", "sigma"), "choice": ("values",)}
WANDB_KINDS = ["constant", "categorical", "int_uniform", "uniform", "q_uniform", "log_uniform", "log_uniform_values",
               "q_log_uniform", "q_log_uniform_values", "inv_log_uniform", "inv_log_uniform_values", "normal",
               "q_normal", "log_normal", "q_log_normal"]
#: Numbers at the edges of what floating point (and ``exp``) can hold.
EDGES = [0, 1, -1, 2, 1e-5, 0.5, 708.0, 709.0, 710.0, -710.0, 1e15, 1e300, 1e308, -1e308, 1.7976931348623157e308,
         1e-300, 1e-320, 5e-324, -5e-324, 2**53, 2**63, 10**20, -(10**20), 10**99]

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-20, max_value=20),
    st.integers(min_value=-1000, max_value=1000),
    st.booleans(),
    st.sampled_from(EDGES),
)
choice_values = st.lists(st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "relu"]), st.booleans()),
                         max_size=3, unique_by=lambda v: (type(v), v))


def _yaml(value: Any) -> str:
    """A number (or choice list) as YAML flow text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def _flow(spec: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in spec.items()) + "}"


@st.composite
def native_files(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """``(sweep section, kind, spec)`` of a native random block with one parameter ``x``."""
    dist = draw(st.sampled_from(sorted(NATIVE_KEYS)))
    spec: dict[str, Any] = {"distribution": dist}
    for key in NATIVE_KEYS[dist]:
        spec[key] = draw(choice_values) if key == "values" else draw(numbers)
    kind = {"log_uniform": "log_uniform_values", "choice": "categorical"}.get(dist, dist)
    text = f"  random:\n    seed: 3\n    samples: 4\n    parameters:\n      x: {_flow(spec)}\n"
    return text, kind, spec


@st.composite
def wandb_files(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """``(sweep section, kind, spec)`` of a W&B file (random or grid) with one parameter ``x``."""
    dist = draw(st.sampled_from([*WANDB_KINDS, None]))
    spec: dict[str, Any] = {} if dist is None else {"distribution": dist}
    if dist == "constant":
        spec["value"] = draw(numbers)
    elif dist == "categorical":
        spec["values"] = draw(choice_values)
    else:
        for key in ("min", "max", "mu", "sigma", "q"):
            if draw(st.booleans()):
                spec[key] = draw(numbers)
    method = draw(st.sampled_from(["random", "grid"]))
    kind = dist or ("int_uniform" if all(type(spec.get(k)) is int for k in ("min", "max")) else "uniform")
    head = "  method: grid\n" if method == "grid" else "  method: random\n  run_cap: 4\n  seed: 5\n"
    return head + f"  parameters:\n    x: {_flow(spec)}\n", kind, spec


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"--json printed {constant}, which is not JSON")
    return json.loads(text, parse_constant=refuse)


def _near(lo: float, hi: float, v: float, slack: float) -> bool:
    """``lo <= v <= hi`` up to ``slack`` and a relative rounding error."""
    tol = slack + 1e-9 * max(abs(lo), abs(hi))
    return lo - tol <= v <= hi + tol


def _in_bounds(kind: str, spec: dict[str, Any], v: Any) -> bool:
    lo, hi = spec.get("min"), spec.get("max")
    q = spec.get("q", 1) if kind.startswith("q_") else 0
    if kind == "constant":
        return v == spec["value"]
    if kind == "categorical":
        return v in spec["values"]
    if kind == "int_uniform":
        return type(v) is int and lo <= v <= hi
    if kind in ("uniform", "q_uniform", "log_uniform_values", "q_log_uniform_values", "inv_log_uniform_values"):
        return _near(lo, hi, v, q)
    if kind in ("log_uniform", "q_log_uniform"):
        return _near(math.exp(lo), math.exp(hi), v, q)
    if kind == "inv_log_uniform":
        return _near(math.exp(-hi), math.exp(-lo), v, 0)
    if kind in ("log_normal", "q_log_normal"):
        return v >= -q
    return True  # normal, q_normal: any finite number


def _hostile_numbers(spec: dict[str, Any]) -> list[Any]:
    """The numbers that must be refused: a boolean as a number, or NaN/inf anywhere (``value: false`` is text-like)."""
    return [v for k, v in spec.items() if (isinstance(v, float) and not math.isfinite(v))
            or (k in ("min", "max", "mu", "sigma", "q") and isinstance(v, bool))]


def _dry_run(folder: Path, sweep_section: str) -> tuple[Path, Result]:
    """``hpcjobs sweep FILE --dry-run --json --site local`` of an experiment with this ``sweep:`` section."""
    path = folder / "exp.yaml"
    path.write_text(f"name: dist\ncommand: echo $x\nsweep:\n{sweep_section}", encoding="utf-8")
    return path, CliRunner().invoke(main, ["sweep", str(path), "--dry-run", "--json", "--site", "local"],
                                    env={"HPCJOBS_SWEEP_ROOT": str(folder / "sweeps")})


def _check(section: str, kind: str, spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, result = _dry_run(Path(tmp), section)
    out = result.output
    assert result.exit_code in (0, 2), f"exit {result.exit_code}:\n{path.name}: {section}\n{out}"
    assert "Traceback" not in out, out
    hostile = _hostile_numbers(spec)
    if result.exit_code == 2:
        assert re.search(re.escape(str(path)) + r":\d+", out), f"no file:line in:\n{out}"
        return
    assert not hostile, f"accepted {hostile!r} in {section}:\n{out}"
    data = _strict_json(result.stdout)
    assert data["points"] == len(data["point_list"])  # 0 for a W&B grid's empty q_uniform range (min == max)
    for point in data["point_list"]:
        v = point["params"]["x"]
        assert not isinstance(v, float) or math.isfinite(v), (section, v)
        assert _in_bounds(kind, spec, v), f"{kind} {spec} drew {v!r}"


@settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(native_files())
def test_native_random_numbers_are_refused_at_their_line_or_drawn_finite_and_in_bounds(
        case: tuple[str, str, dict[str, Any]]) -> None:
    _check(*case)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(wandb_files())
def test_wandb_numbers_are_refused_at_their_line_or_drawn_finite_and_in_bounds(
        case: tuple[str, str, dict[str, Any]]) -> None:
    _check(*case)


@pytest.mark.parametrize(("section", "kind", "spec"), [
    ("  random: {seed: 1, samples: 3, parameters: {x: {distribution: uniform, min: 0, max: .inf}}}\n", "uniform",
     {"min": 0, "max": math.inf}),
    ("  random: {seed: 1, samples: 3, parameters: {x: {distribution: normal, mu: .nan, sigma: 1}}}\n", "normal",
     {"mu": math.nan, "sigma": 1}),
    ("  random: {seed: 1, samples: 3, parameters: {x: {distribution: uniform, min: -1.0e308, max: 1.0e308}}}\n",
     "uniform", {"min": -1e308, "max": 1e308}),
    ("  random: {seed: 1, samples: 3, parameters: {x: {distribution: uniform, min: false, max: true}}}\n", "uniform",
     {"min": False, "max": True}),
    ("  method: random\n  run_cap: 3\n  parameters: {x: {distribution: log_uniform, min: 1, max: 1000}}\n",
     "log_uniform", {"min": 1, "max": 1000}),
    ("  method: random\n  run_cap: 3\n  parameters: {x: {distribution: log_normal, mu: 1000}}\n", "log_normal",
     {"mu": 1000}),
    ("  method: random\n  run_cap: 3\n  parameters: {x: {distribution: q_uniform, min: 0, max: 1, q: 1.0e-300}}\n",
     "q_uniform", {"min": 0, "max": 1, "q": 1e-300}),
    ("  method: random\n  run_cap: 3\n  parameters: {x: {distribution: q_normal, q: .nan}}\n", "q_normal",
     {"q": math.nan}),
])
def test_the_reported_cases_are_refused(tmp_path: Path, section: str, kind: str, spec: dict[str, Any]) -> None:
    path, result = _dry_run(tmp_path, section)
    assert result.exit_code == 2, result.output
    line = 4 if section.startswith("  random") else 6  # the line of the parameter
    assert f"{path}:{line}:" in result.output, result.output


def test_a_sweep_with_no_points_dry_runs_to_nothing(tmp_path: Path) -> None:
    """A filter that drops every point: the local dry run lists nothing (it rendered an array of -1 tasks, exit 3)."""
    _, result = _dry_run(tmp_path, "  grid: {x: [1, 2]}\n  filter: x > 5\n")
    assert result.exit_code == 0, result.output
    assert _strict_json(result.stdout) | {"sweep_id": ""} == {"sweep_id": "", "points": 0, "commands": [],
                                                             "script": None, "point_list": []}


@pytest.mark.parametrize("draw", [lambda rng: math.inf, lambda rng: math.nan, lambda rng: math.exp(1000),
                                  lambda rng: math.log(-1), lambda rng: 1 / 0])
def test_a_draw_that_is_not_a_finite_number_is_an_error_naming_the_parameter(draw: Any) -> None:
    import random

    with pytest.raises(ConfigError) as caught:
        guarded(draw, name="lr", key="sweep.random.parameters.lr")(random.Random(0))
    problem = caught.value.problems[0]
    assert problem.key == "sweep.random.parameters.lr" and "'lr'" in problem.message


def test_json_output_refuses_nan_and_infinity_and_says_where(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(NotJsonError, match=r"point_list\.1\.params\.lr"):
        echo_json({"point_list": [{"params": {"lr": 0.1}}, {"params": {"lr": math.inf}}]})
    with pytest.raises(NotJsonError, match="at its top"):
        echo_json(math.nan)
    assert capsys.readouterr().out == ""
    echo_json({"a": [1.5, None, "x"]}, indent=2)
    assert _strict_json(capsys.readouterr().out) == {"a": [1.5, None, "x"]}


def test_every_json_the_commands_print_goes_through_echo_json() -> None:
    """No command prints ``json.dumps(...)`` itself (it would write NaN/Infinity): they call ``echo_json``."""
    printed = []
    for path in [PACKAGE / "cli.py", *(PACKAGE / "commands").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("echo", "print", "write") and any(
                    isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "dumps"
                    for arg in node.args):
                printed.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not printed, f"print JSON with hpcjobs.cli.echo_json: {printed}"
