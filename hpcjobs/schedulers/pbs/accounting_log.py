"""PBS Pro / Torque accounting logs: the line parser and the value grammar of their fields (no pandas).

* accounting lines ``MM/DD/YYYY HH:MM:SS;T;id;key=value key="quoted value" ...`` (OpenPBS ``src/server/accounting.c``);
* the values found in them (and in ``qstat`` output): sizes ``13378420kb``, durations
  ``4090:56:03``, epoch or ``ctime()`` times, ``select``/``nodes``/``exec_host`` specs.

Split out of :mod:`hpcjobs.schedulers.pbs.formats`, which re-exports every public name here (the ``qstat``
parsers there use the value helpers); :mod:`hpcjobs.accounting.sources.pbs` turns the records into the
accounting DataFrame.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo

from hpcjobs.skipped import Skipped
from hpcjobs.units import is_ascii_digits

# --------------------------------------------------------------------------- values

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)([bw]?)\s*$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}


def parse_size(value: object) -> int | None:
    """Bytes from a PBS size: ``30b``, ``13378420kb``, ``10GB``, ``2mw`` (words = 8 bytes); bare = bytes.

    Returns ``None`` for empty or unparseable values.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        return None
    n = int(m[1]) << _SHIFT[m[2].lower()]
    return n * 8 if m[3].lower() == "w" else n


