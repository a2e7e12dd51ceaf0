"""A YAML boolean where a schema wants a number is refused, never read as 1 or 0.

Class: pydantic's lax ``int`` and ``float`` accept ``True``/``False`` as 1/0, so ``pack: {per_node: true}``
packed one point per task, ``resources: {nodes: yes}`` asked for one node and a distribution's
``min: false, max: true`` drew from 0..1. :class:`hpcjobs.config.types.StrictModel` refuses a boolean in
every field :func:`hpcjobs.config.types.number_shape` calls a number (or a list or mapping of them).

The table is generated: every field of every config model whose type names ``int`` or ``float`` and
no ``bool`` (found by walking the annotations here, not by the code under test), each given ``true``
and ``false`` (as the value, or inside its list or mapping): each is refused (the parsed types
``Memory`` and ``Walltime`` with their own message); plus whole files through the command line (an
experiment's ``pack:`` and ``resources:``, a site's partition).
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, ValidationError

from hpcjobs.cli import main
from hpcjobs.config.types import StrictModel, number_shape

SCHEMA_PACKAGES = ("hpcjobs.config", "hpcjobs.launch")


def _import_schemas() -> None:
    for name in SCHEMA_PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(info.name)


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _leaves(annotation: Any) -> set[Any]:
    """Every type an annotation names, through unions, ``Annotated`` and containers."""
    args = typing.get_args(annotation)
    if not args:
        return {annotation}
    return set().union(*(_leaves(a) for a in args if not isinstance(a, (str, int, float, bool)) or a is Ellipsis))


def _number_fields() -> list[tuple[type[BaseModel], str, Any]]:
    """Every field whose type names ``int`` or ``float`` and no ``bool``/``Any`` (the table), with its shape."""
    _import_schemas()
    models = sorted({m for m in _subclasses(StrictModel) if m.__module__.startswith("hpcjobs.")},
                    key=lambda m: (m.__module__, m.__qualname__))
    out = []
    for model in models:
        for name, info in model.model_fields.items():
            leaves = _leaves(info.annotation)
            if leaves & {int, float} and not leaves & {bool, Any, object}:
                out.append((model, name, number_shape(info.annotation) or "number"))
    return out


NUMBER_FIELDS = _number_fields()
FIELD_IDS = [f"{m.__name__}.{n}" for m, n, _ in NUMBER_FIELDS]


def _holding(shape: Any, flag: bool | int) -> Any:
    """A value of ``shape`` (a number, or a list/mapping of them) whose innermost number is ``flag``."""
    if shape == "number":
        return flag
    kind, inner = shape
    return [_holding(inner, flag)] if kind == "list" else {"k": _holding(inner, flag)}


def test_the_table_holds_the_known_number_fields() -> None:
    found = {f"{m.__name__}.{name}" for m, name, _ in NUMBER_FIELDS}
    assert {"Pack.per_node", "Pack.sequential", "Resources.nodes", "Resources.cpus_per_task", "Partition.cpus_per_node",
            "Partition.max_walltime", "RandomParam.min", "RandomParam.sigma", "WandbParam.q",
            "WandbParam.probabilities", "RandomSweep.samples", "ResultSource.max_bytes"} <= found, sorted(found)
    assert len(found) >= 50


def test_every_config_model_is_a_strict_model() -> None:
    """A model outside :class:`StrictModel` would read ``true`` as 1 again (and accept unknown keys)."""
    _import_schemas()
    loose = [f"{m.__module__}.{m.__qualname__}" for m in _subclasses(BaseModel)
             if m.__module__.startswith(tuple(SCHEMA_PACKAGES)) and not issubclass(m, StrictModel)]
    assert not loose, loose


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize(("model", "field", "shape"), NUMBER_FIELDS, ids=FIELD_IDS)
def test_a_boolean_in_a_number_field_is_refused(model: type[BaseModel], field: str, shape: Any, flag: bool) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({field: _holding(shape, flag)})
    mine = [e for e in caught.value.errors() if e["loc"][:1] == (field,)]
    assert mine, caught.value.errors()
    if number_shape(model.model_fields[field].annotation) is not None:  # not a parsed type (Memory, Walltime)
        assert f"expected a number, got the boolean {str(flag).lower()}" in mine[0]["msg"], mine[0]["msg"]


@pytest.mark.parametrize(("model", "field", "shape"), NUMBER_FIELDS, ids=FIELD_IDS)
def test_a_number_is_not_taken_for_a_boolean(model: type[BaseModel], field: str, shape: Any) -> None:
    try:
        model.model_validate({field: _holding(shape, 1)})
    except ValidationError as exc:
        assert not [e for e in exc.errors() if "boolean" in str(e["msg"])], exc.errors()


@pytest.mark.parametrize(("section", "line", "key"), [
    ("pack: {per_node: true}\n", 4, "pack.per_node"),
    ("pack: {sequential: yes}\n", 4, "pack.sequential"),
    ("resources: {nodes: true, cpus_per_task: 1}\n", 4, "resources.nodes"),
    ("resources:\n  cpus_per_task: on\n", 5, "resources.cpus_per_task"),
])
def test_an_experiment_with_a_boolean_for_a_number_exits_2_at_its_line(tmp_path: Path, section: str, line: int,
                                                                       key: str) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: b\ncommand: echo $x\nsweep: {{grid: {{x: [1, 2]}}}}\n{section}", encoding="utf-8")
    result = CliRunner().invoke(main, ["sweep", str(path), "--dry-run", "--site", "local"],
                                env={"HPCJOBS_SWEEP_ROOT": str(tmp_path / "sweeps")})
    assert result.exit_code == 2, result.output
    assert f"{path}:{line}:" in result.output and key in result.output, result.output
    assert "expected a number" in result.output


def test_a_site_with_a_boolean_for_a_number_exits_2_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("name: boolsite\nscheduler: slurm\npartitions:\n  cpu:\n    cpus_per_node: true\n"
                    "    max_walltime: 1h\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["site", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:5:" in result.output and "partitions.cpu.cpus_per_node" in result.output, result.output
