"""Memory used and GPU usage as Slurm records them, for :mod:`hpcjobs.accounting.sacct.columns`.

* **Memory used** of a step: ``MaxRSS`` is the peak of the *largest task* (sacct.1: "Maximum resident
  set size of all tasks in job"), so a step of ``NTasks`` tasks used up to ``MaxRSS × NTasks``; the job's
  value is the largest step's, bounded by what the job requested (its cgroup could not hold more), though
  never below the measured MaxRSS.
  ``seff`` (Slurm ``contribs/seff``) takes the largest step's ``TRESUsageInTot`` ``mem``, the sum of the
  tasks' peaks, which is the same figure when the tasks peak alike.
* **GPU usage** without hpcjobs' own sampler: the ``gres/gpuutil`` of ``TRESUsageInAve`` (percent,
  summed over the GPUs of a task, hence divided by the step's ``gres/gpu`` count of ``AllocTRES``) and the
  ``gres/gpumem`` of ``TRESUsageInMax`` (bytes; a ``K``/``M``/``G`` suffix is a power of 1024), written by
  the ``acct_gather_gpu``/GPU plugins; and Princeton jobstats' ``AdminComment``
  ``JS1:<base64 of gzip of JSON>``, whose JSON is ``{"nodes": {node: {"gpu_utilization": {minor: percent},
  "gpu_used_memory": {minor: bytes}, ...}}, "total_time": s, "gpus": n}`` (jobstats ``jobstats.py``).
  The AdminComment of a job row wins over its steps' TRES.

Utilisation travels as integers (millionths) so that the job rows can take the maximum over their steps
with the same integer gathers as MaxRSS.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hpcjobs.accounting.sacct import arrays as nx
from hpcjobs.schedulers.slurm import formats as fs
from hpcjobs.units import is_ascii_digits

_PPM = 1_000_000
_MAX_COMMENT_BYTES = 1 << 20  # a jobstats summary is a few hundred bytes; gunzip no more than this


def memory_used(rss: pa.Array, ntasks: pa.Array | pa.ChunkedArray | None) -> pa.Array:
    """``MaxRSS × NTasks`` per row (``NTasks`` missing or 0: 1), int64, null where MaxRSS is.

    Args:
        rss: MaxRSS in bytes.
        ntasks: NTasks as integers, or ``None`` when not read.

    Returns:
        Bytes per row.
    """
    if ntasks is None:
        return rss
    values, missing = nx.ints(rss)
    tasks, no_tasks = nx.ints(ntasks)
    tasks = np.where(no_tasks | (tasks < 1), 1, tasks)
    product = np.minimum(values.astype(np.float64) * tasks, float(2**62)).astype(np.int64)
    return pa.array(np.where(missing, 0, product), pa.int64(), mask=missing)


def bounded(used: pd.Series, request: pd.Series, measured: pd.Series) -> pd.Series:
    """``used`` capped at ``request`` where both are known, but never below the ``measured`` MaxRSS.

    The cap bounds the ``× NTasks`` estimate; a single task that was measured above the request (a job
    killed for memory) keeps its measured peak.

    Args:
        used: ``Int64`` memory used.
        request: ``Int64`` memory requested.
        measured: ``Int64`` MaxRSS of the same rows.

    Returns:
        An ``Int64`` Series.
    """
    u = used.to_numpy(dtype=np.int64, na_value=0)
    req = request.to_numpy(dtype=np.int64, na_value=-1)
    r = np.where(req > 0, np.maximum(req, measured.to_numpy(dtype=np.int64, na_value=-1)), -1)
    capped = np.where((r > 0) & (u > r), r, u)
    return pd.Series(pd.arrays.IntegerArray(capped, used.isna().to_numpy()), copy=False)


def util_series(ppm: pa.Array) -> pd.Series:
    """Millionths (int64, nulls) → a ``Float64`` fraction."""
    values, missing = nx.ints(ppm)
    return pd.Series(pd.arrays.FloatingArray(values / _PPM, missing), copy=False)


def _tres_value(text: str | None, key: str) -> int | None:
    """``key=`` of a usage TRES string as an integer (bytes for sizes), ``None`` when absent or odd."""
    if not text:
        return None
    found = fs.parse_tres(text).get(key)
    if found is None:
        return None
    if is_ascii_digits(found):
        return int(found)
    size = fs.parse_memory(found).bytes
    return size if size is not None and 0 <= size < 2**63 else None


def _per_row(arr: pa.Array | pa.ChunkedArray, key: str, fn: Any = None) -> nx.Ints:
    """``fn(value)`` (default: ``key=`` of the TRES) for the rows whose text holds ``key``, once per distinct value."""
    flat = pc.cast(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr, pa.large_string()) \
        if not pa.types.is_dictionary(arr.type) else pc.cast(arr, pa.large_string())
    n = len(flat)
    values, missing = np.zeros(n, np.int64), np.ones(n, bool)
    rows = np.asarray(pc.indices_nonzero(pc.fill_null(pc.match_substring(flat, key), False)))
    if not len(rows):
        return values, missing
    enc = flat.take(pa.array(rows)).dictionary_encode()
    per_value = [(fn or (lambda v: _tres_value(v, key)))(v) for v in enc.dictionary.to_pylist()]
    table = nx.table(per_value)
    found, unknown = nx.Spread(table, nx.codes(enc, 0)).at(None)
    values[rows], missing[rows] = found, unknown
    return values, missing


def jobstats_summary(text: str | None) -> tuple[int | None, int | None]:
    """GPU utilisation (millionths, mean over the job's GPUs) and the largest GPU memory used (bytes) of a
    jobstats ``JS1:`` AdminComment; ``(None, None)`` for anything else or a summary without GPU figures.

    Args:
        text: An AdminComment.

    Returns:
        The two figures, each ``None`` when the summary lacks it.
    """
    if not text or not text.startswith("JS1:"):
        return None, None
    try:
        raw = zlib.decompressobj(wbits=31).decompress(base64.b64decode(text[4:], validate=True), _MAX_COMMENT_BYTES)
        doc = json.loads(raw)
    except (binascii.Error, zlib.error, gzip.BadGzipFile, ValueError, EOFError, RecursionError):
        return None, None
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    utils: list[float] = []
    mems: list[int | float] = []
    for node in nodes.values() if isinstance(nodes, dict) else []:
        if not isinstance(node, dict):
            continue
        for name, into in (("gpu_utilization", utils), ("gpu_used_memory", mems)):
            per_gpu = node.get(name)
            if isinstance(per_gpu, dict):
                into.extend(v for v in per_gpu.values()
                            if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**62)
    util = round(sum(utils) / len(utils) / 100 * _PPM) if utils else None
    return util, (int(max(mems)) if mems else None)


def sacct_gpu_usage(col: dict[str, pa.Array | pa.ChunkedArray]) -> tuple[pa.Array, pa.Array] | None:
    """Per row GPU utilisation (millionths) and GPU memory (bytes) from the usage TRES and AdminComment.

    Args:
        col: The sacct columns by lower-cased field name.

    Returns:
        Two int64 arrays with nulls, or ``None`` when none of ``TRESUsageInAve``, ``TRESUsageInMax``,
        ``AdminComment`` was read.
    """
    if not {"tresusageinave", "tresusageinmax", "admincomment"} & set(col):
        return None
    n = len(next(iter(col.values())))
    util, no_util = np.zeros(n, np.int64), np.ones(n, bool)
    mem, no_mem = np.zeros(n, np.int64), np.ones(n, bool)
    if "tresusageinave" in col:
        pct, no_pct = _per_row(col["tresusageinave"], "gres/gpuutil")
        gpus, no_gpus = (_per_row(col["alloctres"], "gres/gpu", lambda v: fs.summarize_tres(v).gpus)
                         if "alloctres" in col else (np.ones(n, np.int64), np.ones(n, bool)))
        per_gpu = np.where(no_gpus | (gpus < 1), 1, gpus)
        util, no_util = np.round(pct / per_gpu / 100 * _PPM).astype(np.int64), no_pct
    if "tresusageinmax" in col:
        mem, no_mem = _per_row(col["tresusageinmax"], "gres/gpumem")
    if "admincomment" in col:
        js_util, no_js_util = _per_row(col["admincomment"], "JS1:", lambda v: jobstats_summary(v)[0])
        js_mem, no_js_mem = _per_row(col["admincomment"], "JS1:", lambda v: jobstats_summary(v)[1])
        util, no_util = np.where(no_js_util, util, js_util), no_util & no_js_util
        mem, no_mem = np.where(no_js_mem, mem, js_mem), no_mem & no_js_mem
    return (pa.array(np.where(no_util, 0, util), pa.int64(), mask=no_util),
            pa.array(np.where(no_mem, 0, mem), pa.int64(), mask=no_mem))
