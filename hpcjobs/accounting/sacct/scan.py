"""The compiled one-pass scanner for ``sacct --parsable2`` text, when the build could compile it.

:mod:`hpcjobs.accounting.sacct._scan` (C, built by ``hatch_build.py`` when a compiler is at hand)
splits the lines and parses every field in the same pass: times to seconds, counts, durations to
nanoseconds, MaxRSS to bytes, job ids into their parts, low-cardinality text to dictionary codes.
Threads scan disjoint parts of the text at once. The result is the same :data:`Columns` the Arrow
reader gives, except that fields the Arrow reader leaves as text come already parsed (``jobid`` and
``jobidraw`` as structs, ``totalcpu``/``elapsed`` as durations, ``maxrss`` as bytes); the column
parsers accept both. Text the scanner does not know exactly makes :func:`scan_columns` return
``None``, and the caller reads it the Arrow way, the reference for every spelling.
"""

from __future__ import annotations

import itertools
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

try:
    from hpcjobs.accounting.sacct import _scan as _ext  # type: ignore[attr-defined]
except ImportError:  # built without a compiler: the Arrow reader does all the work
    _ext = None

#: Whether the compiled scanner is installed.
AVAILABLE = _ext is not None
_PART_BYTES = 8 << 20  # below this a text is scanned by one thread
_MAX_PART_BYTES = 1 << 30  # a part's text, hence any of its columns, stays under the 2 GiB of int32 offsets
#: The parts of a scanned JobID (the struct fields, in the scanner's order).
_ID_FIELDS = ["job_id", "step", "array_job_id", "array_task_spec", "array_task_id", "het_offset"]


Columns = dict[str, pa.Array | pa.ChunkedArray]
#: Fields with a known sacct format (the same for both readers): times, counts, low-cardinality text.
TIME_FIELDS = ("submit", "eligible", "start", "end")
COUNT_FIELDS = ("elapsedraw", "nnodes", "alloccpus", "reqcpus", "ncpus")
DICTIONARY_FIELDS = ("user", "account", "partition", "qos", "cluster", "state", "exitcode", "timelimit", "reqmem",
                     "alloctres", "reqtres")
#: How each field is parsed (the scanner's K_* kinds by name); other fields are kept as text.
_KINDS: dict[str, str] = {
    "jobid": "K_JOBID", "jobidraw": "K_RAWID", "totalcpu": "K_DUR", "elapsed": "K_DUR", "maxrss": "K_MEM",
    **dict.fromkeys(TIME_FIELDS, "K_TIME"), **dict.fromkeys(COUNT_FIELDS, "K_INT"),
    **dict.fromkeys(DICTIONARY_FIELDS, "K_DICT"),
}


def _kind(name: str) -> int:
    return int(getattr(_ext, _KINDS.get(name, "K_STR")))


