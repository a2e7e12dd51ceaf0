"""YAML loading that remembers where every key came from.

Errors about a configuration must name the file, line and column of the
offending key, so loading keeps a map from key path to position beside the
data. Duplicate keys, which PyYAML silently collapses, are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcjobs.errors import ConfigError, ConfigProblem

KeyPath = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's numbers: no base-60 integers, exponent floats without a dot.

    PyYAML reads an unquoted ``12:00:00`` as the integer 43200 (sexagesimal); in a job file
    that is always a wall time, so it stays a string here. And ``1e-3`` is a float, as a
    researcher writing a learning rate means it, not the text YAML 1.1 makes of it.
    """


_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# YAML 1.2 floats without a dot: 1e-3, 5E+4 (YAML 1.1 reads them as text, a classic trap in sweeps)
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
for _first in "+-0123456789":
    _Loader.yaml_implicit_resolvers.setdefault(_first, []).insert(0, ("tag:yaml.org,2002:str", _SEXAGESIMAL))
    _Loader.yaml_implicit_resolvers[_first].insert(0, ("tag:yaml.org,2002:float", _EXPONENT_FLOAT))


@dataclass
class YamlDocument:
    """Parsed YAML plus the position of every mapping key and sequence item.

    Attributes:
        data: The parsed document (plain dicts, lists and scalars).
        file: Where it was read from (for messages).
        positions: Key path → (line, column), both 1-based.
    """

    data: Any
    file: str
    positions: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    overridden: frozenset[KeyPath] = frozenset()

    def position(self, path: KeyPath) -> tuple[int | None, int | None]:
        """Best known position for ``path``: the path itself, else its nearest ancestor."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return self.positions.get((), (None, None))

    def problem(self, path: KeyPath, message: str, **kwargs: Any) -> ConfigProblem:
        """A :class:`ConfigProblem` located at ``path`` in this document (or on ``--set``, if overridden)."""
        key = ".".join(str(p) for p in path) if path else None
        p = tuple(str(x) for x in path)
        if any(p[: len(o)] == tuple(str(x) for x in o) for o in self.overridden):
            return ConfigProblem(message, file="--set", key=key, **kwargs)
        line, col = self.position(path)
        return ConfigProblem(message, file=self.file, line=line, column=col, key=key, **kwargs)


def _walk(node: yaml.Node, path: KeyPath, positions: dict[KeyPath, tuple[int, int]],
          file: str, problems: list[ConfigProblem]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                problems.append(ConfigProblem(
                    f"duplicate key {key!r} (first defined on line {seen[key]})",
                    file=file, line=line, column=key_node.start_mark.column + 1,
                    key=".".join(str(p) for p in (*path, key)),
                ))
            seen[key] = line
            child = (*path, key)
            positions[child] = (line, key_node.start_mark.column + 1)
            _walk(value_node, child, positions, file, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, child, positions, file, problems)


def parse_yaml(text: str, file: str = "<string>") -> YamlDocument:
    """Parse one YAML document, keeping key positions.

    Raises:
        ConfigError: Syntax error (with file:line:column) or duplicate keys.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument({}, file, {(): (1, 1)})
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        msg = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise ConfigError(ConfigProblem(
            f"YAML syntax error: {msg}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        )) from None
    except yaml.YAMLError as exc:
        raise ConfigError(ConfigProblem(f"YAML error: {exc}", file=file)) from None
    finally:
        loader.dispose()
    positions: dict[KeyPath, tuple[int, int]] = {(): (node.start_mark.line + 1, node.start_mark.column + 1)}
    problems: list[ConfigProblem] = []
    _walk(node, (), positions, file, problems)
    if problems:
        raise ConfigError(problems)
    return YamlDocument(data, file, positions)


def read_yaml(path: str | Path) -> YamlDocument:
    """Read and parse a YAML file.

    Raises:
        ConfigError: The file cannot be read, or is not valid YAML.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(ConfigProblem("file not found", file=str(p))) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(ConfigProblem(f"cannot read file: {exc}", file=str(p))) from None
    return parse_yaml(text, str(p))
