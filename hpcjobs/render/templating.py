"""The Jinja environment: layered template lookup, strictness, and the shell-quoting filters.

Lookup order (first match wins): each directory in ``$HPCJOBS_TEMPLATE_PATH``,
the user's ``~/.config/hpcjobs/templates``, the site-wide
``/etc/hpcjobs/templates``, the templates shipped with hpcjobs, then those each registered
scheduler backend ships in its own folder (:attr:`~hpcjobs.schedulers.base.BaseBackend.template_dir`).
A user's ``slurm.sh.j2`` therefore replaces the shipped one, and any template can
``{% extends %}`` a shipped one by name.

Templates are read as UTF-8: a file that is not is refused naming the file, its line and the byte
offset (:class:`TemplateLoader`). Templates that include, extend or import each other in a cycle are
named, link by link, by :func:`template_cycle` once their rendering recursed without end.
"""

from __future__ import annotations

import functools
import os
import posixpath
from collections.abc import Callable
from pathlib import Path

import jinja2
from jinja2 import nodes

from hpcjobs.config.sites import user_config_dir
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.shellvalue import shell_word, shell_word_path
from hpcjobs.resources import shipped_dir

SYSTEM_TEMPLATE_DIR = Path("/etc/hpcjobs/templates")


def template_search_path(extra: tuple[str, ...] = ()) -> list[Path]:
    """Template directories, first match wins."""
    dirs = [Path(p) for p in extra]
    dirs += [Path(p) for p in os.environ.get("HPCJOBS_TEMPLATE_PATH", "").split(os.pathsep) if p]
    dirs += [user_config_dir() / "templates", SYSTEM_TEMPLATE_DIR, shipped_dir("templates")]
    return dirs + [d for d in _backend_template_dirs() if d not in dirs]


def _backend_template_dirs() -> tuple[Path, ...]:
    """The template folders the registered backends ship, in registration order."""
    from hpcjobs.schedulers.registry import BACKENDS

    return tuple(d for d in (b.template_dir for b in BACKENDS.values()) if d is not None)


def shell_quote(value: object) -> str:
    """Quote ``value`` as one literal bash word (the ``q`` filter).

    ``$``, backticks, quotes, newlines and every other character stay data; the word is
    printable ASCII on one line (see :mod:`hpcjobs.render.shellvalue` for the encoding and
    how bash decodes it).

    Raises:
        ValueError: The value contains NUL (no bash word can hold it).
    """
    return shell_word(value)


def shell_quote_path(value: object) -> str:
    """Quote a path as one bash word, keeping a leading ``~/`` meaning the home directory (``qpath``).

    Raises:
        ValueError: The path contains NUL.
    """
    return shell_word_path(value)


class TemplateLoader(jinja2.FileSystemLoader):
    """Jinja's file loader, with a template that is not UTF-8 or cannot be read refused by name.

    Jinja would raise a bare ``UnicodeDecodeError`` (no file named) or ``OSError``.
    """

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        """The template's text, file name and up-to-date check (see :meth:`jinja2.BaseLoader.get_source`).

        Raises:
            jinja2.TemplateNotFound: No file of that name in this loader's folders.
            ConfigError: The file is not UTF-8 (its line and the offset of the first bad byte are given),
                or cannot be read.
        """
        try:
            return super().get_source(environment, template)
        except jinja2.TemplateNotFound:  # an OSError too: the next folder of the search path is asked
            raise
        except UnicodeDecodeError as exc:
            path = self._file_of(template)
            raise ConfigError(_not_utf8(template, path, exc)) from None
        except OSError as exc:
            raise ConfigError(ConfigProblem(f"template {template!r} cannot be read: {exc.strerror or exc}",
                                            file=self._file_of(template), key="template")) from None

    def _file_of(self, template: str) -> str:
        """The file Jinja read for ``template`` (the first in the search path, as it looks them up)."""
        pieces = jinja2.loaders.split_template_path(template)
        for folder in self.searchpath:
            candidate = posixpath.join(folder, *pieces)
            if os.path.isfile(candidate):
                return os.path.normpath(candidate)
        return template


