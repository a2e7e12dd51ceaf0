"""Hostile or corrupt report input: located exit-2 errors instead of crashes.

What ``hpcjobs report`` is given can be anything: a saved ``sacct`` text with a 30-digit number, a
JSON file nested 100,000 deep, ``--since 99999999d``, ``--tz Mars/Olympus``. Each becomes a
:class:`~hpcjobs.errors.ConfigError` (exit 2) that names the file, line, column and field, or the
option and its limit.

Numbers that do not fit (beyond 64 bits, or times and durations beyond the roughly 290 years that
nanosecond timestamps hold) are refused rather than read as missing: no sacct or PBS version
writes such a value, so the file is damaged or forged and a report on it would be silently wrong.
The offending field is found by reading the failing part again in smaller pieces (lines, then
fields), which costs nothing for files that read well.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pandas as pd
import pyarrow as pa

from hpcjobs.errors import ConfigError, ConfigProblem

#: Exceptions the readers raise on a value out of range (too many digits, out of timestamp range).
READ_ERRORS: tuple[type[Exception], ...] = (
    pa.ArrowInvalid, OverflowError, pd.errors.OutOfBoundsDatetime, pd.errors.OutOfBoundsTimedelta)
#: How far back ``--since``/``--until`` may reach, and how far ahead.
MAX_WINDOW = timedelta(days=36525)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ZONE_HINT = "spell it as an IANA time zone name, e.g. Europe/Paris, America/New_York, Asia/Tokyo or UTC"


def check_window(when: datetime, option: str, *, now: datetime | None = None) -> datetime:
    """Refuse a report time before 1970 or more than 100 years from now.

    Raises:
        ConfigError: Outside the window (the message gives the limit).
    """
    now = now or datetime.now(timezone.utc)
    if when < _EPOCH or when < now - MAX_WINDOW:
        raise ConfigError(ConfigProblem(
            f"{when.isoformat()} is too far back: reports reach at most 100 years back and not before 1970-01-01",
            key=option))
    if when > now + MAX_WINDOW:
        raise ConfigError(ConfigProblem(f"{when.isoformat()} is more than 100 years from now", key=option))
    return when


def check_tz(tz: str | None) -> str | None:
    """Refuse a ``--tz`` that is not a known time zone name.

    Raises:
        ConfigError: Unknown zone (the message says how to spell one).
    """
    if tz is None:
        return None
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(tz)
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError; bad paths are ValueError
        raise ConfigError(ConfigProblem(f"unknown time zone {tz!r}; {_ZONE_HINT}", key="--tz")) from None
    return tz


def load_json(text: str, file: str) -> Any:
    """``json.loads`` with its failures as located exit-2 errors.

    Raises:
        ConfigError: Not JSON, or nested deeper than Python's parser goes (no scheduler nests
            more than a few levels).
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(ConfigProblem(
            "JSON nested far deeper than sacct --json or qstat -F json output ever is (they nest about ten "
            "levels); the file is not scheduler output", file=file)) from None
    except ValueError as exc:
        line, col = (exc.lineno, exc.colno) if isinstance(exc, json.JSONDecodeError) else (None, None)
        raise ConfigError(ConfigProblem(f"file looks like JSON but is not valid: {exc}", file=file, line=line,
                                        column=col)) from None


def _fails(read: Callable[[], Any]) -> bool:
    """Whether a trial read fails (in any way: a trial that breaks the input otherwise is no answer either)."""
    try:
        read()
    except Exception:  # a probe: any failure counts
        return True
    return False


def _first_failing(n: int, fails: Callable[[int], bool]) -> int | None:
    """The smallest ``k`` in 1..n with ``fails(k)`` (``fails`` monotone in ``k``), else ``None``."""
    if n == 0 or not fails(n):
        return None
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _out_of_range(value: str, exc: Exception) -> str:
    return (f"{value[:60]!r}{'…' if len(value) > 60 else ''} is out of range: numbers must fit in 64 bits, times "
            f"and durations within about 290 years ({type(exc).__name__}: {str(exc)[:160]})")


def locate_sacct_text_error(text: str, fields: list[str], file: str, exc: Exception,
                            read: Callable[[str], Any]) -> ConfigError | None:
    """The line and field of sacct text that ``read`` (text → frame) failed on, as an exit-2 error.

    Args:
        text: The whole text (a header line, when there is one, is kept in the line count).
        fields: Its field names.
        file: The file, for the message.
        exc: What the whole read raised.
        read: Reads text of these fields (no header) into a frame.

    Returns:
        The error, or ``None`` when no single line and field explain the failure.
    """
    lines = text.splitlines()
    offset = 1 if lines and lines[0].split("|")[0].strip().lower() == fields[0].lower() else 0
    body = lines[offset:]
    k = _first_failing(len(body), lambda k: _fails(lambda: read("\n".join(body[:k]) + "\n")))
    if k is None:
        return None
    parts = body[k - 1].split("|")
    for i, value in enumerate(parts):
        if not value or i >= len(fields):
            continue
        blanked = "|".join([*parts[:i], "", *parts[i + 1:]])
        if not _fails(lambda b=blanked: read(b + "\n")):  # type: ignore[misc]
            column = sum(len(p) + 1 for p in parts[:i]) + 1
            return ConfigError(ConfigProblem(_out_of_range(value, exc), file=file, line=offset + k, column=column,
                                             key=fields[i]))
    return None


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


def _set(node: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def locate_json_error(doc: dict[str, Any], text: str, file: str, exc: Exception,
                      read: Callable[[dict[str, Any]], Any], list_key: str = "jobs") -> ConfigError | None:
    """The job and number of a JSON accounting document that ``read`` failed on, as an exit-2 error.

    Args:
        doc: The parsed document, with a list of jobs under ``list_key``.
        text: Its text (to give the line and column of the number).
        file: The file, for the message.
        exc: What the whole read raised.
        read: Reads a document of the same shape into a frame.
        list_key: Where the jobs are.

    Returns:
        The error (field as a path such as ``jobs[3].time.elapsed``), or ``None`` when no single
        number explains the failure.
    """
    jobs = doc.get(list_key)
    if not isinstance(jobs, list):
        return None
    k = _first_failing(len(jobs), lambda k: _fails(lambda: read({**doc, list_key: jobs[:k]})))
    if k is None:
        return None
    job = jobs[k - 1]
    for path, value in _leaves(job):
        trial = copy.deepcopy(job)
        _set(trial, path, None)
        if not _fails(lambda t=trial: read({**doc, list_key: [t]})):  # type: ignore[misc]
            key = f"{list_key}[{k - 1}]" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
            line = column = None
            name = next((p for p in reversed(path) if isinstance(p, str)), None)
            pattern = (rf'"{re.escape(name)}"\s*:\s*' if name is not None and path[-1] == name else r"") + \
                rf"(?<![\d.]){re.escape(json.dumps(value))}(?![\d.eE])"
            m = re.search(pattern, text)
            if m:
                start = m.end() - len(json.dumps(value))
                line = text.count("\n", 0, start) + 1
                column = start - (text.rfind("\n", 0, start) + 1) + 1
            return ConfigError(ConfigProblem(_out_of_range(json.dumps(value), exc), file=file, line=line,
                                             column=column, key=key))
    return None
