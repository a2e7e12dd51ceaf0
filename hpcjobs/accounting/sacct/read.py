"""Reading ``sacct --parsable2`` text into Arrow columns, typed where the format allows it.

pyarrow's multithreaded CSV reader converts the columns whose sacct format it knows while it
splits the text: the four times (``YYYY-MM-DDTHH:MM:SS``, ``Unknown``/``None``/blank → null), the
counts, and the low-cardinality text (user, account, state, TRES, ...) straight to dictionaries.
Text that breaks one of those formats (epoch-second times from ``SLURM_TIME_FORMAT=%s``, a count
that is not a number) makes that conversion fail; the whole text is then read again as strings and
the column parsers handle every spelling. Both ways give the same :data:`Columns`: one Arrow array
per lower-cased field, blank meaning null.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from hpcjobs.accounting.sacct.scan import (
    COUNT_FIELDS,
    DICTIONARY_FIELDS,
    TIME_FIELDS,
    Columns,
    scan_columns,
)
from hpcjobs.accounting.sacct.text import Prepared, split_bad_lines
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.skipped import Skipped

_DICT = pa.dictionary(pa.int32(), pa.string())
#: Field → the type the reader converts it to; fields not here stay strings.
TYPED_FIELDS: dict[str, pa.DataType] = {
    **dict.fromkeys(TIME_FIELDS, pa.timestamp("s")), **dict.fromkeys(COUNT_FIELDS, pa.int64()),
    **dict.fromkeys(DICTIONARY_FIELDS, _DICT),
}
_PARSE = pacsv.ParseOptions(delimiter="|", quote_char=False, escape_char=False)


def read_columns(prepared: Prepared) -> tuple[Columns, list[Skipped]]:
    """Read sacct text brought to ``--parsable2`` by :func:`hpcjobs.accounting.sacct.text.prepare`.

    Args:
        prepared: The text (or file), its lower-cased field names, whether its first line is a header,
            and its delimiter.

    Returns:
        The columns by field name (a header line is skipped), and the lines left out because their number
        of fields differs (a value holding the delimiter or a newline), with the ones ``prepared`` had.

    Raises:
        SchedulerOutputError: The first data line (or every line) has a different number of fields.
    """
    source, names, skip, sep = prepared.source, prepared.names, prepared.header, prepared.sep
    if sep == "|":
        scanned = scan_columns(source, names, skip)
        if scanned is not None:
            return scanned, list(prepared.skipped)
    try:
        return _read_arrow(source, names, skip, sep), list(prepared.skipped)
    except SchedulerOutputError:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        kept, skipped = split_bad_lines(data, len(names), sep, skip)
        if not skipped:
            raise
        return _read_arrow(kept, names, skip, sep), [*prepared.skipped, *skipped]


def _read_arrow(source: bytes | os.PathLike[str], names: list[str], skip: bool, sep: str) -> Columns:
    """The pyarrow reading of :func:`read_columns` (typed where the text allows it, else as text)."""
    def stream() -> Any:
        return io.BytesIO(source) if isinstance(source, bytes) else os.fspath(source)

    parse = _PARSE if sep == "|" else pacsv.ParseOptions(delimiter=sep, quote_char=False, escape_char=False)
    read = pacsv.ReadOptions(column_names=names, skip_rows=1 if skip else 0)
    typed = pacsv.ConvertOptions(
        column_types={n: TYPED_FIELDS.get(n, pa.string()) for n in names}, null_values=["", "Unknown", "None"],
        strings_can_be_null=False, timestamp_parsers=[pacsv.ISO8601],
    )
    try:
        table = pacsv.read_csv(stream(), read_options=read, parse_options=parse, convert_options=typed)
    except pa.ArrowInvalid as exc:
        if "conversion error" not in str(exc):
            raise _field_count_error(len(names), exc) from exc
        as_text = pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), null_values=[""],
                                       strings_can_be_null=True, quoted_strings_can_be_null=False)
        try:
            table = pacsv.read_csv(stream(), read_options=read, parse_options=parse, convert_options=as_text)
        except pa.ArrowInvalid as exc2:
            raise _field_count_error(len(names), exc2) from exc2
        return {name: table.column(name).combine_chunks() for name in names}
    return {name: _blank_is_null(table.column(name).combine_chunks()) for name in names}


def _field_count_error(n: int, exc: Exception) -> SchedulerOutputError:
    return SchedulerOutputError(f"sacct output does not have the {n} fields asked for: {exc}")


def _blank_is_null(arr: pa.Array) -> pa.Array:
    """The typed read keeps blank strings; make them null (the reader nulls blank times and counts itself)."""
    if pa.types.is_dictionary(arr.type):
        blank = np.flatnonzero(np.asarray(pc.equal(arr.dictionary, "")))
        if not len(blank):
            return arr
        indices = pc.if_else(pc.equal(arr.indices, int(blank[0])), pa.scalar(None, arr.indices.type), arr.indices)
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    if not pa.types.is_string(arr.type) or arr.null_count or arr.offset:
        return arr if not arr.offset else pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int32, count=n + 1, offset=arr.offset * 4)
    filled = offsets[1:] != offsets[:-1]
    missing = n - int(np.count_nonzero(filled))
    if not missing:
        return arr
    validity = pa.py_buffer(np.packbits(filled, bitorder="little"))
    return pa.Array.from_buffers(arr.type, n, [validity, *arr.buffers()[1:]], missing)
