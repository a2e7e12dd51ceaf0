"""Reading what each point of a sweep produced: metrics as typed columns, with an incremental cache.

The sources come from the experiment's ``results:`` key (:mod:`hpcjobs.config.results`), saved in
the sweep folder as ``results-spec.json`` when the sweep is submitted, so a later change of the
experiment file does not change how an existing sweep is read. Every point is read on its own: a
missing, malformed or oversized file gives nulls and a message in ``result_error`` for that point,
never an exception for the whole sweep.

Reading is incremental: ``results-cache.json`` in the sweep folder (written atomically) holds each
point's values with the modification time, size and inode of the file they came from; a file whose
``stat`` has not changed is not opened again. The cache is dropped when the declaration changes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hpcjobs.config.results import ResultSource, read_results_spec
from hpcjobs.errors import ConfigError, ConfigProblem, UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.sweep.logs import LOG_ERR, LOG_OUT, POINTS_DIR, BoundedReadError, read_bounded

log = logging.getLogger("hpcjobs.sweep")

RESULTS_CACHE_FILE = "results-cache.json"
_CACHE_VERSION = 1


class ResultReadError(Exception):
    """A results file that was read and could not be parsed (its text is the point's error)."""


_INT_RE = re.compile(r"^[+-]?\d+$")

Scalar = bool | int | float | str | None


# ----------------------------------------------------------------------------- reading one source


def parse_scalar(text: str) -> Scalar:
    """A text value (CSV cell, regex group) as a number or boolean where it is one; empty and NaN are null."""
    t = text.strip()
    if not t:
        return None
    if _INT_RE.match(t):
        return int(t)
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        value = float(t)
    except ValueError:
        return text
    return None if math.isnan(value) else value


def _json_scalar(value: Any) -> Scalar:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value if isinstance(value, bool | int | float | str) or value is None else None


#: Most levels of nested objects a metrics file may have (``{"val": {"acc": 1}}`` has two).
MAX_METRIC_DEPTH = 64
#: Most metrics one file may give (a larger one is refused: its table would be unusable and slow).
MAX_METRICS = 10_000


def flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Scalar]:
    """Scalars of a JSON object; nested objects give dotted names (``{"val": {"acc": 1}}``: ``val.acc``); no lists.

    Raises:
        ResultReadError: Nested deeper than :data:`MAX_METRIC_DEPTH`, or more than :data:`MAX_METRICS` metrics.
    """
    out: dict[str, Scalar] = {}
    stack: list[tuple[Iterator[tuple[str, Any]], str]] = [(iter(obj.items()), prefix)]  # in the file's order
    while stack:
        items, at = stack[-1]
        for key, value in items:
            name = f"{at}{key}"
            if isinstance(value, Mapping):
                if len(stack) >= MAX_METRIC_DEPTH:
                    raise ResultReadError(f"nested deeper than {MAX_METRIC_DEPTH} levels")
                stack.append((iter(value.items()), f"{name}."))
                break
            if not isinstance(value, list):
                out[name] = _json_scalar(value)
                if len(out) > MAX_METRICS:
                    raise ResultReadError(f"more than {MAX_METRICS:,} metrics")
        else:
            stack.pop()
    return out


def _flat(obj: Mapping[str, Any], label: str) -> dict[str, Scalar]:
    try:
        return flatten(obj)
    except ResultReadError as exc:
        raise ResultReadError(f"{label}: {exc}") from None


def _rows(data: bytes, fmt: str, label: str) -> list[dict[str, Scalar]] | dict[str, Scalar]:
    """Rows of a per-step file, or the metrics of a JSON object."""
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise ResultReadError(f"{label}: not valid JSON ({exc})") from None
        except RecursionError:
            raise ResultReadError(f"{label}: JSON nested too deeply to read") from None
        if isinstance(obj, dict):
            return _flat(obj, label)
        if isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
            return [_flat(r, label) for r in obj]
        raise ResultReadError(f"{label}: expected a JSON object or a list of objects, got {type(obj).__name__}")
    if fmt == "jsonl":
        lines = text.splitlines()
        rows = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except RecursionError:
                raise ResultReadError(f"{label}:{n}: JSON nested too deeply to read") from None
            except ValueError as exc:
                if n == len(lines) and not text.endswith("\n"):
                    break  # a line still being written
                raise ResultReadError(f"{label}:{n}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ResultReadError(f"{label}:{n}: expected a JSON object per line")
            rows.append(_flat(obj, f"{label}:{n}"))
        return rows
    try:
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",")
        if len(reader.fieldnames or ()) > MAX_METRICS:
            raise ResultReadError(f"{label}: more than {MAX_METRICS:,} columns")
        return [{str(k): parse_scalar(v) if isinstance(v, str) else None for k, v in row.items() if k is not None}
                for row in reader]
    except csv.Error as exc:
        raise ResultReadError(f"{label}: not valid CSV ({exc})") from None


