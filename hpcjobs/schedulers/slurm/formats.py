"""Pure parsers for Slurm's text output: states, job ids, exit codes, durations, memory, TRES.

Pandas-free on purpose: the status poller on a login node imports this module.
Formats follow ``sacct.1``/``squeue.1`` and the real outputs in ``tests/data/slurm``
(see the sacct man page). Every parser of a single value is
total on odd input: unknown states map to ``UNKNOWN`` and unparsable values to
``None``; only structurally broken ids raise :class:`~hpcjobs.errors.SchedulerOutputError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hpcjobs import states as st
from hpcjobs.errors import SchedulerOutputError, excerpt
from hpcjobs.schedulers.base import ClusterLimits, JobStatus
from hpcjobs.schedulers.parsing import lines_from_end
from hpcjobs.units import is_ascii_digits

# ---------------------------------------------------------------------------
# States

#: Slurm state name or squeue/sacct abbreviation → normalised state.
#: Long names from ``job_state_string()``, short ones from ``job_state_string_compact()``.
SLURM_STATE_MAP: dict[str, str] = {
    "PENDING": st.PENDING, "PD": st.PENDING,
    "RUNNING": st.RUNNING, "R": st.RUNNING,
    "SUSPENDED": st.SUSPENDED, "S": st.SUSPENDED,
    "COMPLETE": st.COMPLETED, "COMPLETED": st.COMPLETED, "CD": st.COMPLETED,
    "CANCELLED": st.CANCELLED, "CA": st.CANCELLED,
    "FAILED": st.FAILED, "F": st.FAILED,
    "TIMEOUT": st.TIMEOUT, "TO": st.TIMEOUT,
    "NODE_FAIL": st.NODE_FAIL, "NF": st.NODE_FAIL,
    "PREEMPTED": st.PREEMPTED, "PR": st.PREEMPTED,
    "BOOT_FAIL": st.BOOT_FAIL, "BF": st.BOOT_FAIL,
    "DEADLINE": st.DEADLINE, "DL": st.DEADLINE,
    "OUT_OF_MEMORY": st.OUT_OF_MEMORY, "OOM": st.OUT_OF_MEMORY,
    "REQUEUED": st.REQUEUED, "RQ": st.REQUEUED,
    "REQUEUE_FED": st.REQUEUED, "RF": st.REQUEUED,
    "REQUEUE_HOLD": st.HELD, "RH": st.HELD,
    "SPECIAL_EXIT": st.HELD, "SE": st.HELD,  # requeued held after the special exit code
    "RESV_DEL_HOLD": st.HELD, "RD": st.HELD,
    "COMPLETING": st.COMPLETING, "CG": st.COMPLETING,
    "STAGE_OUT": st.COMPLETING, "SO": st.COMPLETING,
    # Nodes allocated and booting / being configured: the job holds its resources.
    "CONFIGURING": st.RUNNING, "CF": st.RUNNING,
    "RESIZING": st.RUNNING, "RS": st.RUNNING,
    "SIGNALING": st.RUNNING, "SI": st.RUNNING,
    "POWER_UP_NODE": st.RUNNING, "PU": st.RUNNING,
    "STOPPED": st.SUSPENDED, "ST": st.SUSPENDED,
    # A federated sibling revoked because another cluster runs the job: it will not run here.
    "REVOKED": st.CANCELLED, "RV": st.CANCELLED,
}

_LONG_STATE_NAMES = tuple(k for k in SLURM_STATE_MAP if len(k) > 3)
_HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")


def normalize_state(raw: str | None, reason: str | None = None) -> str:
    """Map a Slurm state text to a name from :mod:`hpcjobs.states`.

    Accepts long names (``COMPLETED``), abbreviations (``CD``), ``CANCELLED by 123``,
    the fixed-width truncation (``CANCELLED+``, ``OUT_OF_ME+``) and any case.

    Args:
        raw: The state as sacct/squeue printed it.
        reason: The pending reason, if known; ``JobHeldUser``/``JobHeldAdmin`` turn PENDING into HELD.

    Returns:
        The normalised state; ``UNKNOWN`` for anything unrecognised (never raises).
    """
    if not raw:
        return st.UNKNOWN
    token = raw.strip().split(" ", 1)[0].upper()
    truncated = token.endswith("+")
    token = token.rstrip("+")
    state = SLURM_STATE_MAP.get(token)
    if state is None and truncated and len(token) >= 3:
        matches = {SLURM_STATE_MAP[name] for name in _LONG_STATE_NAMES if name.startswith(token)}
        state = matches.pop() if len(matches) == 1 else None
    if state is None:
        return st.UNKNOWN
    if state == st.PENDING and reason and reason.startswith(_HELD_REASONS):
        return st.HELD
    return state


# ---------------------------------------------------------------------------
# Job ids

_JOB_ID_RE = re.compile(
    r"^(?P<job>(?P<base>\d+)"
    r"(?:_(?:(?P<task>\d+)|\[(?P<spec>[^\]]+)\]))?"
    r"(?:\+(?P<het>\d+))?)"
    r"(?:\.(?P<step>[^.\s]+))?$"
)


@dataclass(frozen=True)
class SlurmJobId:
    """A Slurm JobID taken apart.

    Attributes:
        job_id: The job or array-task part without the step (``123``, ``123_4``, ``123_[5-9%2]``, ``123+1``).
        base_id: The leading number (array job id for array tasks, het leader for het components).
        array_task_id: The array index, if this is one array task.
        array_task_spec: The index range of a collapsed pending array record (``5-9%2``).
        het_offset: Heterogeneous-job component offset (``123+1`` → 1).
        step: Step name (``batch``, ``extern``, ``interactive``, ``0``), ``None`` for the job itself.
    """

    job_id: str
    base_id: str
    array_task_id: int | None = None
    array_task_spec: str | None = None
    het_offset: int | None = None
    step: str | None = None

    @property
    def is_step(self) -> bool:
        """True for a step row (``123.batch``), false for a job/array-task row."""
        return self.step is not None

    @property
    def is_array(self) -> bool:
        """True for an array task or a collapsed pending array range."""
        return self.array_task_id is not None or self.array_task_spec is not None


def parse_job_id(text: str) -> SlurmJobId:
    """Take a Slurm JobID apart (``123``, ``123_4``, ``123_[9-11,13]``, ``123+1.0``, ``123.batch``).

    Args:
        text: The JobID as sacct or squeue prints it.

    Returns:
        The parts of the id.

    Raises:
        SchedulerOutputError: ``text`` is not a Slurm job id.
    """
    m = _JOB_ID_RE.match(text.strip())
    if not m:
        raise SchedulerOutputError(f"not a Slurm job id: {excerpt(text, 256)!r}")
    task, het = m["task"], m["het"]
    return SlurmJobId(
        job_id=m["job"],
        base_id=m["base"],
        array_task_id=int(task) if task is not None else None,
        array_task_spec=m["spec"],
        het_offset=int(het) if het is not None else None,
        step=m["step"],
    )


def parse_submit_output(stdout: str) -> tuple[str, str | None]:
    """The job id (and cluster) printed by ``sbatch --parsable``: ``123`` or ``123;cluster``.

    Args:
        stdout: sbatch's standard output; the last non-empty line is used.

    Returns:
        ``(job_id, cluster)``, cluster ``None`` when not printed.

    Raises:
        SchedulerOutputError: No job id in the output.
    """
    last = next(lines_from_end(stdout), None)
    if last is None:
        raise SchedulerOutputError("sbatch printed no job id")
    job_id, _, cluster = last.partition(";")
    if not is_ascii_digits(job_id):
        raise SchedulerOutputError(f"sbatch --parsable printed {excerpt(last, 256)!r}, expected <id>[;<cluster>]")
    return job_id, cluster or None


# ---------------------------------------------------------------------------
# Exit codes, durations, memory

#: Signal number Slurm reports for an out-of-memory kill: ``0:125`` (SIG_OOM 253 − 128).
OOM_SIGNAL = 125


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """Split an ExitCode ``code:signal`` (``1:0``, ``0:15``; ``0:125`` means out of memory).

    Returns:
        ``(exit_code, signal)``; ``(None, None)`` when empty or malformed.
    """
    if not text:
        return None, None
    code, sep, sig = text.strip().partition(":")
    if not is_ascii_digits(code) or (sep and not is_ascii_digits(sig)):
        return None, None
    return int(code), int(sig) if sep else 0


_DURATION_RE = re.compile(r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d*)?)$")
_DAYS_HOURS_RE = re.compile(r"^(?P<d>\d+)-(?P<h>\d+)$")


def parse_duration(text: str | None) -> float | None:
    """Seconds in a Slurm duration ``[D-][HH:]MM:SS[.mmm]`` (also ``D-HH``).

    Returns:
        Seconds as a float; ``None`` for empty, ``UNLIMITED``, ``Partition_Limit``, ``INVALID``
        or anything else that is not a duration.
    """
    if not text:
        return None
    s = text.strip()
    m = _DURATION_RE.match(s)
    if m:
        days = int(m["d"] or 0)
        hours = int(m["h"] or 0)
        return days * 86400 + hours * 3600 + int(m["m"]) * 60 + float(m["s"])
    m = _DAYS_HOURS_RE.match(s)
    if m:
        return int(m["d"]) * 86400 + int(m["h"]) * 3600.0
    return None


_MEM_RE = re.compile(r"^(?P<n>\d+(?:\.\d*)?)(?P<u>[KMGTPE]?)(?P<per>[cn]?)$")
UNIT_FACTORS: dict[str, int] = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5,
                                "E": 1024**6}


@dataclass(frozen=True)
class Memory:
    """A memory amount read from sacct.

    Attributes:
        bytes: The amount in bytes (powers of 1024 for K/M/G/T), ``None`` if unknown.
        per: ``"cpu"`` or ``"node"`` for old-style ReqMem (``3000Mc``/``48000Mn``), else ``None``
            (whole job for ReqMem since 21.08, per task for MaxRSS).
    """

    bytes: int | None
    per: str | None = None


def parse_memory(text: str | None) -> Memory:
    """Parse ``1294440K``, ``16G``, ``0``, ``891.26M``, ``3000Mc``/``48000Mn``; ``16?``/junk → unknown.

    A number without a unit is taken as bytes (``0``, the ``fs/disk`` TRES).
    """
    if not text:
        return Memory(None)
    m = _MEM_RE.match(text.strip())
    if not m:
        return Memory(None)
    value = round(float(m["n"]) * UNIT_FACTORS[m["u"]])
    per = {"c": "cpu", "n": "node"}.get(m["per"])
    return Memory(value, per)


# ---------------------------------------------------------------------------
# TRES


def parse_tres(text: str | None) -> dict[str, str]:
    """``billing=8,cpu=8,gres/gpu:a100=2,mem=64G`` → ``{"billing": "8", "cpu": "8", ...}`` (values raw)."""
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key:
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class TresSummary:
    """The TRES amounts hpcjobs reports.

    Attributes:
        cpus: ``cpu=``.
        mem_bytes: ``mem=`` in bytes.
        nodes: ``node=``.
        gpus: ``gres/gpu=`` or, failing that, the sum of ``gres/gpu:<type>=``.
        gpu_type: The GPU model(s) named in ``gres/gpu:<type>`` keys, comma-joined, sorted.
        billing: ``billing=``.
    """

    cpus: int | None = None
    mem_bytes: int | None = None
    nodes: int | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    billing: int | None = None


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and is_ascii_digits(text) else None


def summarize_tres(tres: str | Mapping[str, str] | None) -> TresSummary:
    """Extract CPUs, memory, nodes, GPUs (count and type) and billing from a TRES string or dict.

    ``gres/gpumem`` and ``gres/gpuutil`` (usage TRES) are not GPUs and are ignored.
    """
    d = parse_tres(tres) if isinstance(tres, str) or tres is None else dict(tres)
    typed = {k[len("gres/gpu:"):]: v for k, v in d.items() if k.startswith("gres/gpu:")}
    gpus = _int_or_none(d.get("gres/gpu"))
    if gpus is None and typed:
        counts = [_int_or_none(v) for v in typed.values()]
        gpus = sum(c for c in counts if c is not None)
    gpu_type = ",".join(sorted(typed)) or None
    return TresSummary(
        cpus=_int_or_none(d.get("cpu")),
        mem_bytes=parse_memory(d.get("mem")).bytes,
        nodes=_int_or_none(d.get("node")),
        gpus=gpus,
        gpu_type=gpu_type,
        billing=_int_or_none(d.get("billing")),
    )


# ---------------------------------------------------------------------------
# Status polling: one sacct call, squeue as the fallback

#: sacct fields for status polls; Comment last because it is free text (may hold ``|``).
SACCT_STATUS_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "State", "ExitCode", "Reason", "JobName", "Comment",
)


def _check_ids(job_ids: Iterable[str]) -> list[str]:
    ids = [str(j).strip() for j in job_ids]
    if not ids:
        raise ValueError("no job ids given")
    for j in ids:
        parse_job_id(j)  # raises on anything that is not a Slurm id
    return ids


def sacct_status_argv(job_ids: Sequence[str]) -> list[str]:
    """One ``sacct`` command reporting every job in ``job_ids`` (array ids include all their tasks).

    No ``-X``: step rows come too and annotate ``reason`` of failed jobs. No ``--duplicates``:
    sacct then shows only the newest record of a requeued job, which is its current state.
    No ``--array``: pending array tasks stay collapsed in one ``123_[5-9%2]`` record.
    With ``-j`` sacct searches from the epoch, so old jobs are found without ``-S``.

    Raises:
        ValueError: No ids, or an id that is not a Slurm job id.
    """
    ids = _check_ids(job_ids)
    return ["sacct", "--noheader", "--parsable2", "--format=" + ",".join(SACCT_STATUS_FIELDS),
            "--jobs=" + ",".join(ids)]


def _split_fields(line: str, n: int) -> list[str]:
    parts = line.split("|")
    if len(parts) > n:  # a '|' inside the last (free-text) field
        parts = [*parts[: n - 1], "|".join(parts[n - 1:])]
    return parts + [""] * (n - len(parts))


def _none_if_blank(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "None", "(null)", "N/A") else text


def parse_sacct_status(stdout: str) -> list[JobStatus]:
    """Parse the output of :func:`sacct_status_argv` into one record per job or array task.

    Step rows are not returned; when a job ended badly and sacct gives no reason, the first step
    whose exit code or state explains it (``batch CANCELLED 0:15``, ``0 OUT_OF_MEMORY 0:125``)
    becomes the record's ``reason``. A job id seen twice keeps its last record.

    Raises:
        SchedulerOutputError: A line whose JobID is not a Slurm job id.
    """
    n = len(SACCT_STATUS_FIELDS)
    jobs: dict[str, dict[str, str | None]] = {}
    notes: dict[str, str] = {}
    for line in stdout.splitlines():
        if not line.strip():
            continue
        job_id, _raw, state_raw, exit_text, reason, name, comment = _split_fields(line, n)
        jid = parse_job_id(job_id)
        if jid.is_step:
            code, sig = parse_exit_code(exit_text)
            step_state = normalize_state(state_raw)
            if jid.job_id not in notes and (code or sig or step_state not in (st.COMPLETED, st.RUNNING)):
                notes[jid.job_id] = f"{jid.step} {state_raw} {exit_text}".strip()
            continue
        jobs[jid.job_id] = {"state": state_raw, "exit": exit_text, "reason": reason, "name": name,
                            "comment": comment}
    out = []
    for job_id, rec in jobs.items():
        jid = parse_job_id(job_id)
        why = _none_if_blank(rec["reason"] or "")
        state = normalize_state(rec["state"], why)
        if why is None and state in st.FAILURE_STATES:
            why = notes.get(job_id)
        code, sig = parse_exit_code(rec["exit"])
        out.append(JobStatus(
            job_id=job_id, state=state, state_raw=rec["state"] or "",
            array_job_id=jid.base_id if jid.is_array else None,
            array_task_id=jid.array_task_id, array_task_spec=jid.array_task_spec,
            exit_code=code, exit_signal=sig, reason=why,
            name=_none_if_blank(rec["name"] or ""), comment=_none_if_blank(rec["comment"] or ""),
        ))
    return out


#: squeue ``--format`` fields: id (``123_4`` with --array), raw id, array job id, task id,
#: long state, reason, name, comment (last: free text).
SQUEUE_STATUS_FORMAT = "%i|%A|%F|%K|%T|%r|%j|%k"


def squeue_status_argv(job_ids: Sequence[str]) -> list[str]:
    """The ``squeue`` fallback for :func:`sacct_status_argv` when accounting is off.

    ``--states=all`` includes jobs finished within ``MinJobAge``; ``--array`` prints one line
    per array task. Note squeue exits 1 when a single requested job is no longer known.

    Raises:
        ValueError: No ids, or an id that is not a Slurm job id.
    """
    ids = _check_ids(job_ids)
    return ["squeue", "--noheader", "--array", "--states=all", "--format=" + SQUEUE_STATUS_FORMAT,
            "--jobs=" + ",".join(ids)]


def parse_squeue_status(stdout: str) -> list[JobStatus]:
    """Parse the output of :func:`squeue_status_argv` (one record per job or array task).

    Raises:
        SchedulerOutputError: A line whose id is not a Slurm job id.
    """
    out = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        job_id, _raw, array_job, task, state_raw, reason, name, comment = _split_fields(line, 8)
        jid = parse_job_id(job_id)
        reason_v = _none_if_blank(reason)
        task_id = int(task) if is_ascii_digits(task.strip()) else jid.array_task_id
        is_array = task_id is not None or jid.array_task_spec is not None
        out.append(JobStatus(
            job_id=jid.job_id, state=normalize_state(state_raw, reason_v), state_raw=state_raw.strip(),
            array_job_id=(array_job.strip() or jid.base_id) if is_array else None,
            array_task_id=task_id, array_task_spec=jid.array_task_spec,
            reason=reason_v, name=_none_if_blank(name), comment=_none_if_blank(comment),
        ))
    return out


# ---------------------------------------------------------------------------
# scontrol show config

_CONFIG_LINE_RE = re.compile(r"^(?P<key>[A-Za-z][\w/().\[\]-]*)\s*=\s?(?P<value>.*)$")


def parse_scontrol_show_config(text: str) -> dict[str, str]:
    """``Key = value`` lines of ``scontrol show config`` → dict (values stripped, raw text).

    Headers (``Configuration data as of ...``), section titles and status lines are skipped;
    a key seen twice (plugin sections repeat some) keeps its first value.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONFIG_LINE_RE.match(line.strip())
        if m:
            out.setdefault(m["key"], m["value"].strip())
    return out


def _leading_int(text: str | None) -> int | None:
    m = re.match(r"^\s*(\d+)", text or "")
    return int(m.group(1)) if m else None


def cluster_limits_from_config(config: Mapping[str, str]) -> ClusterLimits:
    """The limits hpcjobs needs from a parsed ``scontrol show config``.

    ``MaxArraySize`` (indices must be below it), ``MaxJobCount``, ``MinJobAge`` (``300 sec``).
    """
    return ClusterLimits(
        max_array_size=_leading_int(config.get("MaxArraySize")),
        max_job_count=_leading_int(config.get("MaxJobCount")),
        min_job_age_s=_leading_int(config.get("MinJobAge")),
    )


_DBD_AGENT_QUEUE = re.compile(r"^\s*DBD Agent queue size:\s*(\d{1,12})\s*$", re.MULTILINE)


def parse_dbd_agent_queue(sdiag: str) -> int | None:
    """The ``DBD Agent queue size: N`` of ``sdiag`` output (records slurmctld has not sent to slurmdbd).

    ``None`` when the line is missing (a site that restricts ``sdiag`` prints an error instead).
    """
    found = _DBD_AGENT_QUEUE.search(sdiag)
    return int(found.group(1)) if found else None
