"""Two rules about ids, each kept in one place.

**What a person types.** A sweep, job or point id given on the command line (``cancel``, ``status``,
``resubmit``, ``results``, ``logs``, ``report --sweep``) is checked by :func:`check_id_argument`: it
must not be empty, blank (whitespace or invisible characters only) or hold control characters
(``''`` would otherwise be a prefix of every id, and ``Path('')`` is the current folder). A prefix
is matched by :func:`match_prefix`: it needs :data:`MIN_PREFIX` characters and must name one id; an
exact id or name may be shorter (the callers try those first).

**What a file says.** A job id, service name or object id read from a ledger, a cache, an index or a
scheduler's output goes into a command's argv only after :func:`check_value` matched it against its
scheduler's grammar (the ``job_id_pattern`` of each backend, :mod:`hpcjobs.schedulers.base`): a value
starting with ``-`` would be taken as an option (a ledger's ``--user=daemon`` made ``scancel
--user=daemon``). Whatever opened the file says so with :func:`values_from`, and the error names it.

Nothing here imports more than :mod:`hpcjobs.errors`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from os import PathLike

from hpcjobs.errors import IdArgumentError, UnsafeValueError

#: Fewest characters of a prefix that may stand for an id.
MIN_PREFIX = 4

#: Characters that show nothing: a text of only these is blank.
_INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})

_SOURCE: ContextVar[str | None] = ContextVar("hpcjobs_value_source", default=None)


# ------------------------------------------------------------------------------ ids a person types


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: empty, or whitespace and invisible (control, format) characters only."""
    return all(c.isspace() or unicodedata.category(c) in _INVISIBLE for c in text)


def check_id_argument(text: object, *, what: str = "sweep", key: str | None = None) -> str:
    """``text`` when it can name a sweep, job or point; else an :class:`~hpcjobs.errors.IdArgumentError`.

    Args:
        text: What was given.
        what: What it names, in words (``sweep``, ``job``, ``point``).
        key: The option or argument it came from (``--sweep``), for the message.

    Raises:
        IdArgumentError: ``text`` is not a string, is empty or blank, or holds control characters.
    """
    hint = f"give the whole id, the exact name, or at least {MIN_PREFIX} characters of the id"
    if not isinstance(text, str):
        raise IdArgumentError(f"a {what} id must be text, not {type(text).__name__} {text!r}", key=key)
    if not text:
        raise IdArgumentError(f"an empty {what} id was given ({text!r}): {hint}", key=key)
    if is_blank(text):
        raise IdArgumentError(f"the {what} id {text!r} is blank (only whitespace or control characters): {hint}",
                              key=key)
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise IdArgumentError(f"the {what} id {text!r} holds control characters: no id does; {hint}", key=key)
    return text


def match_prefix(text: str, candidates: Iterable[str], *, what: str = "sweep", key: str | None = None,
                 where: str = "") -> str | None:
    """The one candidate that starts with ``text``, or ``None`` when none does.

    Call it after the exact matches (id, name), which may be shorter than :data:`MIN_PREFIX`.

    Args:
        text: What was given (checked with :func:`check_id_argument` first).
        candidates: The ids it may stand for.
        what: What they are, in words.
        key: The option or argument it came from.
        where: Where the candidates are (`` in /path``), for the message.

    Raises:
        IdArgumentError: ``text`` is empty or blank; it is shorter than :data:`MIN_PREFIX` yet some
            candidates start with it; or several do (the candidates are listed).
    """
    check_id_argument(text, what=what, key=key)
    hits = sorted({c for c in candidates if c.startswith(text)})
    if not hits:
        return None
    if len(text) < MIN_PREFIX:
        several = f"; it is ambiguous too: {len(hits)} ids start with it" if len(hits) > 1 else ""
        raise IdArgumentError(
            f"{what} {text!r} is not an id or name{where}, and too short for a prefix: a prefix needs at least "
            f"{MIN_PREFIX} characters, {len(text)} given{several}; give the whole id", key=key,
            choices=tuple(hits[:20]))
    if len(hits) > 1:
        raise IdArgumentError(f"ambiguous {what} {text!r}{where}: {len(hits)} ids start with it; give one of the ids",
                              key=key, choices=tuple(hits[:50]))
    return hits[0]


# ------------------------------------------------------------------------------ values from files


@contextmanager
def values_from(source: str | PathLike[str] | None) -> Iterator[None]:
    """Values checked inside the block came from ``source`` (a file, or a command's output), for errors."""
    token = _SOURCE.set(None if source is None else str(source))
    try:
        yield
    finally:
        try:
            _SOURCE.reset(token)
        except ValueError:  # left in another context (a generator resumed elsewhere): nothing to restore
            pass


def value_source() -> str | None:
    """Where the values now checked came from (see :func:`values_from`), when known."""
    return _SOURCE.get()


def is_safe_value(value: object, pattern: re.Pattern[str]) -> bool:
    """Whether ``value`` is a string that fully matches ``pattern``, starts with no ``-`` and holds no
    whitespace or control character (what any grammar must exclude, whatever it says)."""
    return (isinstance(value, str) and bool(value) and not value.startswith("-")
            and not any(c.isspace() or unicodedata.category(c)[0] == "C" for c in value)
            and pattern.fullmatch(value) is not None)


def check_value(value: object, pattern: re.Pattern[str], *, what: str, expected: str,
                source: str | PathLike[str] | None = None) -> str:
    """``value`` when it may go into an argv as one of ``what`` (:func:`is_safe_value`).

    Args:
        value: The value read.
        pattern: Its grammar (matched in full).
        what: What it is (``Slurm job id``).
        expected: The grammar in words, for the message.
        source: Where it was read (default: the :func:`values_from` in effect).

    Raises:
        UnsafeValueError: It does not follow the grammar; the message shows it with ``repr``, and the file.
    """
    if not is_safe_value(value, pattern):
        where = source if source is not None else value_source()
        raise UnsafeValueError(value, what=what, expected=expected, source=None if where is None else str(where))
    return value  # type: ignore[return-value]


def check_values(values: Iterable[object], pattern: re.Pattern[str], *, what: str, expected: str,
                 source: str | PathLike[str] | None = None) -> list[str]:
    """Every one of ``values`` checked with :func:`check_value`, in order."""
    return [check_value(v, pattern, what=what, expected=expected, source=source) for v in values]


__all__ = ["MIN_PREFIX", "check_id_argument", "check_value", "check_values", "is_blank", "is_safe_value",
           "match_prefix", "value_source", "values_from"]
