"""The import graph of the ``hpcjobs`` package, read from the source with :mod:`ast` (nothing is imported).

Every ``import``/``from ... import`` counts, at module level or inside a function (a function-level
import is still a dependency; it only hides a cycle from the interpreter). Shared by the layer test
and by ``scripts/house_picture.py``, which draws the packages and their arrows.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hpcjobs"

#: The layers, lowest first: a module may import its own layer and those below, never one above.
#: The first matching prefix decides (longest prefixes are listed first where they overlap).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("hpcjobs.__version__", "hpcjobs.errors", "hpcjobs.process", "hpcjobs.units", "hpcjobs.states",
                "hpcjobs.ids", "hpcjobs.safe_files", "hpcjobs.skipped", "hpcjobs.output", "hpcjobs.resources",
                "hpcjobs.transport.login")),
    ("config", ("hpcjobs.config", "hpcjobs.launch")),
    ("resolve", ("hpcjobs.resolve",)),
    ("schedulers", ("hpcjobs.schedulers",)),
    ("sites", ("hpcjobs.sites",)),
    ("render", ("hpcjobs.render", "hpcjobs.containers")),
    ("transport", ("hpcjobs.transport",)),
    ("sweep", ("hpcjobs.sweep", "hpcjobs.submit")),
    ("accounting", ("hpcjobs.accounting",)),
    ("analysis", ("hpcjobs.analysis", "hpcjobs.plan")),
    ("commands", ("hpcjobs.commands", "hpcjobs.cli", "hpcjobs.__main__", "hpcjobs")),
)
LAYER_NAMES = tuple(name for name, _ in LAYERS)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module`` (``hpcjobs`` itself, the lazy public facade, is on top)."""
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != "hpcjobs"):
            return i
    if module == "hpcjobs":
        return len(LAYERS) - 1
    raise KeyError(f"{module} is in no layer: add it to LAYERS")


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``importer`` needs ``target`` (a module of the package)."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int
    in_function: bool
    #: Under ``if TYPE_CHECKING:``: a dependency of the types only, never run.
    type_only: bool = False


def modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    in_function: set[int] = set()
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = []
    for node in ast.walk(tree):
        inner = id(node) in in_function
        typing = id(node) in type_only
        if isinstance(node, ast.Import):
            out += [Import(module, a.name, (), node.lineno, inner, typing) for a in node.names
                    if a.name == "hpcjobs" or a.name.startswith("hpcjobs.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None and (
                node.module == "hpcjobs" or node.module.startswith("hpcjobs.")):
            plain = []
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in known:  # ``from hpcjobs.sweep import ledger``: the submodule is the target
                    out.append(Import(module, sub, (), node.lineno, inner, typing))
                elif node.module == "hpcjobs" and a.name == "__version__":
                    out.append(Import(module, "hpcjobs.__version__", (a.name,), node.lineno, inner, typing))
                else:
                    plain.append(a.name)
            if plain:
                out.append(Import(module, node.module, tuple(plain), node.lineno, inner, typing))
    return out


def all_imports() -> list[Import]:
    """Every import of a package module by a package module (read once per process)."""
    return list(_all_imports())


@functools.cache
def _all_imports() -> tuple[Import, ...]:
    known = modules()
    return tuple(imp for m, p in known.items() for imp in _imports_of(m, p, known))


def upward(imports: list[Import]) -> list[Import]:
    """The imports that reach a higher layer than the importer's."""
    return [i for i in imports if layer_of(i.target) > layer_of(i.importer)]


def private_crossings(imports: list[Import]) -> list[tuple[str, str, str]]:
    """``(importer, module, name)`` for each private name (``_x``) imported from another package."""
    def package(m: str) -> str:
        return ".".join(m.split(".")[:2])
    return [(i.importer, i.target, n) for i in imports for n in i.names
            if n.startswith("_") and not n.startswith("__") and package(i.importer) != package(i.target)]


def cycles(imports: list[Import], *, module_level_only: bool = False) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), largest first.

    Imports under ``if TYPE_CHECKING:`` are not edges (they never run; the layer check still sees
    them). With ``module_level_only``, neither are imports inside functions.
    """
    graph: dict[str, set[str]] = {}
    for i in imports:
        if i.type_only or (module_level_only and i.in_function):
            continue
        if i.target == i.importer or i.target == "hpcjobs.__version__":
            continue
        graph.setdefault(i.importer, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:  # iterative would be longer; the graph is a few hundred modules
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(found, key=len, reverse=True)


def package_of(module: str) -> str:
    """The part of the house a module belongs to: ``hpcjobs.sweep``, ``hpcjobs.schedulers``, ``ground``..."""
    if layer_of(module) == 0:
        return "ground"
    return ".".join(module.split(".")[:2])


def package_arrows(imports: list[Import]) -> dict[tuple[str, str], int]:
    """``(from package, to package) -> imports`` between different packages of the house."""
    out: dict[tuple[str, str], int] = {}
    for i in imports:
        a, b = package_of(i.importer), package_of(i.target)
        if a != b:
            out[(a, b)] = out.get((a, b), 0) + 1
    return out
