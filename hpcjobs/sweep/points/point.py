"""One point of a sweep: its stable id, its canonical JSON, and the environment file that exports it.

A point's id is the first :data:`POINT_ID_LENGTH` hex digits of the SHA-256 of its canonical JSON
(:func:`canonical_json`: sorted keys, compact, floats as ``repr``), so the same parameters give the
same id on any machine. :func:`point_env_lines` is what an array task ``source`` s: one
``export NAME=VALUE`` line per parameter, then the point's id, index and JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hpcjobs.config.sweep import env_names
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.shellvalue import UnencodableValueError, shell_word

Params = dict[str, Any]

#: Length of a point id (hex digits of the SHA-256 of the canonical parameters).
POINT_ID_LENGTH = 12


@dataclass(frozen=True, slots=True)
class Point:
    """One point of an expanded sweep.

    Attributes:
        index: Position in the expanded sweep, 0..N-1 (after duplicates are dropped).
        point_id: Stable id: the first 12 hex digits of the SHA-256 of ``params_json``. Identical
            parameters (names, values and types: ``1`` and ``1.0`` differ) give identical ids.
        params: Parameter name → value, in the order the sweep defines them. Treat as read-only.
        params_json: The canonical JSON of ``params``: sorted keys, no spaces, floats in ``repr``
            form, non-ASCII kept (what the id hashes, what the ledger stores).
        spelled: ``(name, text)`` of float parameters whose source text (``0.00005``) differs from
            ``repr`` (``5e-05``): the job gets the text (:mod:`hpcjobs.sweep.points.values`).
    """

    index: int
    point_id: str
    params: Params
    params_json: str
    spelled: tuple[tuple[str, str], ...] = ()


def canonical_json(params: Mapping[str, Any]) -> str:
    """The canonical JSON text of a point's parameters (sorted keys, compact, floats as ``repr``)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class CanonicalEncoder:
    """:func:`canonical_json` for many points at once, caching the text of keys and of repeated text values.

    Gives exactly ``canonical_json(params)``: ``json`` writes ints with ``int.__repr__`` and finite
    floats with ``float.__repr__``; only text values need real encoding (and are cached).
    """

    def __init__(self) -> None:
        self._enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        self._text: dict[str, str] = {}
        self._plans: dict[tuple[str, ...], list[tuple[str, str]]] = {}

    def __call__(self, params: Mapping[str, Any]) -> str:
        names = tuple(params)
        plan = self._plans.get(names)
        if plan is None:
            ordered = sorted(names)
            plan = self._plans[names] = [(k, ("{" if i == 0 else ",") + self._enc(k) + ":")
                                         for i, k in enumerate(ordered)]
        if not plan:
            return "{}"
        parts = []
        text = self._text
        for k, prefix in plan:
            v = params[k]
            cls = v.__class__
            if cls is str:
                t = text.get(v)
                if t is None:
                    t = text[v] = self._enc(v)
            elif cls is float:
                t = float.__repr__(v)
            elif cls is int:
                t = int.__repr__(v)
            elif cls is bool:
                t = "true" if v else "false"
            elif v is None:
                t = "null"
            else:
                t = self._enc(v)
            parts.append(prefix + t)
        parts.append("}")
        return "".join(parts)


def point_id(params: Mapping[str, Any]) -> str:
    """The stable id of a point with these parameters (see :class:`Point`)."""
    return hashlib.sha256(canonical_json(params).encode("utf-8")).hexdigest()[:POINT_ID_LENGTH]


def env_value(value: Any) -> str:
    """A parameter value as environment text: ``true``/``false``, empty for null, ``repr`` for floats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def point_env_lines(point: Point) -> list[str]:
    """The ``export NAME=VALUE`` lines of a point, each one line of printable ASCII.

    One line per parameter (``NAME`` from :func:`env_name`, ``VALUE`` encoded by
    :func:`hpcjobs.render.shellvalue.shell_word`, so any text, ``$(...)``, backticks, quotes,
    ``#`` and every line-breaking character included, arrives as exactly its UTF-8 bytes), then
    ``HPCJOBS_POINT_ID``, ``HPCJOBS_POINT_INDEX`` and ``HPCJOBS_PARAMS_JSON`` (the canonical
    JSON of all parameters). A line never contains a line break, so callers may join, indent or
    split them freely.

    Raises:
        ConfigError: Parameter names that cannot be exported or that collide, or a value holding
            NUL (refused earlier by :func:`hpcjobs.config.sweep.check_value`; this is the last guard).
    """
    names = env_names(point.params)
    spelled = dict(point.spelled)
    try:
        lines = [f"export {names[k]}={shell_word(spelled.get(k) or env_value(v))}" for k, v in point.params.items()]
        lines.append(f"export HPCJOBS_POINT_ID={shell_word(point.point_id)}")
        lines.append(f"export HPCJOBS_POINT_INDEX={point.index}")
        lines.append(f"export HPCJOBS_PARAMS_JSON={shell_word(point.params_json)}")
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="sweep")) from None
    return lines


def point_env_file_text(point: Point) -> str:
    """The text of a bash file that exports a point's parameters (the array task ``source`` s it).

    A comment line, then :func:`point_env_lines`.

    Raises:
        ConfigError: As :func:`point_env_lines`.
    """
    lines = [f"# hpcjobs sweep point {point.point_id} (index {point.index})", *point_env_lines(point)]
    return "\n".join(lines) + "\n"


def iter_env_files(points: Iterable[Point]) -> Iterable[tuple[Point, str]]:
    """``(point, point_env_file_text(point))`` for each point (a convenience for writers)."""
    for p in points:
        yield p, point_env_file_text(p)
