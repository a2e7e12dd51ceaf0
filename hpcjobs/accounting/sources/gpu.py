"""Reader for the in-job GPU sampler: ``nvidia-smi --query-gpu=... --format=csv[,nounits] -l N`` files.

The sampler the templates start in the background writes, beside the job log::

    nvidia-smi --format=csv,nounits -l N \\
        --query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw

Real files (see ``tests/data/gpu/`` and ``tests/data/SOURCES.md``) look like::

    timestamp, index, name, utilization.gpu [%], utilization.memory [%], memory.total [MiB], memory.used [MiB]
    2024/11/23 12:23:29.950, 0, NVIDIA RTX A6000, 92 %, 73 %, 49140 MiB, 25073 MiB

What the reader copes with:

* the unit in the header (``utilization.gpu [%]``), kept there even under ``nounits``; with plain
  ``csv`` the unit is also in each value (``92 %``, ``25073 MiB``, ``210.55 W``);
* fields padded with a space after each comma;
* ``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``, ``[Insufficient Permissions]`` and blank → NA;
* the header repeated (a sampler re-run with ``>>`` each interval writes it every time) and headerless
  files (``noheader``: pass ``fields``);
* one row per GPU per sample, and a truncated last line (job killed mid-write), which is dropped.

Timestamps are the compute node's local time without a zone; pass ``tz`` to make them aware.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from hpcjobs.errors import SchedulerOutputError
from hpcjobs.safe_files import UnsafePathError, read_regular
from hpcjobs.skipped import Skipped, attach

#: The fields the hpcjobs sampler asks for, in order (also the default for headerless files).
SAMPLER_FIELDS: tuple[str, ...] = (
    "timestamp", "index", "uuid", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
    "power.draw",
)

#: nvidia-smi field → column of :func:`read_gpu_samples`.
FIELD_COLUMNS: dict[str, str] = {
    "timestamp": "timestamp",
    "index": "gpu_index",
    "uuid": "uuid",
    "name": "name",
    "pci.bus_id": "pci_bus_id",
    "utilization.gpu": "utilization_gpu",
    "utilization.memory": "utilization_memory",
    "memory.used": "memory_used_bytes",
    "memory.total": "memory_total_bytes",
    "memory.free": "memory_free_bytes",
    "power.draw": "power_draw_w",
    "temperature.gpu": "temperature_gpu_c",
}

_MISSING = {"", "N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]",
            "[GPU is lost]", "[Not Found]", "[Requested functionality has been deprecated]"}
_HEADER_CELL = re.compile(r"^(?P<field>[a-z][a-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_NUMBER = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z%]*)$")
_BYTES = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}

Source = str | bytes | os.PathLike[str]


def _is_header(cells: Sequence[str]) -> bool:
    return bool(cells) and _HEADER_CELL.match(cells[0].strip()) is not None


def _numbers(values: Iterable[str], unit: str | None, memory: bool) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        v = v.strip()
        m = _NUMBER.match(v) if v not in _MISSING else None
        if m is None:
            out.append(None)
            continue
        x = float(m["num"])
        if memory:
            x *= _BYTES.get(m["unit"] or unit or "MiB", 1024**2)
        out.append(x)
    return out


#: The largest sampler file read (a week of 4 GPUs sampled every 10 s is about 10 MB).
MAX_SAMPLER_FILE_BYTES = 256 << 20
#: The longest line of a sampler file read as a sample (nvidia-smi's lines are under 1 KB).
MAX_SAMPLER_LINE = 64 << 10


def read_gpu_samples(source: Source, *, fields: Sequence[str] | None = None, tz: str | None = None) -> pd.DataFrame:
    """Read one sampler file into a DataFrame, one row per GPU per sample.

    Args:
        source: A path (``os.PathLike``) or the text/bytes themselves.
        fields: The ``--query-gpu`` fields for a headerless file (default :data:`SAMPLER_FIELDS`);
            ignored when the file has a header.
        tz: Time zone the node wrote the timestamps in; given, ``timestamp`` is converted to UTC.

    Returns:
        Columns named by :data:`FIELD_COLUMNS` for the fields present (others with dots turned to
        underscores, as strings): ``timestamp`` datetime64, ``gpu_index`` Int64, ``uuid``/``name``
        string, ``utilization_gpu``/``utilization_memory`` Float64 percent, ``memory_*_bytes`` Int64,
        ``power_draw_w`` Float64. No rows for an empty file.

    Raises:
        SchedulerOutputError: The file has no header and ``fields`` does not match its column count.
        UnsafePathError: The path is not a regular file (a FIFO, a device), or is larger than
            :data:`MAX_SAMPLER_FILE_BYTES`.
    """
    file_name = None
    if isinstance(source, os.PathLike):
        file_name = str(source)
        text = read_regular(source, MAX_SAMPLER_FILE_BYTES).decode("utf-8", "replace")
    else:
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    skipped: list[Skipped] = []
    lines = []
    for n, line in enumerate(io.StringIO(text), 1):
        if len(line) > MAX_SAMPLER_LINE:  # nvidia-smi writes short lines: this one is not a sample
            skipped.append(Skipped(n, f"a line of {len(line):,} characters (at most {MAX_SAMPLER_LINE:,})",
                                   line[:40], file_name))
        else:
            lines.append(line)
    rows = [r for r in csv.reader(lines, skipinitialspace=True) if r and any(c.strip() for c in r)]
    header: list[str] | None = None
    units: list[str | None] = []
    data: list[list[str]] = []
    for r in rows:
        if _is_header(r):
            if header is None:
                parsed = [_HEADER_CELL.match(c.strip()) for c in r]
                header = [m["field"] if m else c.strip() for m, c in zip(parsed, r, strict=True)]
                units = [m["unit"] if m else None for m in parsed]
            continue
        data.append(r)
    if header is None:
        header = list(fields or SAMPLER_FIELDS)
        units = [None] * len(header)
        if data and len(data[0]) != len(header):
            raise SchedulerOutputError(
                f"GPU sampler file has no header and {len(data[0])} fields, not the {len(header)} expected "
                f"({','.join(header)})")
    data = [r for r in data if len(r) == len(header)]  # a truncated last line is dropped
    cols = list(zip(*data, strict=True)) if data else [() for _ in header]
    out: dict[str, pd.Series] = {}
    for field, unit, values in zip(header, units, cols, strict=True):
        name = FIELD_COLUMNS.get(field, field.replace(".", "_"))
        vals = [v.strip() for v in values]
        if field == "timestamp":
            ts = pd.to_datetime(pd.Series(vals, dtype="string").str.replace("/", "-", regex=False),
                                format="ISO8601", errors="coerce").astype("datetime64[ns]")
            if tz:
                ts = ts.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")
            out[name] = ts
        elif field == "index":
            out[name] = pd.Series(_numbers(vals, None, False), dtype="Float64").astype("Int64")
        elif field.startswith("memory."):
            out[name] = pd.Series(_numbers(vals, unit, True), dtype="Float64").round().astype("Int64")
        elif field.startswith(("utilization.", "power.", "temperature.", "clocks.", "fan.")):
            out[name] = pd.Series(_numbers(vals, unit, False), dtype="Float64")
        else:
            out[name] = pd.Series([None if v in _MISSING else v for v in vals], dtype="string")
    return attach(pd.DataFrame(out), skipped)


def _gpu_key(samples: pd.DataFrame) -> list[str]:
    return [c for c in ("gpu_index", "uuid") if c in samples.columns] or []


def gpu_summary(samples: pd.DataFrame) -> pd.DataFrame:
    """Per-GPU summary of one sampler file.

    Args:
        samples: Output of :func:`read_gpu_samples`.

    Returns:
        One row per GPU (by ``gpu_index``/``uuid`` when present, else one row): ``samples``,
        ``first``/``last`` timestamps, ``gpu_util_mean``/``gpu_util_max`` (percent, over samples that
        reported it), ``mem_util_mean``, ``mem_used_max_bytes``, ``mem_total_bytes``, ``power_mean_w``,
        ``power_max_w``. Missing measurements give NA.
    """
    keys = _gpu_key(samples)
    frame = samples.copy()
    for c in ("utilization_gpu", "utilization_memory", "power_draw_w"):
        if c not in frame:
            frame[c] = pd.Series(pd.NA, index=frame.index, dtype="Float64")
    for c in ("memory_used_bytes", "memory_total_bytes"):
        if c not in frame:
            frame[c] = pd.Series(pd.NA, index=frame.index, dtype="Int64")
    if "timestamp" not in frame:
        frame["timestamp"] = pd.Series(pd.NaT, index=frame.index, dtype="datetime64[ns]")
    if not keys:
        frame["_one"] = 0
        keys = ["_one"]
    g = frame.groupby(keys, dropna=False, sort=True)
    out = pd.DataFrame({
        "samples": g.size().astype("Int64"),
        "first": g["timestamp"].min(),
        "last": g["timestamp"].max(),
        "gpu_util_mean": g["utilization_gpu"].mean().astype("Float64"),
        "gpu_util_max": g["utilization_gpu"].max().astype("Float64"),
        "mem_util_mean": g["utilization_memory"].mean().astype("Float64"),
        "mem_used_max_bytes": g["memory_used_bytes"].max().astype("Int64"),
        "mem_total_bytes": g["memory_total_bytes"].max().astype("Int64"),
        "power_mean_w": g["power_draw_w"].mean().astype("Float64"),
        "power_max_w": g["power_draw_w"].max().astype("Float64"),
    }).reset_index()
    return out.drop(columns=["_one"], errors="ignore")


#: A sampler file's name as the templates write it, ``<job name>-<job id>.gpu.csv``: the job id is the
#: ``$SLURM_JOB_ID`` (``1234``; array tasks have their own raw id) or ``$PBS_JOBID`` (``1234[7].server``).
JOB_ID_IN_NAME = re.compile(r"^(?:.*-)?(?P<job_id>\d+(?:_\d+)?(?:\[\d*\])?(?:\..+)?)$")
_SUFFIX = ".gpu.csv"


def job_id_from_name(path: str | os.PathLike[str], pattern: re.Pattern[str] = JOB_ID_IN_NAME) -> str | None:
    """The job id in a sampler file's name, ``None`` if none.

    ``train-1234.gpu.csv`` → ``1234``; ``lr0.1-run-4711_3.gpu.csv`` → ``4711_3``;
    ``train-1234[7].pbs01.gpu.csv`` → ``1234[7].pbs01``.
    """
    name = Path(path).name
    stem = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else Path(name).stem
    m = pattern.match(stem)
    return m.group("job_id") if m else None


def gpu_job_summary(files: Mapping[str, Source | Sequence[Source]] | Iterable[str | os.PathLike[str]], *,
                    tz: str | None = None) -> pd.DataFrame:
    """Per-job GPU summary over sampler files, to pass as ``gpu=`` to the efficiency report.

    Args:
        files: ``{job_id: path or list of paths}`` (:func:`find_gpu_files` returns this; a text
            value is read as file content), or paths whose names hold the job id
            (:func:`job_id_from_name`). Several files for one job (one per node) are combined.
        tz: Passed to :func:`read_gpu_samples`.

    Returns:
        One row per job: ``job_id`` (string), ``gpus_seen`` (distinct uuids, else file × index),
        ``samples``, ``gpu_util_mean`` (percent, mean over every sample of every GPU), ``gpu_util_max``,
        ``mem_util_mean``, ``gpu_mem_max_bytes`` (largest memory used on any one GPU), ``power_mean_w``.
        Files without samples give no row.
    """
    pairs: list[tuple[str | None, Source]] = []
    if isinstance(files, Mapping):
        for job_id, v in files.items():
            for one in (v if isinstance(v, (list, tuple)) else [v]):
                pairs.append((job_id, one))  # type: ignore[arg-type]
    else:
        pairs = [(job_id_from_name(p), Path(p)) for p in files]
    frames = []
    for n, (job_id, path) in enumerate(pairs):
        if job_id is None:
            continue
        try:
            s = read_gpu_samples(path, tz=tz)
        except (UnsafePathError, OSError) as exc:  # a FIFO, a device, a huge or unreadable file: not a sample
            why = exc.strerror if not isinstance(exc, UnsafePathError) and exc.strerror else str(exc)
            attach(pd.DataFrame(), [Skipped(None, "not read: " + why.replace(str(path), "it", 1), file=str(path))])
            continue
        if len(s):
            ident = s["uuid"] if "uuid" in s else s.get("gpu_index", pd.Series(0, index=s.index)).astype("string")
            s["_gpu"] = ident.astype("string") if "uuid" in s else f"{n}:" + ident.astype("string")
            frames.append(s.assign(job_id=str(job_id)))
    if not frames:
        return pd.DataFrame({
            "job_id": pd.Series([], dtype="string"), "gpus_seen": pd.Series([], dtype="Int64"),
            "samples": pd.Series([], dtype="Int64"), "gpu_util_mean": pd.Series([], dtype="Float64"),
            "gpu_util_max": pd.Series([], dtype="Float64"), "mem_util_mean": pd.Series([], dtype="Float64"),
            "gpu_mem_max_bytes": pd.Series([], dtype="Int64"), "power_mean_w": pd.Series([], dtype="Float64")})
    allf = pd.concat(frames, ignore_index=True)
    for c in ("utilization_gpu", "utilization_memory", "power_draw_w"):
        if c not in allf:
            allf[c] = pd.Series(pd.NA, index=allf.index, dtype="Float64")
    if "memory_used_bytes" not in allf:
        allf["memory_used_bytes"] = pd.Series(pd.NA, index=allf.index, dtype="Int64")
    g = allf.groupby("job_id", sort=True)
    out = pd.DataFrame({
        "gpus_seen": g["_gpu"].nunique().astype("Int64"),
        "samples": g.size().astype("Int64"),
        "gpu_util_mean": g["utilization_gpu"].mean().astype("Float64"),
        "gpu_util_max": g["utilization_gpu"].max().astype("Float64"),
        "mem_util_mean": g["utilization_memory"].mean().astype("Float64"),
        "gpu_mem_max_bytes": g["memory_used_bytes"].max().astype("Int64"),
        "power_mean_w": g["power_draw_w"].mean().astype("Float64"),
    }).reset_index()
    out["job_id"] = out["job_id"].astype("string")
    return out


def find_gpu_files(directory: str | os.PathLike[str], pattern: str = "*.gpu.csv") -> dict[str, list[Path]]:
    """Sampler files under ``directory`` (recursively), grouped by the job id in their names.

    Args:
        directory: Where the job logs are.
        pattern: Glob of sampler file names.

    Returns:
        ``{job_id: [paths]}`` (several paths when a job's files were split, e.g. per node); files
        without a job id in the name are skipped.
    """
    out: dict[str, list[Path]] = {}
    for p in sorted(Path(directory).rglob(pattern)):
        job = job_id_from_name(p)
        if job is not None:
            out.setdefault(job, []).append(p)
    return out