def scan_columns(
    source: bytes | os.PathLike[str], names: list[str], skip_first_line: bool, *, parts: int | None = None
) -> Columns | None:
    """Scan the text with the compiled scanner.

    Args:
        source: The text, or a path to a file holding it.
        names: Lower-cased field names in order.
        skip_first_line: The first line is sacct's header.
        parts: Scan in this many parts (at least as many as 1 GiB pieces); default: one per 8 MiB, at most one
            per CPU (up to 8).

    Returns:
        The columns, or ``None`` when the scanner is not installed or the text has a spelling it does not
        know (the caller then reads it with :func:`hpcjobs.accounting.sacct.read.read_columns`).
    """
    if _ext is None or not names or len(names) > 64:
        return None
    if isinstance(source, bytes):
        return _scan_buffer(source, names, skip_first_line, parts)
    try:
        with open(source, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return _scan_buffer(b"", names, skip_first_line, parts)
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return _scan_buffer(mm, names, skip_first_line, parts)
    except (OSError, ValueError):  # not a regular file (a pipe...): the Arrow reader streams it
        return None


def _scan_buffer(text: Any, names: list[str], skip_first_line: bool, parts: int | None) -> Columns | None:
    assert _ext is not None
    size = len(text)
    start = 0
    if skip_first_line:
        nl = text.find(b"\n")
        start = size if nl < 0 else nl + 1
    kinds = bytes(_kind(n) for n in names)
    if parts is None:
        parts = min(os.cpu_count() or 1, 8, max(1, (size - start) // _PART_BYTES))
    workers = max(parts, -(-(size - start) // _MAX_PART_BYTES))
    bounds = [start]
    for k in range(1, workers):
        nl = text.find(b"\n", max(bounds[-1], start + (size - start) * k // workers))
        if nl < 0:
            break
        bounds.append(nl + 1)
    bounds.append(size)
    spans = list(itertools.pairwise(bounds))
    if len(spans) == 1:
        results = [_ext.scan(text, start, size, kinds)]
    else:
        with ThreadPoolExecutor(max_workers=min(len(spans), os.cpu_count() or 1, 8)) as pool:
            results = list(pool.map(lambda span: _ext.scan(text, span[0], span[1], kinds), spans))
    if any(r is None for r in results):
        return None
    counts = [int(r[0]) for r in results]
    return {name: _assemble(kinds[f], [r[f + 1] for r in results], counts) for f, name in enumerate(names)}


def _validity(valid: Any, n: int) -> tuple[pa.Buffer | None, int]:
    """One flag byte per row → an Arrow validity bitmap (``None`` when nothing is missing) and the null count."""
    flags = np.frombuffer(valid, np.bool_, count=n)
    missing = n - int(np.count_nonzero(flags))
    return (pa.py_buffer(np.packbits(flags, bitorder="little")) if missing else None), missing


def _strings(off: Any, data: Any, valid: Any, n: int) -> pa.Array:
    bitmap, missing = _validity(valid, n)
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(off), pa.py_buffer(data)], missing)


def _numbers(values: Any, valid: Any, n: int, typ: pa.DataType) -> pa.Array:
    bitmap, missing = _validity(valid, n)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(values)], missing)


def _part(kind: int, r: Any, n: int) -> pa.Array:
    """One part's result for one field as an Arrow array (the buffers are used without a copy)."""
    assert _ext is not None
    if kind == _ext.K_STR:
        off, data, valid = r
        return _strings(off, data, valid, n)
    if kind == _ext.K_DICT:
        codes, off, data = r
        n_values = memoryview(off).nbytes // 4 - 1
        values = pa.Array.from_buffers(pa.string(), n_values, [None, pa.py_buffer(off), pa.py_buffer(data)])
        idx = np.frombuffer(codes, np.int32, count=n)
        return pa.DictionaryArray.from_arrays(pa.array(idx, mask=idx < 0), values)
    if kind in (_ext.K_INT, _ext.K_MEM, _ext.K_TIME, _ext.K_DUR):
        typ = {_ext.K_TIME: pa.timestamp("s"), _ext.K_DUR: pa.duration("ns")}.get(kind, pa.int64())
        values, valid = r
        return _numbers(values, valid, n, typ)
    if kind == _ext.K_JOBID:  # job, step, array job, spec: (offsets, data, valid); task, het: (values, valid)
        fields = [_strings(r[3 * k], r[3 * k + 1], r[3 * k + 2], n) for k in range(4)]
        fields += [_numbers(r[12 + 2 * k], r[13 + 2 * k], n, pa.int64()) for k in range(2)]
        return pa.StructArray.from_arrays(fields, names=_ID_FIELDS)
    if kind == _ext.K_RAWID:  # the job part: (offsets, data, valid); its number (-1: not a number)
        off, data, valid, keys = r
        key = np.frombuffer(keys, np.int64, count=n)
        return pa.StructArray.from_arrays([_strings(off, data, valid, n), pa.array(key, mask=key < 0)],
                                          names=["job_id_raw", "key"])
    return pa.nulls(n, pa.string())


def _assemble(kind: int, parts: list[Any], counts: list[int]) -> pa.Array | pa.ChunkedArray:
    """A field's parts joined: one array, or (text, to spare a copy) a chunked array."""
    assert _ext is not None
    arrays = [_part(kind, r, n) for r, n in zip(parts, counts, strict=True)]
    if len(arrays) == 1:
        return arrays[0]
    if kind in (_ext.K_STR, _ext.K_JOBID, _ext.K_RAWID):
        return pa.chunked_array(arrays)
    return pa.chunked_array(arrays).combine_chunks()
