"""Pure parsers for PBS Pro / OpenPBS command output and accounting logs (no pandas).

Formats follow ``shared/notes/pbs-formats.md`` and the real samples in ``shared/fixtures/pbspro``:

* job ids ``1234.server``, arrays ``1234[].server``, subjobs ``1234[7].server``, bare ``1234``;
* ``qstat -f`` text (TAB or 8-space continuation lines joined with no separator, raw-newline values);
* ``qstat -f -F json`` (``Jobs`` absent when empty, numbers inferred, invalid JSON from old servers);
* ``Exit_status`` conventions (0, 1-255, 256+signal, negative ``JOB_EXEC_*`` codes);
* accounting lines ``MM/DD/YYYY HH:MM:SS;T;id;key=value key="quoted value" ...``.

Torque shares most of this; :mod:`hpcjobs.formats.torque` adds what differs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from hpcjobs import states
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.states import parse_job_tag

# --------------------------------------------------------------------------- job ids

_JOB_ID_RE = re.compile(r"^(?P<seq>\d+)(?:\[(?P<idx>\d*)\])?(?:\.(?P<server>[^\s@\[\]]+))?(?:@\S+)?$")


@dataclass(frozen=True)
class PbsJobId:
    """A parsed PBS/Torque job id.

    Attributes:
        sequence: The sequence number (``1234``).
        index: The subjob index for ``1234[7].srv``, else ``None``.
        is_array: True for an array parent ``1234[].srv``.
        server: The server suffix as printed (may differ from the host name), or ``None``.
    """

    sequence: int
    index: int | None = None
    is_array: bool = False
    server: str | None = None

    @property
    def key(self) -> tuple[int, int | None, bool]:
        """What identifies the job regardless of the server suffix."""
        return (self.sequence, self.index, self.is_array)

    @property
    def parent(self) -> str | None:
        """The array parent id (``1234[].srv``) of a subjob, else ``None``."""
        if self.index is None:
            return None
        return f"{self.sequence}[]" + (f".{self.server}" if self.server else "")

    @property
    def raw_id(self) -> str:
        """The id without server: ``1234``, ``1234[]`` or ``1234[7]``."""
        if self.is_array:
            return f"{self.sequence}[]"
        if self.index is not None:
            return f"{self.sequence}[{self.index}]"
        return str(self.sequence)


def parse_job_id(job_id: str) -> PbsJobId:
    """Parse ``1234``, ``1234.srv``, ``1234[].srv``, ``1234[7].srv`` (an ``@server`` suffix is ignored).

    Raises:
        SchedulerOutputError: When ``job_id`` is not a PBS job id.
    """
    m = _JOB_ID_RE.match(job_id.strip())
    if not m:
        raise SchedulerOutputError(f"not a PBS job id: {job_id!r}")
    idx = m["idx"]
    return PbsJobId(
        sequence=int(m["seq"]),
        index=int(idx) if idx else None,
        is_array=idx == "",
        server=m["server"],
    )


def is_job_id(text: str) -> bool:
    """True when ``text`` has the shape of a PBS/Torque job id."""
    return bool(_JOB_ID_RE.match(text.strip()))


def same_job(a: str, b: str) -> bool:
    """True when two ids name the same job: same sequence number and array index, any server suffix."""
    try:
        return parse_job_id(a).key == parse_job_id(b).key
    except SchedulerOutputError:
        return False


def match_job_ids(wanted: Iterable[str], found: Iterable[str]) -> dict[str, str]:
    """Map each id in ``wanted`` to the id qstat printed for the same job (server suffix ignored)."""
    by_key: dict[tuple[int, int | None, bool], str] = {}
    for f in found:
        try:
            by_key.setdefault(parse_job_id(f).key, f)
        except SchedulerOutputError:
            continue
    out = {}
    for w in wanted:
        try:
            k = parse_job_id(w).key
        except SchedulerOutputError:
            continue
        if k in by_key:
            out[w] = by_key[k]
    return out


def parse_qsub_output(stdout: str) -> str:
    """The job id ``qsub`` printed (``1234.srv`` or ``1234[].srv`` followed by a newline).

    Raises:
        SchedulerOutputError: When no line of ``stdout`` is a job id.
    """
    for line in reversed(stdout.strip().splitlines()):
        if _JOB_ID_RE.match(line.strip()):
            return line.strip()
    raise SchedulerOutputError(f"qsub printed no job id: {stdout!r}")


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
    if text.isdigit():
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
            elif i == 0 and item.isdigit():
                chunk["count"] = int(item)
        chunks.append(chunk)
    return chunks


def select_totals(select: str) -> dict[str, int]:
    """Totals over a ``select`` spec: ``chunks``, ``ncpus``, ``ngpus``, ``mpiprocs`` and ``mem`` (bytes).

    Only resources some chunk names are returned (``chunks`` always).
    """
    totals: dict[str, int] = {"chunks": 0}
    for chunk in parse_select(select):
        n = int(chunk["count"])
        totals["chunks"] += n
        for res in ("ncpus", "ngpus", "mpiprocs", "mem"):
            if res in chunk:
                v = parse_size(chunk[res]) if res == "mem" else as_int(chunk[res])
                if v is not None:
                    totals[res] = totals.get(res, 0) + n * v
    return totals


def parse_nodes_spec(spec: str) -> dict[str, int]:
    """Totals of a Torque/PBS ``nodes`` spec: ``4:ppn=24:gpus=2``, ``node1:ppn=2+node2:ppn=2``.

    Returns ``{"nodes": N, "cpus": sum(count*ppn), "gpus": sum(count*gpus)}`` (ppn defaults to 1).
    """
    nodes = cpus = gpus = 0
    for part in str(spec).split("+"):
        items = part.strip().split(":")
        if not items or not items[0]:
            continue
        count = int(items[0]) if items[0].isdigit() else 1
        props = dict(i.split("=", 1) for i in items[1:] if "=" in i)
        nodes += count
        cpus += count * (as_int(props.get("ppn")) or 1)
        gpus += count * (as_int(props.get("gpus")) or 0)
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
                n += (int(hi) - int(lo) + 1) if hi.isdigit() and lo.isdigit() else 1
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


# --------------------------------------------------------------------------- qstat -f text

_JOB_HEADER_RE = re.compile(r"^Job Id:\s*(\S+)\s*$")
_ATTR_RE = re.compile(r"^    ([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)?) =(?: (.*))?$")


def split_variable_list(value: str) -> dict[str, str]:
    """``Variable_List`` text → dict: split on unescaped ``,`` and the first ``=``; ``\\,`` → ``,``.

    A piece without ``=`` (a comma inside an unescaped bash function body) is re-attached to the
    previous value with its comma.
    """
    out: dict[str, str] = {}
    last: str | None = None
    for piece in re.split(r"(?<!\\),", value):
        piece = piece.replace("\\,", ",")
        if "=" in piece:
            k, v = piece.split("=", 1)
            out[k] = v
            last = k
        elif last is not None:
            out[last] += "," + piece
    return out


def _nest(attrs: dict[str, Any], name: str, value: Any) -> None:
    if "." in name:
        top, sub = name.split(".", 1)
        nested = attrs.setdefault(top, {})
        if isinstance(nested, dict):
            nested[sub] = value
            return
    attrs[name] = value


def parse_qstat_full(text: str) -> dict[str, dict[str, Any]]:
    """Parse ``qstat -f`` text (PBS Pro and Torque) into ``{job_id: attributes}``, the JSON shape.

    ``name.resource = v`` attributes nest (``attrs["Resource_List"]["select"]``) and
    ``Variable_List`` becomes a dict; every value is a string. Line rules (notes §1.4):
    a line starting with TAB or 8 spaces continues the value and is joined with no separator
    (mid-token wraps); a blank line inside a block adds nothing unless unindented text follows it;
    an unindented line that is not ``Job Id:`` is a raw newline inside the value (Torque
    ``sched_hint``, bash functions) and is joined with ``\\n``.
    """
    jobs: dict[str, dict[str, Any]] = {}
    raw: list[tuple[str, list[str]]] = []  # (name, pieces) for the current job
    current: str | None = None
    pending_blank = False

    def flush() -> None:
        if current is None:
            return
        attrs: dict[str, Any] = {}
        for name, pieces in raw:
            value = "".join(pieces)
            _nest(attrs, name, split_variable_list(value) if name == "Variable_List" else value)
        jobs[current] = attrs

    for line in text.splitlines():
        header = _JOB_HEADER_RE.match(line)
        if header:
            flush()
            current, raw, pending_blank = header[1], [], False
            continue
        if current is None:
            continue
        if not line.strip():
            pending_blank = True
            continue
        attr = _ATTR_RE.match(line)
        if attr:
            raw.append((attr[1], [attr[2] or ""]))
            pending_blank = False
        elif not raw:
            continue
        elif line.startswith("\t"):
            raw[-1][1].append(line[1:])
            pending_blank = False
        elif line.startswith(" " * 8):
            raw[-1][1].append(line[8:])
            pending_blank = False
        else:
            raw[-1][1].append(("\n" if pending_blank else "") + "\n" + line)
            pending_blank = False
    flush()
    return jobs


# --------------------------------------------------------------------------- qstat -F json

_JSON_LINE_RE = re.compile(r'^(\s*"(?:[^"\\]|\\.)*"\s*:\s*)([^"{\[\s].*?)(\s*,?\s*)$')
_BAD_ESCAPE_RE = re.compile(r'\\(\\|[^"\\/bfnrtu])')


def _repair_json(text: str) -> str:
    """Fix the known defects of pre-2023 PBS JSON (notes §1.5): bare ``005``/``.123``/``123.``/``-00``
    values (quoted as strings) and ``\\,``/``\\'`` escapes (unescaped)."""
    lines = []
    for line in text.splitlines():
        m = _JSON_LINE_RE.match(line)
        if m:
            try:
                json.loads(m[2])
            except ValueError:
                line = m[1] + json.dumps(m[2]) + m[3]
        lines.append(_BAD_ESCAPE_RE.sub(lambda e: e[0] if e[1] == "\\" else e[1], line))
    return "\n".join(lines)


