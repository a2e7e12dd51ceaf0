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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from hpcjobs.accounting.sacct_scan import (
    COUNT_FIELDS,
    DICTIONARY_FIELDS,
    TIME_FIELDS,
    Columns,
    scan_columns,
)
from hpcjobs.errors import SchedulerOutputError

_DICT = pa.dictionary(pa.int32(), pa.string())
#: Field → the type the reader converts it to; fields not here stay strings.
TYPED_FIELDS: dict[str, pa.DataType] = {
    **dict.fromkeys(TIME_FIELDS, pa.timestamp("s")), **dict.fromkeys(COUNT_FIELDS, pa.int64()),
    **dict.fromkeys(DICTIONARY_FIELDS, _DICT),
}
_PARSE = pacsv.ParseOptions(delimiter="|", quote_char=False, escape_char=False)


def read_columns(source: str | bytes | os.PathLike[str], names: list[str] | None) -> Columns:
    """Read the ``|``-separated text; ``names`` ``None``: take them from sacct's header line.

    Args:
        source: The text (``str``/``bytes``) or a path to a file holding it.
        names: Lower-cased field names in order, or ``None``.

    Returns:
        The columns by field name; a header line, when there is one, is skipped.

    Raises:
        SchedulerOutputError: A line has a different number of fields, or there is no header to name them.
    """
    if isinstance(source, (str, bytes)):
        data = source.encode() if isinstance(source, str) else source
        first = data[: data.find(b"\n")] if b"\n" in data else data

        def stream() -> Any:
            return io.BytesIO(data)
    else:
        with open(source, "rb") as fh:
            first = fh.readline()

        def stream() -> Any:
            return os.fspath(source)
    header = [f.strip().lower() for f in first.rstrip(b"\r\n").decode(errors="replace").split("|")]
    if names is None:
        if header[0] != "jobid":
            raise SchedulerOutputError("no field list given and the text has no sacct header line")
        names = header
    skip = header[0] == names[0]
    scanned = scan_columns(data if isinstance(source, (str, bytes)) else source, names, skip)
    if scanned is not None:
        return scanned
    read = pacsv.ReadOptions(column_names=names, skip_rows=1 if skip else 0)
    typed = pacsv.ConvertOptions(
        column_types={n: TYPED_FIELDS.get(n, pa.string()) for n in names}, null_values=["", "Unknown", "None"],
        strings_can_be_null=False, timestamp_parsers=[pacsv.ISO8601],
    )
    try:
        table = pacsv.read_csv(stream(), read_options=read, parse_options=_PARSE, convert_options=typed)
    except pa.ArrowInvalid as exc:
        if "conversion error" not in str(exc):
            raise _field_count_error(len(names), exc) from exc
        as_text = pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), null_values=[""],
                                       strings_can_be_null=True, quoted_strings_can_be_null=False)
        try:
            table = pacsv.read_csv(stream(), read_options=read, parse_options=_PARSE, convert_options=as_text)
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
