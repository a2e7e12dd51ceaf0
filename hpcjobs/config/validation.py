"""Turn schema validation failures into :class:`ConfigProblem` s people can act on.

Every problem names the file, line and column, the dotted key, what was
expected and, for unknown keys and closed choices, the valid choices with a
"did you mean" suggestion.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ValidationError

from hpcjobs.config.yamlio import KeyPath, YamlDocument
from hpcjobs.errors import ConfigError, ConfigProblem

M = TypeVar("M", bound=BaseModel)


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated wrappers down to the model, dict or list inside."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else args[0]
        else:
            return annotation


def fields_at(model: type[BaseModel], loc: KeyPath) -> list[str] | None:
    """The field names valid at ``loc`` inside ``model`` (``None`` when ``loc`` is not a model)."""
    current: Any = model
    i = 0
    while i < len(loc):
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(loc[i]))
            if field is None:
                return None
            current = field.annotation
            i += 1
            continue
        origin = typing.get_origin(current)
        if origin in (dict, list, tuple):
            args = typing.get_args(current)
            current = args[-1] if args else Any
            i += 1
            continue
        return None
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return None


def did_you_mean(word: str, choices: list[str]) -> str | None:
    """The closest choice to ``word``, if any is close enough."""
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def _describe(err: dict[str, Any], model: type[BaseModel], doc: YamlDocument, prefix: KeyPath) -> ConfigProblem:
    loc: KeyPath = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    kind = err["type"]
    ctx = err.get("ctx") or {}
    full = (*prefix, *loc)
    if kind == "extra_forbidden":
        key = str(loc[-1])
        valid = fields_at(model, loc[:-1]) or []
        hint = did_you_mean(key, valid)
        msg = f"unknown key {key!r}" + (f"; did you mean {hint!r}?" if hint else "")
        return doc.problem(full, msg, choices=tuple(valid))
    if kind == "missing":
        return doc.problem(full[:-1], f"missing required key {loc[-1]!r}")
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        choices = tuple(c.strip().strip("'") for c in expected.replace(" or ", ",").split(",") if c.strip())
        got = err.get("input")
        hint = did_you_mean(str(got), list(choices))
        msg = f"invalid value {got!r}" + (f"; did you mean {hint!r}?" if hint else "")
        return doc.problem(full, msg, choices=choices)
    if kind == "too_short" and ctx.get("actual_length") == 0:
        n = ctx.get("min_length", 1)
        return doc.problem(full, f"expected at least {n} item{'s' if n != 1 else ''}, got none (an empty "
                                 f"{'mapping' if isinstance(err.get('input'), dict) else 'list'})")
    msg = str(err["msg"])
    for head in ("Value error, ", "Assertion failed, "):
        if msg.startswith(head):
            msg = msg[len(head):]
    got = err.get("input")
    if kind not in ("value_error", "model_type", "dict_type") and not isinstance(got, (dict, list)):
        msg += f" (got {got!r})"
    return doc.problem(full, msg)


def _paths_with_nul(value: Any, path: KeyPath) -> list[KeyPath]:
    """Key paths of every string (key or value) under ``value`` that holds a NUL character (iterative walk)."""
    found: list[KeyPath] = []
    stack: list[tuple[Any, KeyPath]] = [(value, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                found.append(at)
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and "\x00" in key:
                    found.append((*at, key))
                stack.append((item, (*at, key)))
        elif isinstance(node, list):
            stack.extend((item, (*at, i)) for i, item in enumerate(node))
    return sorted(found, key=str)


def validate_document(model: type[M], doc: YamlDocument, data: Any = None, prefix: KeyPath = ()) -> M:
    """Validate ``doc`` (or ``data`` located inside it at ``prefix``) against ``model``.

    Raises:
        ConfigError: With one located problem per validation failure.
    """
    payload = doc.data if data is None else data
    if not isinstance(payload, dict):
        raise ConfigError(doc.problem(prefix, f"expected a mapping of keys to values, got {type(payload).__name__}"))
    nul = [doc.problem(path, "a NUL character cannot be passed to a job or a shell (bash variables and scripts "
                             "cannot hold it)", expected="text without NUL")
           for path in _paths_with_nul(payload, prefix)]
    if nul:
        raise ConfigError(nul)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ConfigError([_describe(dict(e), model, doc, prefix) for e in exc.errors()]) from None