def parse_qstat_json(text: str) -> dict[str, Any]:
    """Parse ``qstat -f -F json`` output; the result always has a ``Jobs`` dict (empty when absent).

    Tolerates raw control characters in strings and the known invalid JSON of old servers.

    Raises:
        SchedulerOutputError: When the text is not JSON even after repair (fall back to ``qstat -f``).
    """
    if not text.strip():
        return {"Jobs": {}}
    try:
        doc = json.loads(text, strict=False)
    except ValueError:
        try:
            doc = json.loads(_repair_json(text), strict=False)
        except ValueError as exc:
            raise SchedulerOutputError(f"qstat printed invalid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise SchedulerOutputError("qstat JSON is not an object")
    jobs = doc.get("Jobs") or {}
    if not isinstance(jobs, dict):
        raise SchedulerOutputError("qstat JSON 'Jobs' is not an object")
    doc["Jobs"] = jobs
    return doc


# --------------------------------------------------------------------------- states and exit status

#: Non-final PBS ``job_state`` letters → normalised state. F and X (and Torque C) are derived
#: from the exit status by :func:`derive_final_state`.
PBS_STATE_MAP: dict[str, str] = {
    "Q": states.PENDING,
    "H": states.HELD,
    "W": states.PENDING,
    "T": states.PENDING,
    "R": states.RUNNING,
    "S": states.SUSPENDED,
    "U": states.SUSPENDED,
    "E": states.COMPLETING,
    "B": states.RUNNING,
    "M": states.UNKNOWN,
}
FINAL_LETTERS = frozenset({"F", "X", "C"})

_REQUEUE = states.REQUEUED
#: OpenPBS ``JOB_EXEC_*`` codes (src/include/job.h) → normalised state.
PBS_NEGATIVE_EXIT: dict[int, str] = {
    -1: states.FAILED, -2: states.FAILED, -3: _REQUEUE, -4: states.FAILED, -5: states.FAILED,
    -6: states.FAILED, -7: states.FAILED, -10: states.FAILED, -11: _REQUEUE, -12: states.PREEMPTED,
    -13: states.FAILED, -14: _REQUEUE, -15: _REQUEUE, -16: _REQUEUE, -17: states.FAILED,
    -18: _REQUEUE, -19: states.FAILED, -20: _REQUEUE, -21: states.FAILED, -22: states.FAILED,
    -23: states.FAILED, -24: states.FAILED, -25: states.FAILED, -26: states.OUT_OF_MEMORY,
    -27: states.OUT_OF_MEMORY, -28: states.TIMEOUT, -29: states.TIMEOUT, -30: _REQUEUE,
}

_EXCEEDED_RE = re.compile(r"exceeded resource (\w+)")
_SIGTERM, _SIGKILL = 15, 9


def derive_final_state(
    exit_status: int | None,
    *,
    comment: str | None = None,
    walltime_used_s: int | None = None,
    walltime_limit_s: int | None = None,
    deleted: bool = False,
    negative_codes: Mapping[int, str] = PBS_NEGATIVE_EXIT,
) -> tuple[str, int | None, int | None]:
    """The normalised end state of a finished PBS job from its ``Exit_status`` (notes §2.1).

    * 0 → COMPLETED; 1-255 → FAILED (exit code kept; 128+N is a command killed inside the script);
    * 256+N → killed by signal N (exit code ``None``): SIGTERM/SIGKILL is TIMEOUT when the comment
      says ``exceeded resource walltime`` or the used walltime reached the limit (older servers kill
      at the limit with 271), otherwise CANCELLED (qdel); other signals FAILED;
    * negative → ``negative_codes`` (``-29`` TIMEOUT on OpenPBS 22.05+, ``-27``/``-26`` OUT_OF_MEMORY,
      rerun codes REQUEUED, others FAILED); the negative code is kept as the exit code.
    * ``None`` → CANCELLED if ``deleted`` (qdel'd before it ran), else UNKNOWN.

    A comment ``... and exceeded resource mem|vmem`` overrides to OUT_OF_MEMORY and ``walltime|cput``
    to TIMEOUT; ``deleted`` (accounting D record) turns a signal kill into CANCELLED.

    Returns:
        ``(state, exit_code, exit_signal)``.
    """
    exceeded = _EXCEEDED_RE.search(comment or "")
    limit_hit = bool(
        walltime_used_s is not None and walltime_limit_s and walltime_used_s >= walltime_limit_s
    )
    if exit_status is None:
        return (states.CANCELLED if deleted else states.UNKNOWN, None, None)
    if exceeded and exit_status != 0:
        kind = exceeded[1]
        state = states.OUT_OF_MEMORY if kind in ("mem", "vmem") else (
            states.TIMEOUT if kind in ("walltime", "cput") else states.FAILED)
        return (state, None, exit_status - 256) if exit_status > 256 else (state, exit_status, None)
    if exit_status == 0:
        return (states.COMPLETED, 0, 0)
    if 0 < exit_status < 256:
        return (states.FAILED, exit_status, 0)
    if exit_status >= 256:
        sig = exit_status - 256
        if sig in (_SIGTERM, _SIGKILL):
            if limit_hit and not deleted:
                return (states.TIMEOUT, None, sig)
            return (states.CANCELLED, None, sig)
        return (states.CANCELLED if deleted else states.FAILED, None, sig)
    return (negative_codes.get(exit_status, states.FAILED), exit_status, None)


def _first(attrs: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        if attrs.get(n) not in (None, ""):
            return attrs[n]
    return None


def _sub(attrs: Mapping[str, Any], top: str, key: str) -> Any:
    nested = attrs.get(top)
    return nested.get(key) if isinstance(nested, Mapping) else None


def job_state_from_attrs(
    attrs: Mapping[str, Any],
    derive: Callable[..., tuple[str, int | None, int | None]] = derive_final_state,
) -> tuple[str, int | None, int | None]:
    """``(state, exit_code, exit_signal)`` of a job from its qstat attributes (JSON, text or XML).

    Non-final letters map through :data:`PBS_STATE_MAP`; F, X and C are derived from
    ``Exit_status`` (``exit_status`` on Torque), the comment and walltime used/limit. A finished job
    without an exit status that PBS marked ``substate`` 91 (terminated) counts as CANCELLED.
    """
    letter = str(attrs.get("job_state") or "").strip()
    if letter not in FINAL_LETTERS:
        return (PBS_STATE_MAP.get(letter, states.UNKNOWN), None, None)
    exit_status = as_int(_first(attrs, "Exit_status", "exit_status"))
    return derive(
        exit_status,
        comment=as_text(attrs.get("comment")),
        walltime_used_s=parse_duration(_sub(attrs, "resources_used", "walltime")),
        walltime_limit_s=parse_duration(_sub(attrs, "Resource_List", "walltime")),
        deleted=exit_status is None and as_int(attrs.get("substate")) == 91,
    )


def find_tag(attrs: Mapping[str, Any]) -> str | None:
    """The hpcjobs tag of a job, from its name or ``Variable_List`` ``HPCJOBS_TAG``, rendered."""
    variables = attrs.get("Variable_List")
    for text in (
        as_text(attrs.get("Job_Name")),
        as_text(variables.get("HPCJOBS_TAG")) if isinstance(variables, Mapping) else None,
    ):
        tag = parse_job_tag(text)
        if tag is not None:
            return tag.render()
    return None


def job_status_from_attrs(
    job_id: str,
    attrs: Mapping[str, Any],
    derive: Callable[..., tuple[str, int | None, int | None]] = derive_final_state,
) -> JobStatus:
    """One :class:`JobStatus` from a job's qstat attributes (any of the three shapes).

    ``reason`` is the PBS ``comment`` (``Not Running: ...``, ``Job run at ... and finished``);
    ``comment`` is the hpcjobs tag found by :func:`find_tag`, or ``None``. Subjobs get
    ``array_job_id``/``array_task_id`` from ``array_id``/``array_index`` (Torque ``job_array_id``)
    or from the id itself; an array parent ``1234[].srv`` is its own ``array_job_id``.
    """
    state, exit_code, exit_signal = job_state_from_attrs(attrs, derive)
    try:
        pid = parse_job_id(job_id)
    except SchedulerOutputError:
        pid = None
    array_job_id = as_text(attrs.get("array_id"))
    index = as_int(_first(attrs, "array_index", "job_array_id"))
    if pid is not None:
        if pid.index is not None:
            array_job_id = array_job_id or pid.parent
            index = pid.index if index is None else index
        elif pid.is_array:
            array_job_id, index = job_id, None
    pbs_comment = as_text(attrs.get("comment"))
    return JobStatus(
        job_id=job_id,
        state=state,
        state_raw=str(attrs.get("job_state") or ""),
        array_job_id=array_job_id,
        array_task_id=index,
        exit_code=exit_code,
        exit_signal=exit_signal,
        reason=pbs_comment,
        name=as_text(attrs.get("Job_Name")),
        comment=find_tag(attrs),
    )


def qstat_status_argv(job_ids: Sequence[str]) -> list[str]:
    """One ``qstat -x -f -F json -t <ids...>`` call for every job of a poll.

    ``-x`` includes finished (history) jobs, ``-t`` lists the subjobs of array parents given as
    ``1234[].srv``. Ids are passed as qsub printed them (qstat reports the others when one is
    unknown, exits non-zero and names it on stderr, see :func:`classify_error_line`).

    Raises:
        ValueError: When ``job_ids`` is empty (qstat would list every job on the server).
    """
    if not job_ids:
        raise ValueError("qstat_status_argv needs at least one job id")
    return ["qstat", "-x", "-f", "-F", "json", "-t", *job_ids]


def qstat_text_status_argv(job_ids: Sequence[str]) -> list[str]:
    """The ``qstat -x -f -t <ids...>`` fallback for servers whose JSON is broken.

    Raises:
        ValueError: When ``job_ids`` is empty.
    """
    if not job_ids:
        raise ValueError("qstat_text_status_argv needs at least one job id")
    return ["qstat", "-x", "-f", "-t", *job_ids]


def parse_qstat_json_status(stdout: str) -> list[JobStatus]:
    """Job statuses from ``qstat -x -f -F json -t`` output (empty list when ``Jobs`` is absent).

    Raises:
        SchedulerOutputError: When the output is not (repairable) JSON.
    """
    jobs = parse_qstat_json(stdout)["Jobs"]
    return [job_status_from_attrs(jid, attrs) for jid, attrs in jobs.items() if isinstance(attrs, dict)]


def parse_qstat_text_status(stdout: str) -> list[JobStatus]:
    """Job statuses from ``qstat -x -f -t`` text output."""
    return [job_status_from_attrs(jid, attrs) for jid, attrs in parse_qstat_full(stdout).items()]


# --------------------------------------------------------------------------- qstat / qdel errors

UNKNOWN_JOB = "unknown_job"
JOB_FINISHED = "job_finished"
BAD_JOB_ID = "bad_job_id"
OTHER_ERROR = "other"

_ERROR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (UNKNOWN_JOB, re.compile(r"^\w+: Unknown Job Id(?: Error)? (?P<id>\S+)\s*$")),
    (JOB_FINISHED, re.compile(r"^\w+: (?P<id>\S+) Job has finished, use -x or -H")),
    (BAD_JOB_ID, re.compile(r"^\w+: illegally formed job identifier: (?P<id>\S+)\s*$")),
)


@dataclass(frozen=True)
class PbsCommandError:
    """One error line of ``qstat``/``qdel``: its kind (``unknown_job``, ``job_finished``, ``bad_job_id``
    or ``other``), the job id it names, and the line itself."""

    kind: str
    job_id: str | None
    line: str


def classify_error_line(line: str) -> PbsCommandError:
    """Classify one stderr line: ``qstat: Unknown Job Id 123.srv`` (Torque: ``... Id Error 123.srv``),
    ``qstat: 123.srv Job has finished, use -x or -H ...``, ``qdel: illegally formed job identifier: x``."""
    text = line.strip()
    for kind, pattern in _ERROR_PATTERNS:
        m = pattern.match(text)
        if m:
            return PbsCommandError(kind, m["id"], text)
    return PbsCommandError(OTHER_ERROR, None, text)


def parse_error_lines(stderr: str) -> list[PbsCommandError]:
    """Every non-empty stderr line, classified."""
    return [classify_error_line(line) for line in stderr.splitlines() if line.strip()]


def is_unknown_job_error(stderr: str) -> bool:
    """True when stderr holds only "unknown job" errors (the jobs are gone; nothing else went wrong)."""
    errors = parse_error_lines(stderr)
    return bool(errors) and all(e.kind == UNKNOWN_JOB for e in errors)


# --------------------------------------------------------------------------- accounting lines

_ACCT_LINE_RE = re.compile(r"^(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2});([A-Za-z]);([^;]*);(.*)$")
_KV_RE = re.compile(r"""([^\s=]+)=("[^"]*"|'[^']*'|\S*)""")


@dataclass(frozen=True)
class AccountingRecord:
    """One accounting log line.

    Attributes:
        time: The record's time stamp as written: naive, in the server's local time.
        record_type: ``Q S s E R D A M a ...`` (notes §3.1).
        job_id: The id field (a job, array, subjob or reservation id, or ``license``).
        message: The raw message.
        attrs: ``key=value`` pairs of the message, quotes removed.
    """

    time: datetime
    record_type: str
    job_id: str
    message: str
    attrs: dict[str, str] = field(default_factory=dict)


def parse_accounting_line(line: str) -> AccountingRecord | None:
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
    return AccountingRecord(when, m[7], m[8], message, attrs)


def iter_accounting_records(lines: Iterable[str]) -> Iterable[AccountingRecord]:
    """The records of an accounting log, skipping lines that are not records."""
    for line in lines:
        rec = parse_accounting_line(line)
        if rec is not None:
            yield rec
