"""Pure parsers for PBS Pro / OpenPBS command output and accounting logs (no pandas).

Formats follow the OpenPBS sources (``src/cmds/qstat.c``, ``src/server/accounting.c``) and real
output, including captures from an OpenPBS 23.06 server in ``tests/data/pbs/openpbs-real``:

* job ids ``1234.server``, arrays ``1234[].server``, subjobs ``1234[7].server``, bare ``1234``;
* ``qstat -f`` text (TAB or 8-space continuation lines joined with no separator, raw-newline values);
* ``qstat -f -F json`` (``Jobs`` absent when empty, numbers inferred, invalid JSON from old servers);
* ``Exit_status`` conventions (0, 1-255, 256+signal, negative ``JOB_EXEC_*`` codes).

The accounting line parser and the value helpers (sizes, durations, times, resource specs) live in
:mod:`hpcjobs.schedulers.pbs.accounting_log`, the ``qstat``/``qdel`` error classification in
:mod:`hpcjobs.schedulers.pbs.errors`; both are re-exported here.

Torque shares most of this; :mod:`hpcjobs.schedulers.pbs.torque` adds what differs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpcjobs import states
from hpcjobs.errors import SchedulerOutputError, excerpt
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.parsing import lines_from_end
from hpcjobs.schedulers.pbs.accounting_log import GPU_RESOURCES as GPU_RESOURCES
from hpcjobs.schedulers.pbs.accounting_log import AccountingRecord as AccountingRecord
from hpcjobs.schedulers.pbs.accounting_log import as_int as as_int
from hpcjobs.schedulers.pbs.accounting_log import as_text as as_text
from hpcjobs.schedulers.pbs.accounting_log import exec_vnode_totals as exec_vnode_totals
from hpcjobs.schedulers.pbs.accounting_log import iter_accounting_records as iter_accounting_records
from hpcjobs.schedulers.pbs.accounting_log import localize as localize
from hpcjobs.schedulers.pbs.accounting_log import parse_accounting_line as parse_accounting_line
from hpcjobs.schedulers.pbs.accounting_log import parse_duration as parse_duration
from hpcjobs.schedulers.pbs.accounting_log import parse_exec_host as parse_exec_host
from hpcjobs.schedulers.pbs.accounting_log import parse_nodes_spec as parse_nodes_spec
from hpcjobs.schedulers.pbs.accounting_log import parse_pbs_time as parse_pbs_time
from hpcjobs.schedulers.pbs.accounting_log import parse_select as parse_select
from hpcjobs.schedulers.pbs.accounting_log import parse_size as parse_size
from hpcjobs.schedulers.pbs.accounting_log import select_totals as select_totals
from hpcjobs.schedulers.pbs.errors import BAD_JOB_ID as BAD_JOB_ID
from hpcjobs.schedulers.pbs.errors import JOB_FINISHED as JOB_FINISHED
from hpcjobs.schedulers.pbs.errors import OTHER_ERROR as OTHER_ERROR
from hpcjobs.schedulers.pbs.errors import UNKNOWN_JOB as UNKNOWN_JOB
from hpcjobs.schedulers.pbs.errors import PbsCommandError as PbsCommandError
from hpcjobs.schedulers.pbs.errors import classify_error_line as classify_error_line
from hpcjobs.schedulers.pbs.errors import is_unknown_job_error as is_unknown_job_error
from hpcjobs.schedulers.pbs.errors import parse_error_lines as parse_error_lines
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
        raise SchedulerOutputError(f"not a PBS job id: {excerpt(job_id, 256)!r}")
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
    for line in lines_from_end(stdout):
        if _JOB_ID_RE.match(line):
            return line
    raise SchedulerOutputError(f"qsub printed no job id: {excerpt(stdout, 1024)!r}")


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
    ``Variable_List`` becomes a dict; every value is a string. Line rules (OpenPBS ``src/cmds/qstat.c`` ``prt_attr``):
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
    """Fix the known defects of pre-2023 PBS JSON (github.com/openpbs/openpbs/issues/1255): bare
    ``005``/``.123``/``123.``/``-00`` values (quoted as strings) and ``\\,``/``\\'`` escapes (unescaped)."""
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
        SchedulerOutputError: When the text is not JSON even after repair (fall back to ``qstat -f``), or its
            ``Jobs`` (or a job in it) is not an object.
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
        raise SchedulerOutputError(f"qstat JSON 'Jobs' is {type(jobs).__name__} {str(jobs)[:60]!r}, not an object")
    for job_id, attrs in jobs.items():
        if not isinstance(attrs, dict):
            raise SchedulerOutputError(f"qstat JSON Jobs[{job_id[:60]!r}] is {type(attrs).__name__} "
                                       f"{str(attrs)[:60]!r}, not a job object")
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
#: OpenPBS ``JOB_SUBSTATE_*`` of history jobs (src/include/job.h): 91 deleted by request, 92
#: finished, 93 failed (non-zero exit status or a resource limit kill).
_SUBSTATE_TERMINATED = 91
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
    """The normalised end state of a finished PBS job from its ``Exit_status`` (OpenPBS ``src/include/job.h``).

    * 0 → COMPLETED; 1-255 → FAILED (exit code kept; 128+N is a command killed inside the script);
    * 256+N → killed by signal N (exit code ``None``): SIGTERM/SIGKILL is TIMEOUT when the comment
      says ``exceeded resource walltime`` or the used walltime reached the limit (older servers kill
      at the limit with 271), otherwise CANCELLED (qdel); other signals FAILED;
    * negative → ``negative_codes`` (``-29`` TIMEOUT on OpenPBS 22.05+, ``-27``/``-26`` OUT_OF_MEMORY,
      rerun codes REQUEUED, others FAILED); the negative code is kept as the exit code.
    * ``None`` → CANCELLED if ``deleted`` (qdel'd before it ran), else UNKNOWN.

    A comment ``... and exceeded resource mem|vmem`` overrides to OUT_OF_MEMORY and ``walltime|cput``
    to TIMEOUT. ``deleted`` (an accounting D record, or ``substate`` 91) makes any non-negative
    status CANCELLED, the status kept as exit code or signal: a qdel'd OpenPBS 23.06 job whose
    script shell survives the SIGTERM of its command ends with ``Exit_status`` 143 (128+15), one
    whose top process dies of it with 271, and one deleted before it ran with none.

    Returns:
        ``(state, exit_code, exit_signal)``.
    """
    exceeded = _EXCEEDED_RE.search(comment or "")
    limit_hit = bool(
        walltime_used_s is not None and walltime_limit_s and walltime_used_s >= walltime_limit_s
    )
    if exit_status is None:
        return (states.CANCELLED if deleted else states.UNKNOWN, None, None)
    if deleted and exit_status >= 0 and not exceeded:
        if exit_status > 256:
            return (states.CANCELLED, None, exit_status - 256)
        return (states.CANCELLED, exit_status, 0)
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
    ``Exit_status`` (``exit_status`` on Torque), the comment and walltime used/limit. PBS Pro /
    OpenPBS sets ``substate`` 91 (``JOB_SUBSTATE_TERMINATED``) on a finished job only when a delete
    request ended it (``ji_terminated``, openpbs ``src/server/req_delete.c`` and
    ``svr_jobfunc.c``), so an F or X job in substate 91 counts as CANCELLED whatever its exit
    status (143, 271 or none on OpenPBS 23.06); a walltime kill is substate 93.
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
        deleted=letter in ("F", "X") and as_int(attrs.get("substate")) == _SUBSTATE_TERMINATED,
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
    """One ``qstat -E -x -f -F json -t <ids...>`` call for every job of a poll.

    ``-x`` includes finished (history) jobs, ``-t`` lists the subjobs of array parents given as
    ``1234[].srv``. ``-E`` makes qstat ask the server for all the ids in one request: without it
    qstat asks once per id and OpenPBS 23.06 prints only the first id's job in ``-F json`` (the
    ``Jobs`` object is created for the first answer only, ``display_statjob`` in ``src/cmds/qstat.c``);
    with it, ids the server does not know are left out (qstat exits non-zero with ``Unknown Job
    Id`` only when it knows none of them). Ids are passed as qsub printed them.

    Raises:
        ValueError: When ``job_ids`` is empty (qstat would list every job on the server).
    """
    if not job_ids:
        raise ValueError("qstat_status_argv needs at least one job id")
    return ["qstat", "-E", "-x", "-f", "-F", "json", "-t", "--", *job_ids]


def qstat_text_status_argv(job_ids: Sequence[str]) -> list[str]:
    """The ``qstat -x -f -t <ids...>`` fallback for servers whose JSON is broken.

    Raises:
        ValueError: When ``job_ids`` is empty.
    """
    if not job_ids:
        raise ValueError("qstat_text_status_argv needs at least one job id")
    return ["qstat", "-x", "-f", "-t", "--", *job_ids]


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
