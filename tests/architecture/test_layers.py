"""The house's layers hold: every import goes down, no module imports itself in a circle, and no
private name crosses a package.

The layers, lowest first (:data:`architecture.imports.LAYERS`): ground (errors, process, units,
states, ids, safe_files, skipped, output, resources, transport.login) → config (every schema;
launch settings) → resolve → schedulers → sites → render → transport (local or SSH) → sweep (with
submit) → accounting → analysis and plan → commands and the CLI. Imports inside functions count: a
function-level import only hides a dependency from the interpreter, not from the reader.

The tables below hold what is still wrong today and may only shrink: a new upward import, circle or
private crossing fails, and so does an entry that no longer exists (lower the table). Regenerate
them with ``PYTHONPATH=tests python tests/architecture/test_layers.py``.
"""

from __future__ import annotations

from pathlib import Path

from architecture.imports import (
    LAYER_NAMES,
    Import,
    _imports_of,
    all_imports,
    cycles,
    layer_of,
    modules,
    private_crossings,
    upward,
)

#: (importer, imported) pairs that still go up a layer.
UPWARD: frozenset[tuple[str, str]] = frozenset()

#: Circles of modules that still import each other (function-level imports included), as sorted tuples.
CYCLES: frozenset[tuple[str, ...]] = frozenset()

#: (importer, module, name) of private names still imported from another package.
PRIVATE: frozenset[tuple[str, str, str]] = frozenset()


def _upward_pairs(imports: list[Import]) -> set[tuple[str, str]]:
    return {(i.importer, i.target) for i in upward(imports)}


def test_every_module_is_in_a_layer() -> None:
    for module in modules():
        layer_of(module)


def test_no_new_import_goes_up_a_layer() -> None:
    imports = all_imports()
    new = sorted(_upward_pairs(imports) - UPWARD)
    where = [f"{i.importer} (line {i.line}, layer {LAYER_NAMES[layer_of(i.importer)]}) imports {i.target} "
             f"(layer {LAYER_NAMES[layer_of(i.target)]})" for i in upward(imports) if (i.importer, i.target) in new]
    assert not new, "imports that go up a layer:\n" + "\n".join(where)


def test_the_upward_table_follows_every_fix() -> None:
    gone = sorted(UPWARD - _upward_pairs(all_imports()))
    assert not gone, f"no longer imported upward, remove from UPWARD: {gone}"


def test_no_new_import_cycle() -> None:
    found = {tuple(sorted(c)) for c in cycles(all_imports())}
    assert found <= CYCLES, f"import cycles not in CYCLES (break them): {sorted(found - CYCLES)}"
    assert found >= CYCLES, f"cycles that are gone or changed, update CYCLES: {sorted(CYCLES - found)}"


def test_no_cycle_at_module_level() -> None:
    # the interpreter's own circle: importing one of these modules first would fail half-initialised
    assert cycles(all_imports(), module_level_only=True) == []


def test_no_new_private_name_crosses_a_package() -> None:
    found = set(private_crossings(all_imports()))
    assert found <= PRIVATE, f"private names imported from another package: {sorted(found - PRIVATE)}"
    assert found >= PRIVATE, f"no longer imported, remove from PRIVATE: {sorted(PRIVATE - found)}"


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\n"
                   "import hpcjobs.errors\n"
                   "from hpcjobs import __version__\n"
                   "from hpcjobs.sweep import ledger\n"
                   "from hpcjobs.accounting.reports.advise import _mode, advise\n"
                   "if TYPE_CHECKING:\n    from hpcjobs.render.script import RenderedScript\n"
                   "def f():\n    from hpcjobs.analysis import load_sweep\n", encoding="utf-8")
    known = {"hpcjobs.sweep.ledger": src}
    got = _imports_of("hpcjobs.config.x", src, known)
    assert [(i.target, i.names, i.in_function, i.type_only) for i in got] == [
        ("hpcjobs.errors", (), False, False),
        ("hpcjobs.__version__", ("__version__",), False, False),
        ("hpcjobs.sweep.ledger", (), False, False),
        ("hpcjobs.accounting.reports.advise", ("_mode", "advise"), False, False),
        ("hpcjobs.render.script", ("RenderedScript",), False, True),
        ("hpcjobs.analysis", ("load_sweep",), True, False),
    ]
    assert {i.target for i in upward(got)} == {"hpcjobs.sweep.ledger", "hpcjobs.accounting.reports.advise",
                                               "hpcjobs.render.script", "hpcjobs.analysis"}
    assert private_crossings(got) == [("hpcjobs.config.x", "hpcjobs.accounting.reports.advise", "_mode")]


def test_the_cycle_finder_finds_a_circle_through_a_function() -> None:
    def imp(a: str, b: str, fn: bool = False) -> Import:
        return Import(a, b, (), 1, fn)
    edges = [imp("hpcjobs.a", "hpcjobs.b"), imp("hpcjobs.b", "hpcjobs.c"), imp("hpcjobs.c", "hpcjobs.a", fn=True),
             imp("hpcjobs.c", "hpcjobs.d")]
    assert cycles(edges) == [frozenset({"hpcjobs.a", "hpcjobs.b", "hpcjobs.c"})]
    assert cycles(edges, module_level_only=True) == []


def _tables() -> str:
    imports = all_imports()
    lines = ["UPWARD = {"] + [f"    {p!r}," for p in sorted(_upward_pairs(imports))] + ["}", "CYCLES = {"]
    lines += [f"    {tuple(sorted(c))!r}," for c in cycles(imports)] + ["}", "PRIVATE = {"]
    lines += [f"    {p!r}," for p in sorted(set(private_crossings(imports)))] + ["}"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(_tables())


def test_the_picture_of_the_house_is_current() -> None:
    from architecture.house import current, picture

    assert current() == picture(), ("docs/architecture.md's picture is stale: "
                                    "run PYTHONPATH=tests python -m architecture.house --write")
