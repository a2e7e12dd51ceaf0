"""The ``results:`` key of an experiment: what each run of a sweep produces, for :func:`hpcjobs.load_sweep`.

A source is one of::

    results: {file: metrics.json}                              # a JSON object: one metric per key
    results: {file: epochs.csv, reduce: max:val_acc}           # per-step rows (CSV, TSV or JSON lines)
    results: {stdout_regex: 'val_acc=(?P<val_acc>[0-9.]+)'}   # the last match in the point's stdout

or a list of them. Paths are relative to the point's run folder (``$HPCJOBS_RUN_DIR``); absolute
paths and ``..`` are refused when the file is loaded, with the file and line of the key, and so is
a regular expression that does not compile or has no named group.

This module only declares and checks (pydantic); :mod:`hpcjobs.sweep.results` reads.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from hpcjobs.config.types import StrictModel
from hpcjobs.errors import UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.safe_files import read_regular

log = logging.getLogger("hpcjobs.sweep")

#: The sources saved with a sweep, in its folder.
RESULTS_SPEC_FILE = "results-spec.json"

#: Default bound on the bytes read from one result file (the end of the stdout log for a regex).
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: File name extension → format, when ``format`` is not given.
FORMAT_BY_SUFFIX: dict[str, str] = {".json": "json", ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl",
                                    ".ndjson": "jsonl"}
_REDUCE_RE = re.compile(r"^(?:last|first|(?:min|max):.+)$")


class ResultSource(StrictModel):
    """One thing a run writes that holds metrics."""

    file: str | None = Field(
        None, description="A file in the point's run folder ($HPCJOBS_RUN_DIR), relative: metrics.json, "
        "logs/epochs.csv. JSON: an object (one metric per key; nested objects give dotted names) or a list of "
        "row objects; CSV/TSV: a header and one row per step; JSON lines: one row object per line.",
    )
    format: Literal["json", "csv", "tsv", "jsonl"] | None = Field(
        None, description="How to read the file (default: from its extension: .json, .csv, .tsv, .jsonl/.ndjson).",
    )
    reduce: str | None = Field(
        None, description="Which row of a per-step file gives the metrics: last (default), first, "
        "min:COLUMN or max:COLUMN (the row where that column is smallest or largest).",
    )
    stdout_regex: str | None = Field(
        None, description="A Python regular expression with named groups, searched in the point's stdout log; "
        "the last match gives one metric per group, e.g. 'val_acc=(?P<val_acc>[0-9.]+)'.",
    )
    prefix: str = Field("", description="Prepended to this source's metric names (to keep two sources apart).")
    max_bytes: PositiveInt = Field(
        DEFAULT_MAX_BYTES, description="Read at most this many bytes: a larger file is an error for its point "
        "(a regex reads the last max_bytes of the log).",
    )

    @field_validator("file")
    @classmethod
    def _relative_inside(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip():
            raise ValueError("an empty path")
        path = PurePosixPath(value)
        if path.is_absolute() or value.startswith("~"):
            raise ValueError(f"{value!r} is absolute: give a path relative to the point's run folder "
                             "($HPCJOBS_RUN_DIR), e.g. metrics.json")
        if ".." in path.parts:
            raise ValueError(f"{value!r} leaves the point's run folder ('..'): results are read inside "
                             "$HPCJOBS_RUN_DIR only")
        return value

    @field_validator("stdout_regex")
    @classmethod
    def _compiles_with_groups(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        if not compiled.groupindex:
            raise ValueError("needs at least one named group, e.g. 'val_acc=(?P<val_acc>[0-9.]+)': "
                             "each group's name is a metric")
        return value

    @field_validator("reduce")
    @classmethod
    def _known_reduce(cls, value: str | None) -> str | None:
        if value is not None and not _REDUCE_RE.match(value):
            raise ValueError(f"{value!r}: expected last, first, min:COLUMN or max:COLUMN")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ResultSource:
        if (self.file is None) == (self.stdout_regex is None):
            raise ValueError("give exactly one of 'file' or 'stdout_regex'")
        if self.stdout_regex is not None and (self.reduce or self.format):
            raise ValueError("'reduce' and 'format' are for 'file' sources")
        if self.file is not None and self.format is None and self.file_format is None:
            raise ValueError(f"cannot tell the format of {self.file!r} from its extension: add "
                             "format: json|csv|tsv|jsonl")
        return self

    @property
    def file_format(self) -> str | None:
        """The file's format: ``format``, else from the extension (``None`` for a regex or an unknown extension)."""
        if self.file is None:
            return None
        return self.format or FORMAT_BY_SUFFIX.get(PurePosixPath(self.file).suffix.lower())

    @property
    def label(self) -> str:
        """How errors name this source: the file, or ``stdout``."""
        return self.file if self.file is not None else "stdout"


def one_or_list_schema(schema: dict[str, Any]) -> None:
    """JSON Schema of ``results:``: one source or a list of them (the model stores a list)."""
    for alt in schema.get("anyOf", []):
        if alt.get("type") == "array" and "items" in alt:
            schema["anyOf"].insert(0, dict(alt["items"]))
            return


def result_sources(declared: ResultSource | list[ResultSource] | None) -> tuple[ResultSource, ...]:
    """The ``results:`` value as a tuple of sources (one mapping or a list of them)."""
    if declared is None:
        return ()
    if isinstance(declared, ResultSource):
        return (declared,)
    return tuple(declared)


#: Most bytes of ``results-spec.json`` read (what a sweep's few result sources take, many times over).
SPEC_MAX_BYTES = 1024 * 1024


def write_results_spec(folder: Path, sources: Sequence[ResultSource], *, output_dir: str | None = None) -> Path:
    """Save the sweep's result sources (and the jobs' log folder) in ``folder/results-spec.json``, atomically."""
    payload = {"results": [s.model_dump(exclude_defaults=True) for s in sources], "output_dir": output_dir}
    text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
    path = folder / RESULTS_SPEC_FILE
    try:
        if read_regular(path, len(text.encode()) + 1).decode("utf-8", "replace") == text:
            return path
    except (OSError, UnsafePathError):
        pass
    return atomic_write_text(path, text, below=folder)


def read_results_spec(folder: Path) -> tuple[tuple[ResultSource, ...], str | None]:
    """The result sources and log folder saved with a sweep (none for a sweep submitted before they were)."""
    try:
        payload = json.loads(read_regular(folder / RESULTS_SPEC_FILE, SPEC_MAX_BYTES))
        return (tuple(ResultSource.model_validate(s) for s in payload.get("results", [])),
                payload.get("output_dir"))
    except FileNotFoundError:
        return (), None
    except (OSError, ValueError, RecursionError, UnsafePathError, AttributeError) as exc:  # ValidationError: ValueError
        log.warning("ignoring %s: %s", folder / RESULTS_SPEC_FILE, exc)
        return (), None
