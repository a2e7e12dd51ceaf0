"""The Jinja environment: layered template lookup, strictness, and the shell-quoting filters.

Lookup order (first match wins): each directory in ``$HPCJOBS_TEMPLATE_PATH``,
the user's ``~/.config/hpcjobs/templates``, the site-wide
``/etc/hpcjobs/templates``, the templates shipped with hpcjobs, then those each registered
scheduler backend ships in its own folder (:attr:`~hpcjobs.schedulers.base.BaseBackend.template_dir`).
A user's ``slurm.sh.j2`` therefore replaces the shipped one, and any template can
``{% extends %}`` a shipped one by name.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jinja2

from hpcjobs.config.sites import user_config_dir
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


@functools.lru_cache(maxsize=8)
def _environment(extra: tuple[str, ...], env_key: tuple[str | None, ...]) -> jinja2.Environment:
    del env_key  # part of the cache key only: the search path depends on these variables and backends
    dirs = [str(d) for d in template_search_path(extra)]
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(d) for d in dirs])
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
