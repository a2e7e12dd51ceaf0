"""The ``filter:`` of a ``sweep:`` section: a small expression language, compiled and evaluated without ``eval``.

:func:`compile_filter` parses the text with :mod:`ast` and accepts only a whitelist (parameter
names, literals, comparisons, ``in``, ``and``/``or``/``not``, number arithmetic); the
:class:`Filter` it returns is called with a point's parameters. :class:`hpcjobs.config.sweep.SweepSpec`
compiles the expression when the experiment is validated; the expansion calls it on each point.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class FilterError(ValueError):
    """A ``filter`` expression is not valid, or cannot be evaluated on a point."""


_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_CMP_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a), ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_ARITH_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_MAX_FILTER_CHARS = 2000
_MAX_FILTER_NODES = 400
_Eval = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Filter:
    """A compiled ``filter`` expression; call it with a point's parameters.

    The language is a whitelist over Python's expression syntax, evaluated without ``eval``:
    parameter names (dotted allowed; a name a point lacks is ``null``), literals (numbers, quoted
    text, ``true``/``false``/``null``, lists ``[a, b]``), comparisons ``== != < <= > >=`` (chains
    such as ``2 <= depth < 8`` work), ``in`` / ``not in``, ``and`` / ``or`` / ``not``, unary ``-``
    and number arithmetic ``+ - * / // %``. Nothing else (no calls, attributes of values,
    subscripts, ``**``) is accepted.

    Attributes:
        text: The expression as written.
        names: The parameter names it reads.
    """

    text: str
    names: frozenset[str]
    evaluate: _Eval

    def __call__(self, params: Mapping[str, Any]) -> bool:
        """True if the point is kept.

        Raises:
            FilterError: The expression cannot be evaluated on these values (``"a" < 1``, division by zero).
        """
        try:
            return bool(self.evaluate(params))
        except FilterError:
            raise
        except (TypeError, ArithmeticError) as exc:
            shown = {n: params.get(n) for n in sorted(self.names)}
            hint = ""
            if any(isinstance(v, str) for v in shown.values()):
                hint = " (note: YAML reads 1e-3 as text; write 1.0e-3 for a number)"
            raise FilterError(f"filter {self.text!r} fails on {shown}: {exc}{hint}") from None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _number(v: Any, what: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FilterError(f"{what} needs numbers, got {v!r}")
    return v


def _compile_node(node: ast.AST, names: set[str]) -> _Eval:
    if isinstance(node, ast.Expression):
        return _compile_node(node.body, names)
    if isinstance(node, ast.Constant):
        value = node.value
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise FilterError(f"unsupported literal {value!r}")
        return lambda p: value
    dotted = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        const = _CONSTANTS[node.id]
        return lambda p: const
    if dotted is not None:
        names.add(dotted)
        return lambda p: p.get(dotted)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_compile_node(e, names) for e in node.elts]
        return lambda p: tuple(f(p) for f in items)
    if isinstance(node, ast.BoolOp):
        parts = [_compile_node(v, names) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda p: all(f(p) for f in parts)
        return lambda p: any(f(p) for f in parts)
    if isinstance(node, ast.UnaryOp):
        inner = _compile_node(node.operand, names)
        if isinstance(node.op, ast.Not):
            return lambda p: not inner(p)
        if isinstance(node.op, ast.USub):
            return lambda p: -_number(inner(p), "unary -")
        if isinstance(node.op, ast.UAdd):
            return lambda p: _number(inner(p), "unary +")
    if isinstance(node, ast.Compare):
        first = _compile_node(node.left, names)
        ops = []
        for op, right in zip(node.ops, node.comparators, strict=True):
            fn = _CMP_OPS.get(type(op))
            if fn is None:
                raise FilterError(f"unsupported comparison {type(op).__name__} (use == != < <= > >= in, not in)")
            ops.append((fn, _compile_node(right, names)))

        def compare(p: Mapping[str, Any]) -> bool:
            left = first(p)
            for fn, right_fn in ops:
                right = right_fn(p)
                if not fn(left, right):
                    return False
                left = right
            return True
        return compare
    if isinstance(node, ast.BinOp):
        fn = _ARITH_OPS.get(type(node.op))
        if fn is None:
            raise FilterError(f"unsupported operator {type(node.op).__name__} (use + - * / // %)")
        a, b = _compile_node(node.left, names), _compile_node(node.right, names)
        sym = type(node.op).__name__
        return lambda p: fn(_number(a(p), sym), _number(b(p), sym))
    raise FilterError(f"unsupported syntax in filter: {type(node).__name__} (only comparisons, and/or/not, "
                      "arithmetic, names and literals are allowed)")


def compile_filter(text: str) -> Filter:
    """Parse a ``filter`` expression into a :class:`Filter` (see there for the language).

    Raises:
        FilterError: Syntax error, or a construct outside the whitelist.
    """
    if len(text) > _MAX_FILTER_CHARS:
        raise FilterError(f"filter is longer than {_MAX_FILTER_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise FilterError(f"filter {text!r} is not a valid expression: {getattr(exc, 'msg', exc)}") from None
    if sum(1 for _ in ast.walk(tree)) > _MAX_FILTER_NODES:
        raise FilterError(f"filter is too complex (more than {_MAX_FILTER_NODES} syntax nodes)")
    names: set[str] = set()
    fn = _compile_node(tree, names)
    return Filter(text, frozenset(names), fn)