def reduce_rows(rows: list[dict[str, Scalar]], how: str | None, label: str) -> dict[str, Scalar]:
    """The row that gives a per-step file's metrics: ``last`` (default), ``first``, ``min:COL``, ``max:COL``."""
    if not rows:
        raise ResultReadError(f"{label}: no rows")
    how = how or "last"
    if how == "last":
        return rows[-1]
    if how == "first":
        return rows[0]
    op, column = how.split(":", 1)
    scored = [(float(r[column]), i) for i, r in enumerate(rows)  # type: ignore[arg-type]
              if isinstance(r.get(column), int | float) and not isinstance(r.get(column), bool)]
    if not scored:
        raise ResultReadError(f"{label}: no row has a number in column {column!r}")
    best = min(scored) if op == "min" else max(scored, key=lambda s: (s[0], -s[1]))
    return rows[best[1]]


def read_source(source: ResultSource, run_dir: Path, *, inside: Path | None = None) -> dict[str, Scalar]:
    """The metrics one source gives for one point (names with the source's prefix).

    ``inside``: the folder the file must stay in (default the run folder's sweep folder): a
    ``metrics.json`` that links out of it is refused, not read.

    Raises:
        FileNotFoundError: The file (or stdout log) does not exist.
        ResultReadError: It cannot be read or parsed.
        OSError: It cannot be opened.
    """
    if source.stdout_regex is not None:
        data = read_bounded(run_dir / LOG_OUT, source.max_bytes, tail=True, inside=inside or run_dir.parent.parent)
        last = None
        for last in re.finditer(source.stdout_regex, data.decode("utf-8", errors="replace")):  # noqa: B007
            pass
        if last is None:
            raise ResultReadError(f"stdout: no match of {source.stdout_regex!r}")
        values = {k: None if v is None else parse_scalar(v) for k, v in last.groupdict().items()}
    else:
        assert source.file is not None and source.file_format is not None
        raw = read_bounded(run_dir / source.file, source.max_bytes, inside=inside or run_dir.parent.parent)
        parsed = _rows(raw, source.file_format, source.file)
        values = parsed if isinstance(parsed, dict) else reduce_rows(parsed, source.reduce, source.file)
    return {f"{source.prefix}{k}": v for k, v in values.items()}