def parse_duration(value: object) -> int | None:
    """Seconds from ``HH:MM:SS`` (hours unbounded: ``4090:56:03``), ``MM:SS`` or plain seconds."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    if not text:
        return None
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    if len(parts) > 3 or any(p < 0 for p in parts):
        return None
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return round(total)


def _resolve_tz(tz: tzinfo | str | None) -> tzinfo | None:
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def localize(naive: datetime, tz: tzinfo | str | None = None) -> datetime:
    """Interpret a naive local time in ``tz`` (``None`` = this machine's zone) and return it in UTC.

    Ambiguous wall times (the repeated hour when DST ends) resolve to the first occurrence.
    """
    zone = _resolve_tz(tz)
    if zone is None:
        return naive.astimezone(timezone.utc)
    return naive.replace(tzinfo=zone).astimezone(timezone.utc)


def parse_pbs_time(value: object, tz: tzinfo | str | None = None) -> datetime | None:
    """A UTC datetime from an epoch (``1743440355``, as in JSON/XML/accounting) or a C ``ctime()``
    string (``Tue Oct  4 21:23:20 2022``, printed by qstat in the client's local time zone ``tz``).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc) if value > 0 else None
    text = str(value).strip()
    if is_ascii_digits(text):
        n = int(text)
        return datetime.fromtimestamp(n, tz=timezone.utc) if n > 0 else None
    try:
        naive = datetime.strptime(text, "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return localize(naive, tz)


def parse_select(select: str) -> list[dict[str, str | int]]:
    """Chunks of ``2:ncpus=8:mem=16gb+1:ncpus=4`` → ``[{"count": 2, "ncpus": "8", "mem": "16gb"}, ...]``."""
    chunks: list[dict[str, str | int]] = []
    for part in str(select).split("+"):
        if not part.strip():
            continue
        chunk: dict[str, str | int] = {"count": 1}
        for i, item in enumerate(part.strip().split(":")):
            if "=" in item:
                k, v = item.split("=", 1)
                chunk[k] = v
            elif i == 0 and is_ascii_digits(item):
                chunk["count"] = int(item)
        chunks.append(chunk)
    return chunks


#: Names a GPU count goes by in ``select`` chunks, ``exec_vnode`` and ``nodes`` specs: PBS Pro's built-in
#: ``ngpus``, and the ``gpus``/``gpu`` custom resources some sites define (Torque's ``nodes`` spec has ``gpus``).
GPU_RESOURCES = ("ngpus", "gpus", "gpu")


def _gpu_count(resources: Mapping[str, str | int]) -> int | None:
    """The GPUs one chunk names, under the first of :data:`GPU_RESOURCES` it has; ``None`` if none."""
    for name in GPU_RESOURCES:
        if name in resources:
            return as_int(resources[name])
    return None


def select_totals(select: str) -> dict[str, int]:
    """Totals over a ``select`` spec: ``chunks``, ``ncpus``, ``ngpus``, ``mpiprocs`` and ``mem`` (bytes).

    Only resources some chunk names are returned (``chunks`` always). ``ngpus`` also counts chunks
    that spell it ``gpus=`` or ``gpu=`` (:data:`GPU_RESOURCES`).
    """
    totals: dict[str, int] = {"chunks": 0}
    for chunk in parse_select(select):
        n = int(chunk["count"])
        totals["chunks"] += n
        for res in ("ncpus", "ngpus", "mpiprocs", "mem"):
            if res == "ngpus":
                v = _gpu_count(chunk)
            elif res not in chunk:
                continue
            else:
                v = parse_size(chunk[res]) if res == "mem" else as_int(chunk[res])
            if v is not None:
                totals[res] = totals.get(res, 0) + n * v
    return totals


def exec_vnode_totals(exec_vnode: str) -> dict[str, int]:
    """Totals of PBS Pro's ``exec_vnode``, the resources each chunk got on each vnode.

    ``(n1:ncpus=2:ngpus=1:mem=4194304kb)+(n2:ncpus=4)``; a chunk spread over vnodes is written
    ``(vnA:ncpus=4+vnB:ncpus=4)``. Returns ``ncpus``, ``ngpus`` (any of :data:`GPU_RESOURCES`) and
    ``mem`` (bytes), only those some vnode names.
    """
    totals: dict[str, int] = {}
    for piece in str(exec_vnode).replace("(", "+").replace(")", "+").split("+"):
        items = piece.strip().split(":")
        if len(items) < 2:
            continue
        res: Mapping[str, str | int] = dict(i.split("=", 1) for i in items[1:] if "=" in i)
        for name, v in (("ncpus", as_int(res["ncpus"]) if "ncpus" in res else None), ("ngpus", _gpu_count(res)),
                        ("mem", parse_size(res["mem"]) if "mem" in res else None)):
            if v is not None:
                totals[name] = totals.get(name, 0) + v
    return totals


def parse_nodes_spec(spec: str) -> dict[str, int]:
    """Totals of a Torque/PBS ``nodes`` spec: ``4:ppn=24:gpus=2``, ``node1:ppn=2+node2:ppn=2``.

    The grammar (Torque ``qsub -l nodes``): ``{<node_count> | <hostname>}[:ppn=<ppn>][:gpus=<gpu>]
    [:<property>...][+ ...]``; ``gpu=`` is read as ``gpus=``, properties without ``=`` are ignored.

    Returns ``{"nodes": N, "cpus": sum(count*ppn), "gpus": sum(count*gpus)}`` (ppn defaults to 1).
    """
    nodes = cpus = gpus = 0
    for part in str(spec).split("+"):
        items = part.strip().split(":")
        if not items or not items[0]:
            continue
        count = int(items[0]) if is_ascii_digits(items[0]) else 1
        props: Mapping[str, str | int] = dict(i.split("=", 1) for i in items[1:] if "=" in i)
        nodes += count
        cpus += count * (as_int(props.get("ppn")) or 1)
        gpus += count * (_gpu_count(props) or 0)
    return {"nodes": nodes, "cpus": cpus, "gpus": gpus}


def parse_exec_host(exec_host: str) -> dict[str, int]:
    """Host → CPU slots from ``exec_host``: PBS ``c1/0*13+c2/0*13`` (``*C`` omitted when 1),
    Torque ``n1/0-23+n2/0-23``, ``h/0,1``, ``n404/2+n404/3`` (same host summed), in order of appearance.
    """
    hosts: dict[str, int] = {}
    for item in str(exec_host).split("+"):
        item = item.strip()
        if not item:
            continue
        host, _, spec = item.partition("/")
        if "*" in spec:
            n = as_int(spec.split("*", 1)[1]) or 1
        else:
            n = 0
            for piece in spec.split(","):
                lo, _, hi = piece.partition("-")
                n += (int(hi) - int(lo) + 1) if is_ascii_digits(hi) and is_ascii_digits(lo) else 1
            n = max(n, 1)
        hosts[host] = hosts.get(host, 0) + n
    return hosts


def as_int(value: object) -> int | None:
    """An int from an int or decimal text, else ``None``."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def as_text(value: object) -> str | None:
    """A scalar attribute as text (JSON may have inferred a number for a numeric job name)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------- accounting lines

_ACCT_LINE_RE = re.compile(r"^(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2});([A-Za-z]);([^;]*);(.*)$")
_KV_RE = re.compile(r"""([^\s=]+)=("[^"]*"|'[^']*'|\S*)""")


@dataclass(frozen=True)
class AccountingRecord:
    """One accounting log line.

    Attributes:
        time: The record's time stamp as written: naive, in the server's local time.
        record_type: ``Q S s E R D A M a ...`` (OpenPBS ``src/include/acct.h``).
        job_id: The id field (a job, array, subjob or reservation id, or ``license``).
        message: The raw message.
        attrs: ``key=value`` pairs of the message, quotes removed.
    """

    time: datetime
    record_type: str
    job_id: str
    message: str
    attrs: dict[str, str] = field(default_factory=dict)
    line: int | None = None


#: A job id as accounting logs write it: ``1234``, ``1234.srv``, ``1234[].srv``, ``1234[7].srv``, where the
#: server part may hold any character but white space (brackets, ``@``...; a trailing ``@host`` is kept in it).
_ACCT_JOB_ID_RE = re.compile(r"^(?P<seq>\d+)(?:\[(?P<idx>\d*)\])?(?:\.(?P<server>\S+))?$")


def accounting_job_id(text: str) -> tuple[int, int | None, bool, str | None] | None:
    """``(sequence, index, is_array, server)`` of an accounting log's job id, ``None`` when it is not one.

    Wider than :func:`hpcjobs.schedulers.pbs.formats.parse_job_id`: whatever the server name holds, the id is read
    (the server is the text after the first ``.`` that follows the number and array index).
    """
    m = _ACCT_JOB_ID_RE.match(text.strip())
    if not m:
        return None
    idx = m["idx"]
    return int(m["seq"]), int(idx) if idx else None, idx == "", m["server"]


def parse_accounting_line(line: str, number: int | None = None) -> AccountingRecord | None:
    """Parse ``MM/DD/YYYY HH:MM:SS;T;id;key=value key="quoted value" ...``; ``None`` if not a record.

    The message is split at most three ``;`` deep (it may hold ``;``), then tokenised so that
    ``key="a b"`` and ``key='a "b"'`` keep their spaces.
    """
    m = _ACCT_LINE_RE.match(line.rstrip("\r\n"))
    if not m:
        return None
    mo, d, y, hh, mi, ss = (int(m[i]) for i in range(1, 7))
    try:
        when = datetime(y, mo, d, hh, mi, ss)
    except ValueError:
        return None
    message = m[9]
    attrs = {}
    for kv in _KV_RE.finditer(message):
        v = kv[2]
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        attrs[kv[1]] = v
    return AccountingRecord(when, m[7], m[8], message, attrs, number)


def iter_accounting_records(lines: Iterable[str], skipped: list[Skipped] | None = None) -> Iterable[AccountingRecord]:
    """The records of an accounting log (with their 1-based line numbers).

    Args:
        lines: The log's lines.
        skipped: Where to list the lines that are not blank and not records (``None``: not listed).
    """
    for number, line in enumerate(lines, 1):
        rec = parse_accounting_line(line, number)
        if rec is not None:
            yield rec
        elif skipped is not None and line.strip():
            skipped.append(Skipped(number, "not an accounting record", line.strip()))
