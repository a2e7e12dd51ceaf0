"""Loading an experiment file, with ``--set key=value`` overrides from the command line."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import KeyPath, YamlDocument, YamlLimitError, parse_yaml, read_yaml
from hpcjobs.errors import ConfigError, ConfigProblem


def _options(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a JSON-schema node, ``$ref`` followed and ``anyOf`` flattened."""
    if "$ref" in schema:
        return _options(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "anyOf" in schema:
        return [o for alt in schema["anyOf"] for o in _options(alt, defs)]
    return [schema]


@functools.lru_cache(maxsize=1)
def _experiment_schema() -> dict[str, Any]:
    return Experiment.model_json_schema()


def is_text_key(path: KeyPath) -> bool:
    """Whether the experiment schema says the value at ``path`` is text only (or null).

    ``environment.X``, ``params.lr``, ``command``, ``name`` are; ``resources.nodes``, ``modules``
    and unknown keys are not.
    """
    schema = _experiment_schema()
    defs = schema.get("$defs", {})
    nodes = _options(schema, defs)
    for part in path:
        nxt: list[dict[str, Any]] = []
        for node in nodes:
            props = node.get("properties", {})
            if part in props:
                nxt += _options(props[part], defs)
                continue
            patterns = node.get("patternProperties", {})
            matching = [sub for pattern, sub in patterns.items() if re.search(pattern, str(part))]
            extra = node.get("additionalProperties")
            for sub in matching or [*patterns.values(), *([extra] if isinstance(extra, dict) else [])]:
                nxt += _options(sub, defs)
        nodes = nxt
    kinds = [node.get("type") for node in nodes if node.get("type") != "null"]
    return bool(kinds) and all(kind == "string" for kind in kinds)


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """Split ``resources.gpus_per_node=2`` into a key path and a value.

    The value of a text key (:func:`is_text_key`: ``environment.X``, ``params.P``, ``command``...)
    is the text after the first ``=`` exactly as typed (YAML only checks it against its limits),
    so ``a #b`` keeps its ``#b`` and line breaks stay line breaks. Other keys get a YAML-typed
    value (``2``, ``[a, b]``, ``true``).

    Raises:
        ConfigError: No ``=``, or an empty key; a value over the YAML limits (:class:`YamlLimitError`).
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(ConfigProblem(
            f"invalid override {text!r}", file="--set", expected="KEY=VALUE, e.g. resources.gpus_per_node=2"
        ))
    try:
        value = parse_yaml(raw, "--set").data if raw.strip() else ""
    except YamlLimitError as exc:  # a 5000-digit number or an alias bomb is refused, not kept as text
        for problem in exc.problems:
            problem.key, problem.line, problem.column = key, None, None
        raise
    except ConfigError:
        value = raw
    if is_text_key(tuple(key.split("."))):
        return tuple(key.split(".")), raw
    if isinstance(value, (dict, list)) or value is None:
        value = raw if value is None else value
    return tuple(key.split(".")), value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], *,
                    as_text: frozenset[KeyPath] = frozenset()) -> tuple[dict[str, Any], list[KeyPath]]:
    """A copy of ``data`` with each ``KEY=VALUE`` override set; also returns the overridden paths.

    Raises:
        ConfigError: An override would descend into a value that is not a mapping.
    """
    out = copy.deepcopy(data)
    paths: list[KeyPath] = []
    for text in overrides:
        path, value = parse_override(text)
        if path in as_text:
            value = text.partition("=")[2]
        node: Any = out
        for i, part in enumerate(path[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                where = ".".join(str(p) for p in path[: i + 1])
                raise ConfigError(ConfigProblem(f"{where!r} is not a mapping", file="--set", key=text))
            node = nxt
        node[path[-1]] = value
        paths.append(path)
    return out, paths


def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> tuple[Experiment, YamlDocument]:
    """Read, override and validate an experiment file.

    Returns:
        The validated experiment and the parsed document (for locating later errors).

    Raises:
        ConfigError: Bad YAML, unknown keys, wrong types, bad overrides (all problems at once).
    """
    doc = read_yaml(path)
    if not isinstance(doc.data, dict):
        raise ConfigError(doc.problem((), "an experiment file must be a mapping of keys to values"))
    data, overridden = apply_overrides(doc.data, overrides)
    try:
        try:
            experiment = validate_document(Experiment, doc, data)
        except ConfigError as first:
            # `--set command=true` means the text "true" where the schema wants text: retry those as text
            texty = frozenset(p for p in overridden if any(
                prob.key == ".".join(map(str, p)) and prob.message.startswith("Input should be a valid string")
                for prob in first.problems))
            if not texty:
                raise
            data, overridden = apply_overrides(doc.data, overrides, as_text=texty)
            experiment = validate_document(Experiment, doc, data)
    except ConfigError as exc:
        for problem in exc.problems:
            key = tuple((problem.key or "").split("."))
            if any(key[: len(p)] == tuple(str(x) for x in p) for p in overridden):
                problem.file, problem.line, problem.column = "--set", None, None
        raise ConfigError(exc.problems) from None
    return experiment, YamlDocument(data, doc.file, doc.positions, frozenset(overridden))