def _spec_key(sources: Sequence[ResultSource]) -> str:
    text = json.dumps([s.model_dump() for s in sources], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stat_key(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _source_path(source: ResultSource, run_dir: str) -> str:
    return f"{run_dir}/{source.file if source.file is not None else LOG_OUT}"  # str, not Path: 10,000s per read


def _read_entry(source: ResultSource, run_dir: Path, key: list[int] | None) -> list[Any]:
    """``[stat key, values, error]`` of one source of one point."""
    if key is None:
        return [None, {}, f"{source.label}: no such file"]
    try:
        return [key, read_source(source, run_dir), None]
    except FileNotFoundError:
        return [None, {}, f"{source.label}: no such file"]
    except (ResultReadError, BoundedReadError) as exc:
        return [key, {}, str(exc)]
    except (OSError, UnicodeError, ValueError) as exc:
        return [key, {}, f"{source.label}: {exc}"]


# ----------------------------------------------------------------------------- a whole sweep


#: Most bytes of ``results-cache.json`` read (a larger one is ignored and written again).
CACHE_MAX_BYTES = 512 * 1024 * 1024


def _load_cache(path: Path, spec: str) -> dict[str, Any]:
    try:
        payload = json.loads(read_bounded(path, CACHE_MAX_BYTES))
    except (OSError, ValueError, BoundedReadError, RecursionError):  # missing, a FIFO, a link, bad or too deep
        return {}
    if not isinstance(payload, dict) or payload.get("version") != _CACHE_VERSION or payload.get("spec") != spec:
        return {}
    points = payload.get("points")
    return points if isinstance(points, dict) else {}


def read_points(folder: Path, point_ids: Iterable[str], sources: Sequence[ResultSource], *,
                cache: bool = True) -> dict[str, tuple[dict[str, Scalar], str | None]]:
    """Each point's metrics and error text (``None`` when every source was read), using the cache.

    Only files whose ``stat`` changed since the cached read are opened; the cache is rewritten
    (atomically) only when something changed, and a sweep folder that cannot be written is read
    without it.
    """
    spec = _spec_key(sources)
    cache_path = folder / RESULTS_CACHE_FILE
    cached = _load_cache(cache_path, spec) if cache else {}
    fresh: dict[str, list[list[Any]]] = {}
    changed = False
    out: dict[str, tuple[dict[str, Scalar], str | None]] = {}
    points_dir = os.fspath(folder / POINTS_DIR)
    for pid in point_ids:
        run_dir = f"{points_dir}/{pid}"
        old = cached.get(pid)
        entries = []
        for i, source in enumerate(sources):
            key = _stat_key(_source_path(source, run_dir))
            entry = old[i] if isinstance(old, list) and len(old) == len(sources) else None
            if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == key):  # unchanged (or still missing)
                entry = _read_entry(source, Path(run_dir), key)
                changed = True
            entries.append(entry)
        fresh[pid] = entries
        values: dict[str, Scalar] = {}
        errors = []
        for _key, vals, err in entries:
            for name, value in vals.items():
                values.setdefault(name, value)  # two sources with one name: the first declared wins
            if err:
                errors.append(err)
        out[pid] = (values, "; ".join(errors) or None)
    if cache and (changed or set(cached) != set(fresh)):
        try:
            atomic_write_text(cache_path, json.dumps({"version": _CACHE_VERSION, "spec": spec, "points": fresh},
                                                     separators=(",", ":")), below=folder)
        except (OSError, UnsafePathError) as exc:
            log.info("results cache not written (%s)", exc)
    return out


def typed_column(values: Sequence[Scalar]) -> pd.api.extensions.ExtensionArray:
    """A nullable pandas array of the values' type: boolean, Int64, Float64, else string."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {bool}:
        return pd.array(values, dtype="boolean")
    if kinds and kinds <= {int}:
        return pd.array(values, dtype="Int64")
    if kinds and kinds <= {int, float}:
        return pd.array([None if v is None else float(v) for v in values], dtype="Float64")
    return pd.array([None if v is None else str(v) for v in values], dtype="string")


def results_frame(folder: Path, point_ids: Sequence[str], *, sources: Sequence[ResultSource] | None = None,
                  cache: bool = True) -> pd.DataFrame:
    """One row per point: ``point_id``, one typed column per metric, ``result_error``, ``log_out``, ``log_err``.

    Args:
        folder: The sweep folder.
        point_ids: The points, in order.
        sources: The result sources (default: those saved with the sweep).
        cache: Use (and update) the sweep's results cache.
    """
    if sources is None:
        sources = read_results_spec(folder)[0]
    points_dir = os.fspath(folder / POINTS_DIR)
    ids = pd.Series(pd.array(point_ids if isinstance(point_ids, pd.api.extensions.ExtensionArray) else list(point_ids),
                             dtype="string"))
    frame = pd.DataFrame({"point_id": ids})
    if sources:
        read = read_points(folder, point_ids, sources, cache=cache)
        names: dict[str, None] = {}
        for pid in point_ids:
            names.update(dict.fromkeys(read[pid][0]))
        taken = set(_OWN_COLUMNS) | set(names)
        for name in names:  # a metric named like one of this frame's own columns is prefixed, not written over it
            column = free_column_name(name, taken) if name in _OWN_COLUMNS else name
            taken.add(column)
            frame[column] = typed_column([read[pid][0].get(name) for pid in point_ids])
        frame["result_error"] = pd.array([read[pid][1] for pid in point_ids], dtype="string")
    else:
        frame["result_error"] = pd.Series(pd.NA, index=frame.index, dtype="string")
    frame["log_out"] = f"{points_dir}/" + ids + f"/{LOG_OUT}"  # by column: a million points, no loop
    frame["log_err"] = f"{points_dir}/" + ids + f"/{LOG_ERR}"
    return frame


#: The columns :func:`results_frame` writes itself; a metric of one of these names is prefixed.
_OWN_COLUMNS = ("point_id", "result_error", "log_out", "log_err")


def free_column_name(name: str, taken: set[str]) -> str:
    """``result_<name>`` (``result_result_<name>``, ...): the first that is not in ``taken``."""
    column = f"result_{name}"
    while column in taken:
        column = f"result_{column}"
    return column


def join_results(frame: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the result columns joined on ``point_id``; a metric named like a column gets ``result_``."""
    taken = set(map(str, frame.columns)) | set(map(str, results.columns))
    rename = {}
    for c in results.columns:
        if c != "point_id" and c in frame.columns:
            rename[c] = free_column_name(str(c), taken)
            taken.add(rename[c])
    right = results.rename(columns=rename)
    left = frame.assign(point_id=frame["point_id"].astype("string"))
    return left.merge(right, on="point_id", how="left")


def sort_results(frame: pd.DataFrame, sort: Sequence[str] = (), top: int | None = None) -> pd.DataFrame:
    """Sort by columns (``-name``: descending; nulls last) and keep the first ``top`` rows.

    Raises:
        ConfigError: A sort column is not in the frame (with the columns there are).
    """
    if sort:
        cols = [s.lstrip("-+") for s in sort]
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ConfigError(ConfigProblem(f"no column {', '.join(map(repr, missing))} to sort by", key="--sort",
                                            choices=tuple(map(str, frame.columns))))
        frame = frame.sort_values(cols, ascending=[not s.startswith("-") for s in sort], na_position="last",
                                  kind="stable")
    if top is not None:
        frame = frame.head(top)
    return frame.reset_index(drop=True)
