"""No new scheduler-name switch outside ``hpcjobs/schedulers/``: a ratchet toward none.

What a scheduler can do is asked of its backend (``backend.capabilities``,
:func:`hpcjobs.schedulers.registry.capabilities_of`) and what it needs is the backend's hooks; code
elsewhere that compares a scheduler's name (``scheduler == "slurm"``, ``in ("swarm",
"kubernetes")``, a table keyed by names) is one more place every new backend or cross-cutting
feature (containers, SSH) has to find. The AST scan below counts such switches per module; the table
holds today's count, which may only go down. A module that gains one fails; a module that loses one
fails too, until its count here is lowered, so the table always says how far there is to go.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hpcjobs"
NAMES = frozenset({"slurm", "pbspro", "torque", "pbs", "swarm", "kubernetes", "local"})

#: Module -> scheduler-name switches it still has.
REMAINING: dict[str, int] = {
}


def _names_in(node: ast.AST) -> int:
    """How many scheduler names ``node`` spells as constants (a string, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return int(node.value in NAMES)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return sum(_names_in(e) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return sum(_names_in(a) for a in node.args)
    return 0


def switches(tree: ast.AST) -> int:
    """Comparisons with scheduler names, tables keyed by them, and ``match`` cases on them."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            count += sum(1 for side in (node.left, *node.comparators) if _names_in(side))
        elif isinstance(node, ast.Dict):
            count += int(any(k is not None and _names_in(k) for k in node.keys))
        elif isinstance(node, ast.MatchValue):
            count += int(bool(_names_in(node.value)))
    return count


def _counts() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("hpcjobs/schedulers/"):
            continue
        n = switches(ast.parse(path.read_text(encoding="utf-8"), rel))
        if n:
            out[rel] = n
    return out


def test_no_module_gains_a_scheduler_name_switch() -> None:
    counts = _counts()
    gained = {m: (n, REMAINING.get(m, 0)) for m, n in counts.items() if n > REMAINING.get(m, 0)}
    assert not gained, ("scheduler-name switches added outside hpcjobs/schedulers/ (now, allowed): "
                        f"{gained}; ask the backend (its capabilities or a hook) instead")


def test_the_table_follows_every_switch_removed() -> None:
    counts = _counts()
    lost = {m: (counts.get(m, 0), n) for m, n in REMAINING.items() if counts.get(m, 0) < n}
    assert not lost, f"fewer switches than the table says (now, table): {lost}; lower REMAINING"


def test_the_scan_sees_every_form_of_switch() -> None:
    code = '''
if scheduler == "slurm": pass
if family in ("swarm", "kubernetes"): pass
if x.scheduler not in {"pbspro", "torque"}: pass
VARS = {"slurm": "SLURM_JOB_ID", "pbspro": "PBS_JOBID"}
match s:
    case "local": pass
if name == "slurmd": pass
'''
    assert switches(ast.parse(code)) == 5
