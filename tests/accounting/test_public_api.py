"""The public names of :mod:`hpcjobs.accounting`, the names the docs use, and the package's import graph.

* every name of ``hpcjobs.accounting.__all__`` resolves, and importing the package alone loads
  neither pandas nor any of its modules (the names load on first use);
* every ``import`` in a Python block of the README and docs, and every dotted
  ``hpcjobs.accounting.…`` name or ``hpcjobs/accounting/…`` path written in the docs, docstrings,
  comments, tests and benchmarks, names something that exists;
* no module of ``hpcjobs/accounting/`` imports, directly or through others, a module that imports it
  (function-level imports included).
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hpcjobs.accounting as acct

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hpcjobs" / "accounting"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [*DOCS, *sorted((ROOT / "hpcjobs").rglob("*.py")), *sorted((ROOT / "hpcjobs").rglob("*.c")),
           *sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")),
           ROOT / "hatch_build.py", ROOT / "pyproject.toml"]


def _resolve(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute reached from the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_public_name_resolves() -> None:
    assert acct.__all__ == sorted(set(acct.__all__))
    for name in acct.__all__:
        value = getattr(acct, name)
        assert value is not None, name
        if callable(value) and hasattr(value, "__module__"):
            # the skipped-record warning lives in the ground layer (the schedulers' parsers use it too)
            assert value.__module__.startswith(("hpcjobs.accounting.", "hpcjobs.skipped")), (name, value.__module__)
    assert "read_sacct_parsable2" in dir(acct)
    with pytest.raises(AttributeError, match="no_such_name"):
        acct.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", ["read_sacct_parsable2", "read_sacct_json", "query_sacct", "read_pbs_accounting",
                                  "read_qstat_json", "read_torque_accounting", "read_torque_qstat_xml",
                                  "read_gpu_samples", "load_report_frame", "efficiency", "waste_summary",
                                  "worst_offenders", "queue_wait", "queue_wait_report", "failures",
                                  "failures_by_state", "failures_by_exit", "report_tables", "sweep_frame",
                                  "failure_params", "jobs_table"])
def test_the_readers_and_reports_are_public(name: str) -> None:
    assert name in acct.__all__


def test_importing_the_package_is_cheap() -> None:
    code = ("import sys, hpcjobs.accounting as a\n"
            "loaded = sorted(m for m in sys.modules if m == 'pandas' or m.startswith('hpcjobs.accounting.'))\n"
            "assert not loaded, loaded\n"
            "a.efficiency\n"
            "assert 'pandas' in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr


_FENCE = re.compile(r"```(?:python|py|pycon)\n(.*?)```", re.S)


def _doc_imports() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for block in _FENCE.findall(doc.read_text(encoding="utf-8")):
            code = "\n".join(line[4:] if line.startswith((">>> ", "... ")) else line for line in block.splitlines())
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    out += [(doc.name, alias.name) for alias in node.names if alias.name.startswith("hpcjobs")]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hpcjobs"):
                    out += [(doc.name, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def test_doc_examples_import_what_exists() -> None:
    imports = _doc_imports()
    assert any(name.startswith("hpcjobs.accounting") for _, name in imports)
    missing = [(doc, name) for doc, name in imports if not _resolve(name)]
    assert not missing


_DOTTED = re.compile(r"\bhpcjobs\.accounting(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_PATH = re.compile(r"\bhpcjobs/accounting/[A-Za-z0-9_/]*\.(?:py|c)\b")


def test_every_accounting_name_and_path_written_down_exists() -> None:
    bad = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8", errors="replace")
        for dotted in set(_DOTTED.findall(text)):
            if dotted.startswith("hpcjobs.accounting.sacct._scan"):
                continue  # the optional compiled scanner (tests/accounting/test_sacct_scan.py), C-level names
            if not _resolve(dotted):
                bad.append((path.relative_to(ROOT).as_posix(), dotted))
        bad += [(path.relative_to(ROOT).as_posix(), p) for p in set(_PATH.findall(text)) if not (ROOT / p).is_file()]
    assert not bad


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target != "hpcjobs.accounting":
                    graph[name].add(target)
    return graph


def test_no_import_circle_in_accounting() -> None:
    graph = _import_graph()
    assert graph["hpcjobs.accounting.reports.sweeps"] >= {"hpcjobs.accounting.reports.rows"}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles
