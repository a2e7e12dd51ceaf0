"""YAML loading that remembers where every key came from, with limits on hostile input.

Errors about a configuration must name the file, line and column of the
offending key, so loading keeps a map from key path to position beside the
data. Duplicate keys, which PyYAML silently collapses, are refused.

Configuration files are small and written by hand, so anything far outside that is refused
with the number found and the limit, before it can hang the process or take its memory:
files that are not regular files (a FIFO would block, ``/dev/zero`` never ends), files over
:data:`MAX_FILE_BYTES`, text that is not UTF-8, characters YAML does not allow, nesting deeper
than :data:`MAX_DEPTH`, more than :data:`MAX_ALIASES` aliases or a document that expands to
more than :data:`MAX_NODES` values through them (the "billion laughs" attack, see
https://en.wikipedia.org/wiki/Billion_laughs_attack), and integers longer than
:data:`MAX_INT_DIGITS` digits (Python itself refuses to read integers over 4300 digits, see
https://docs.python.org/3/library/stdtypes.html#int-max-str-digits).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpcjobs.errors import ConfigError, ConfigProblem

KeyPath = tuple[str | int, ...]

#: Largest configuration file read, in bytes (hand-written files are a few kilobytes; PyYAML's
#: pure-Python parser reads about half a megabyte a second).
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Deepest nesting of lists and mappings, counted through aliases.
MAX_DEPTH = 100
#: Most alias uses (``*name``) in one document.
MAX_ALIASES = 10_000
#: Most values (scalars, lists, mappings) a document may expand to, each alias counting its whole node.
MAX_NODES = 1_000_000
#: Most digits in an integer (sign, underscores and a base prefix not counted).
MAX_INT_DIGITS = 100

#: Characters YAML does not allow in a stream (PyYAML's ``Reader.NON_PRINTABLE``, from the YAML 1.1 spec).
_NOT_ALLOWED = yaml.reader.Reader.NON_PRINTABLE


class YamlLimitError(ConfigError):
    """A document over one of the limits above: refused as bad input, never read further."""


class _LimitExceeded(yaml.MarkedYAMLError):
    """Raised inside the loader; :func:`parse_yaml` turns it into a :class:`YamlLimitError`."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's numbers and limits on nesting, aliases and integer length.

    PyYAML reads an unquoted ``12:00:00`` as the integer 43200 (sexagesimal); in a job file
    that is always a wall time, so it stays a string here. And ``1e-3`` is a float, as a
    researcher writing a learning rate means it, not the text YAML 1.1 makes of it.

    The composer is PyYAML's, wrapped: it counts the depth (so the recursion stays far from
    Python's limit), refuses an alias inside the node it names (a cyclic structure), and keeps
    the expanded size and height of every anchored node so that an alias costs what it expands to.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._deepest = 0
        self._nodes = 0
        self._aliases = 0
        self._open_anchors: set[str] = set()
        self._expanded: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (values, height)

    def _count(self, values: int, depth: int, mark: yaml.Mark, via: str | None) -> None:
        self._nodes += values
        self._deepest = max(self._deepest, depth)
        how = f" through alias *{via}" if via else ""
        if self._nodes > MAX_NODES:
            raise _LimitExceeded(
                f"the document expands to at least {self._nodes:,} values{how} "
                f"(limit {MAX_NODES:,}): too many or too deeply repeated aliases", mark)
        if depth > MAX_DEPTH:
            raise _LimitExceeded(f"nesting depth {depth}{how} is over the limit of {MAX_DEPTH} levels", mark)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Compose one node (PyYAML's), counting depth, aliases and expanded size."""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _LimitExceeded(f"{self._aliases:,} alias uses (*name) are over the limit of "
                                     f"{MAX_ALIASES:,}", event.start_mark)
            if event.anchor in self._open_anchors:
                raise _LimitExceeded(f"alias *{event.anchor} is inside the node &{event.anchor} it names: "
                                     "a structure that contains itself cannot be read", event.start_mark)
            node = super().compose_node(parent, index)
            values, height = self._expanded.get(id(node), (1, 1))
            self._count(values, self._depth + height, event.start_mark, event.anchor)
            return node
        anchor = getattr(event, "anchor", None)
        self._depth += 1
        outer_deepest, self._deepest = self._deepest, self._depth
        before = self._nodes
        self._count(1, self._depth, event.start_mark, None)
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            if anchor is not None:
                self._open_anchors.discard(anchor)
            inner_deepest = self._deepest
            self._deepest = max(outer_deepest, inner_deepest)
            self._depth -= 1
        if anchor is not None:
            self._expanded[id(node)] = (self._nodes - before, inner_deepest - self._depth)
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer, refused past :data:`MAX_INT_DIGITS` digits before Python parses it."""
        text = str(node.value).replace("_", "").lstrip("+-")
        if text[:2].lower() in ("0x", "0o", "0b"):
            text = text[2:]
        if len(text) > MAX_INT_DIGITS:
            raise _LimitExceeded(f"an integer with {len(text):,} digits is over the limit of "
                                 f"{MAX_INT_DIGITS} digits (quote it to keep it as text)", node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


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


def _walk(root: yaml.Node, positions: dict[KeyPath, tuple[int, int]], file: str) -> list[ConfigProblem]:
    """Record the position of every key and item, and find duplicate keys.

    Iterative, and each node is walked once: a node reached again through an alias keeps the
    positions of its first appearance (its other uses fall back to the alias's position).
    """
    problems: list[ConfigProblem] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, KeyPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        children: list[tuple[yaml.Node, KeyPath]] = []
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else f"<{key_node.id}>"
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
                children.append((value_node, child))
        else:
            for i, item in enumerate(node.value):
                child = (*path, i)
                positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
                children.append((item, child))
        stack.extend(reversed(children))
    return problems


def _line_and_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` in ``text`` (lines end at ``\\n``)."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _check_characters(text: str, file: str) -> None:
    """Refuse characters YAML does not allow, at their line and column (PyYAML gives only an offset)."""
    bad = _NOT_ALLOWED.search(text)
    if bad is None:
        return
    line, column = _line_and_column(text, bad.start())
    char = bad.group()
    code = ord(char)
    name = "a NUL character" if code == 0 else f"the control character {code:#04x}"
    escape = f"\\x{code:02x}"
    if code > 0xFF:
        name, escape = f"the character U+{code:04X}", f"\\u{code:04x}"
    more = len(_NOT_ALLOWED.findall(text)) - 1
    raise ConfigError(ConfigProblem(
        f"{name} is not allowed in YAML" + (f" ({more} more in the file)" if more else "")
        + f"; if it is meant, write it as the escape \"{escape}\" inside double quotes",
        file=file, line=line, column=column))


def parse_yaml(text: str, file: str = "<string>") -> YamlDocument:
    """Parse one YAML document, keeping key positions.

    Raises:
        YamlLimitError: Nesting, aliases or an integer over the limits above (with file:line:column).
        ConfigError: Syntax error or a character YAML does not allow (with file:line:column), or
            duplicate keys.
    """
    _check_characters(text, file)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument({}, file, {(): (1, 1)})
        # walked before construction, which merges `<<: *base` keys into the mapping node in place
        positions: dict[KeyPath, tuple[int, int]] = {(): (node.start_mark.line + 1, node.start_mark.column + 1)}
        problems = _walk(node, positions, file)
        if problems:
            raise ConfigError(problems)
        data = loader.construct_document(node)
    except _LimitExceeded as exc:
        mark = exc.problem_mark
        raise YamlLimitError(ConfigProblem(
            str(exc.problem), file=file,
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
        )) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context
        if context and exc.context_mark and mark and exc.context_mark.line != mark.line:
            context = f"{context} (line {exc.context_mark.line + 1})"  # e.g. where the unclosed `[` is
        msg = " ".join(str(p) for p in (context, exc.problem) if p)
        raise ConfigError(ConfigProblem(
            f"YAML syntax error: {msg}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        )) from None
    except yaml.YAMLError as exc:
        raise ConfigError(ConfigProblem(f"YAML error: {exc}", file=file)) from None
    except RecursionError:
        # the limits above keep the recursion shallow; this is the last line of defence
        raise YamlLimitError(ConfigProblem(
            f"nested too deeply to read (the limit is {MAX_DEPTH} levels)", file=file)) from None
    finally:
        loader.dispose()
    return YamlDocument(data, file, positions)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def _refuse_unless_regular(st: os.stat_result, file: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(ConfigProblem(f"cannot read it: this is {_file_kind(st.st_mode)}, not a regular file",
                                        file=file, expected="a YAML file"))
    if st.st_size > MAX_FILE_BYTES:
        raise YamlLimitError(ConfigProblem(
            f"the file is {st.st_size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes", file=file))


def _decode(raw: bytes, file: str) -> str:
    """UTF-8 text of ``raw`` (a leading byte-order mark dropped); bad bytes are located by line and column."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line_start = raw.rfind(b"\n", 0, start) + 1
        line = raw.count(b"\n", 0, start) + 1
        column = len(raw[line_start:start].decode("utf-8", errors="replace")) + 1
        hint = " (it looks like UTF-16: save it as UTF-8)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ConfigError(ConfigProblem(
            f"not valid UTF-8: byte {raw[start]:#04x} at byte offset {start}{hint}",
            file=file, line=line, column=column)) from None


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of a configuration file, read safely.

    Only a regular file is opened (a FIFO would block, a device never ends), without blocking
    (in case it is swapped for a FIFO after the check), and at most :data:`MAX_FILE_BYTES` are read.

    Raises:
        ConfigError: Missing, not a regular file, unreadable, not UTF-8; :class:`YamlLimitError`
            when over :data:`MAX_FILE_BYTES`.
    """
    file = os.fspath(path)  # as the user wrote it: `site validate` matches problems to its arguments
    try:
        _refuse_unless_regular(os.stat(path), file)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(ConfigProblem("file not found", file=file)) from None
    except OSError as exc:
        raise ConfigError(ConfigProblem(f"cannot read file: {exc.strerror or exc}", file=file)) from None
    chunks: list[bytes] = []
    try:
        _refuse_unless_regular(os.fstat(fd), file)
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(ConfigProblem(f"cannot read file: {exc.strerror or exc}", file=file)) from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > MAX_FILE_BYTES:
        raise YamlLimitError(ConfigProblem(
            f"the file grew past the limit of {MAX_FILE_BYTES:,} bytes while it was read", file=file))
    return _decode(raw, file)


def read_yaml(path: str | Path) -> YamlDocument:
    """Read (with :func:`read_text_file`) and parse a YAML file.

    Raises:
        ConfigError: The file cannot be read, is not valid YAML, or is over a limit.
    """
    return parse_yaml(read_text_file(path), os.fspath(path))