def _not_utf8(template: str, path: str, exc: UnicodeDecodeError) -> ConfigProblem:
    """The problem of a template file that is not UTF-8: its line and the file offset of the first bad byte.

    The file is decoded again as a whole: the offset in ``exc`` counts from the start of the chunk the
    text reader was decoding, not of the file.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        data.decode("utf-8")
    except UnicodeDecodeError as whole:
        exc = whole
    except OSError:
        data = exc.object if isinstance(exc.object, bytes) else b""
    else:
        data = exc.object if isinstance(exc.object, bytes) else b""
    line = data.count(b"\n", 0, exc.start) + 1
    bad = data[exc.start:exc.end].hex(" ") or "?"
    return ConfigProblem(f"template {template!r} is not UTF-8: byte offset {exc.start:,} holds {bad} ({exc.reason}); "
                         "save the file as UTF-8", file=path, line=line, key="template")


#: The template nodes that pull in another template by name.
_LINKS: tuple[tuple[type[nodes.Node], str], ...] = (
    (nodes.Extends, "extends"), (nodes.Include, "includes"), (nodes.Import, "imports"), (nodes.FromImport, "imports"))


def _linked_names(env: jinja2.Environment, name: str) -> tuple[str | None, list[tuple[str, str, int]]]:
    """The file of template ``name`` and the templates it names: (name, how, line) for each constant name.

    A name computed at render time (``{% include var %}``) is not followed.
    """
    try:
        source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        tree = env.parse(source, name, filename)
    except (jinja2.TemplateError, ConfigError):
        return None, []
    out: list[tuple[str, str, int]] = []
    for node_type, how in _LINKS:
        for node in tree.find_all(node_type):
            target = node.template  # type: ignore[attr-defined]
            names = target.items if isinstance(target, nodes.List | nodes.Tuple) else [target]
            out += [(n.value, how, node.lineno) for n in names
                    if isinstance(n, nodes.Const) and isinstance(n.value, str)]
    return filename, sorted(out, key=lambda link: link[2])


def template_cycle(env: jinja2.Environment, name: str) -> list[tuple[str, str | None, str, int]] | None:
    """A cycle of templates that extend, include or import each other, reached from ``name``.

    Returns:
        The links of the first cycle found, each ``(template, its file, how, line)`` where ``how`` is
        ``extends``, ``includes`` or ``imports`` the next template (the last links back to the first);
        ``None`` when the constant names form no cycle.
    """
    path: list[tuple[str, str | None, str, int]] = []
    on_path: dict[str, int] = {}
    done: set[str] = set()

    def visit(current: str) -> list[tuple[str, str | None, str, int]] | None:
        on_path[current] = len(path)
        filename, links = _linked_names(env, current)
        for target, how, line in links:
            path.append((current, filename, how, line))
            if target in on_path:
                return path[on_path[target]:]
            if target not in done:
                found = visit(target)
                if found is not None:
                    return found
            path.pop()
        del on_path[current]
        done.add(current)
        return None

    return visit(name)


@functools.lru_cache(maxsize=8)
def _environment(extra: tuple[str, ...], env_key: tuple[str | None, ...]) -> jinja2.Environment:
    del env_key  # part of the cache key only: the search path depends on these variables and backends
    dirs = [str(d) for d in template_search_path(extra)]
    loader = jinja2.ChoiceLoader([TemplateLoader(d) for d in dirs])
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        auto_reload=False,  # templates do not change while one command runs
    )
    env.filters["q"] = shell_quote
    env.filters["qpath"] = shell_quote_path
    return env


_ENV_KEYS = ("HPCJOBS_TEMPLATE_PATH", "XDG_CONFIG_HOME", "HOME")


def template_environment(extra_dirs: tuple[str, ...] = ()) -> jinja2.Environment:
    """The Jinja environment for the current search path (cached per path)."""
    env_key = (*map(os.environ.get, _ENV_KEYS), *map(str, _backend_template_dirs()))
    return _environment(tuple(str(d) for d in extra_dirs), env_key)
