"""Where a report's data comes from: a live ``sacct`` query or a saved file, then the report filters.

:func:`load_report_frame` is the one library call behind ``hpcjobs report``: it reads the
accounting data (detecting the format of a saved file), and applies the time, user, account,
partition and sweep filters.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from hpcjobs.accounting.input_checks import (
    MAX_WINDOW,
    READ_ERRORS,
    check_tz,
    check_window,
    load_json,
    locate_json_error,
    locate_sacct_text_error,
)
from hpcjobs.accounting.sacct.text import SstatOutputError, guess_delimiter, is_sstat_header, sstat_message
from hpcjobs.errors import ConfigError, ConfigProblem, SchedulerOutputError
from hpcjobs.schedulers.registry import find_backend

#: Formats :func:`detect_format` can name.
FORMATS = ("sacct-parsable2", "sstat", "sacct-json", "squeue-json", "qstat-json", "qstat-text", "torque-xml",
           "pbs-accounting", "torque-accounting", "kubectl-json", "swarm-json")

_ACCOUNTING_LINE = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];[^;]+;", re.M)
_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class ReportFilters:
    """What a report is about; every field optional (``None`` = no filter).

    Attributes:
        since: Jobs active at or after this time (submitted before ``until`` and not ended before it).
        until: Jobs submitted before this time.
        users: User names.
        accounts: Accounts / projects.
        partitions: Partitions / queues.
        sweep: hpcjobs sweep id (from the job tag).
    """

    since: datetime | None = None
    until: datetime | None = None
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    sweep: str | None = None


def parse_when(text: str, *, now: datetime | None = None, option: str = "--since") -> datetime:
    """A time given on the command line: ``7d``/``12h``/``30m``/``2w`` ago, or an ISO date/time (UTC if naive).

    Args:
        text: What was given.
        now: The current time (for ages).
        option: The option it was given to, for messages.

    Raises:
        ConfigError: Neither form, or a time before 1970 or more than 100 years away.
    """
    now = now or datetime.now(timezone.utc)
    m = _RELATIVE.match(text)
    if m:
        if len(m[1]) > 12 or int(m[1]) * _UNIT_SECONDS[m[2]] > MAX_WINDOW.total_seconds():
            raise ConfigError(ConfigProblem(
                f"{text.strip()} is longer ago than reports reach (at most 100 years: {MAX_WINDOW.days}d)", key=option))
        return check_window(now - timedelta(seconds=int(m[1]) * _UNIT_SECONDS[m[2]]), option, now=now)
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"not a time: {text!r} (use a date like 2026-11-30, a time like "
                          "2026-11-30T08:00, or an age like 7d, 12h)") from None
    return check_window(t if t.tzinfo else t.replace(tzinfo=timezone.utc), option, now=now)


def detect_format(text: str, file: str = "<text>") -> str:
    """Name the format of saved scheduler output (one of :data:`FORMATS`).

    Raises:
        ConfigError: Not a format hpcjobs reads, or JSON that is invalid or absurdly deep.
    """
    head = text.lstrip()[:4096]
    if head.startswith(("{", "[")):
        from hpcjobs.accounting.sources.kubernetes import is_kubectl_list
        from hpcjobs.accounting.sources.swarm import is_swarm_json

        doc = load_json(text, file)
        if isinstance(doc, dict) and isinstance(doc.get("jobs"), list):
            return _slurm_json_format(doc["jobs"])
        if isinstance(doc, dict) and ("Jobs" in doc or "pbs_version" in doc or "pbs_server" in doc):
            return "qstat-json"
        if is_kubectl_list(doc):
            return "kubectl-json"
        if is_swarm_json(doc):
            return "swarm-json"
        raise ConfigError("JSON file is neither `sacct --json` or `squeue --json` (no 'jobs' list), `qstat -F json`, "
                          "`kubectl get jobs,pods -o json` nor `docker inspect` output of Swarm services and tasks")
    if head.startswith("<"):
        return "torque-xml"
    if _ACCOUNTING_LINE.search(head):
        pbs_markers = ("Resource_List.select=", "exec_vnode=", "run_count=", "Resource_List.ncpus=")
        return "pbs-accounting" if any(m in text for m in pbs_markers) else "torque-accounting"
    if head.startswith("Job Id:") or "\nJob Id:" in head:
        return "qstat-text"
    first = head.splitlines()[0] if head else ""
    delimiter = guess_delimiter(first)
    if delimiter is not None:
        cells = first.split(delimiter)
        if is_sstat_header(cells[:-1] if cells[-1] == "" else cells):
            return "sstat"
        return "sacct-parsable2"
    raise ConfigError("cannot tell the format of the file: expected sacct --parsable/--parsable2 text (any "
                      "--delimiter, with or without header), sacct --json, qstat -f (-F json) output, Torque "
                      "qstat -x XML or a PBS/Torque accounting log")


def _slurm_json_format(jobs: list[object]) -> str:
    """``sacct-json`` or ``squeue-json``, told apart by the keys of the job objects (never the file name).

    Raises:
        ConfigError: Job objects of neither shape, or of both (the format named, with what was found).
    """
    from hpcjobs.accounting.sources.slurm_json import job_list_shape

    shape = job_list_shape(jobs)
    if shape in ("sacct", "empty"):
        return "sacct-json"
    if shape == "squeue":
        return "squeue-json"
    first = next((j for j in jobs if isinstance(j, dict)), None)
    found = f"keys {', '.join(sorted(map(str, first))[:8])}" if first else f"a {type(jobs[0]).__name__}"
    raise ConfigError(f"JSON with a 'jobs' list that is neither `sacct --json` (job objects with 'state' and 'time') "
                      f"nor slurmctld's job list of `squeue --json` (objects with 'job_state'), or mixes both: the "
                      f"first job has {found}")


def read_saved(path: str | os.PathLike[str], *, scheduler: str | None = None, tz: str | None = None,
               sacct_fields: Sequence[str] | None = None, delimiter: str | None = None) -> pd.DataFrame:
    """Read a saved scheduler output file of any supported format into the accounting schema.

    Args:
        path: The file (or a PBS/Torque accounting directory).
        scheduler: ``slurm``, ``pbspro`` or ``torque`` to settle what detection cannot (a
            ``qstat -f`` text or an accounting log of Torque rather than PBS).
        tz: Time zone the file's times were written in (sacct text, PBS/Torque logs); default UTC
            for sacct text, the machine's zone for PBS/Torque logs.
        sacct_fields: ``--format`` fields of headerless sacct text (default: a header line, else
            :data:`hpcjobs.accounting.sources.slurm.SACCT_ACCOUNTING_FIELDS`, when the values fit it).
        delimiter: ``sacct --delimiter`` of sacct text (default: detected from the first line).

    Returns:
        A schema DataFrame.

    Raises:
        ConfigError: Unreadable file, unknown format, or sacct text whose field count is unknown.
    """
    # hpcjobs.accounting.sources.pbs imported first hits the formats.pbs <-> schedulers import cycle (cc95783);
    # importing the schedulers package first resolves it. Remove when the cycle is fixed.
    import hpcjobs.schedulers  # noqa: F401

    check_tz(tz)
    p = Path(path)
    _check_saved_path(p)
    formats: list[str] = []  # the format read, once detected
    try:
        return _read_saved(p, scheduler, tz, sacct_fields, delimiter, formats)
    except READ_ERRORS as exc:  # what the locating readers below could not pin to a field
        raise ConfigError(ConfigProblem(f"a value is out of range ({type(exc).__name__}: {str(exc)[:200]})",
                                        file=str(p))) from None
    except SchedulerOutputError as exc:  # the parsers' error, which a live call reports with its command (exit 1)
        raise bad_saved_file(p, exc.problem, formats) from None
    except SAVED_SHAPE_ERRORS as exc:  # a value of a type or shape no scheduler writes where the reader looked
        raise bad_saved_file(p, f"a value has a type or shape the scheduler never writes there ({type(exc).__name__}: "
                             f"{str(exc)[:200]})", formats) from None


#: What a reader raises on a saved file whose values have another type or shape than the scheduler writes (a list
#: where a name goes, a number where an object goes): the file is bad input, not a bug.
SAVED_SHAPE_ERRORS: tuple[type[Exception], ...] = (TypeError, AttributeError, KeyError, IndexError, ValueError)

#: What each format of :data:`FORMATS` is, for the messages about a saved file that does not follow it.
FORMAT_DESCRIPTIONS = {
    "sacct-parsable2": "sacct --parsable2 text", "sstat": "sstat text", "sacct-json": "sacct --json output",
    "qstat-json": "qstat -f -F json output", "qstat-text": "qstat -f text", "torque-qstat-text": "Torque qstat -f text",
    "torque-xml": "Torque qstat -f -x XML", "pbs-accounting": "a PBS accounting log",
    "torque-accounting": "a Torque accounting log", "kubectl-json": "kubectl get jobs,pods -o json output",
    "swarm-json": "docker inspect output of Swarm services and tasks",
}


def bad_saved_file(path: Path, problem: str, formats: Sequence[str] = ()) -> ConfigError:
    """The exit-2 error of a saved file that is not what its format says: the file, what is wrong, what was expected.

    The same problem in a live scheduler's output is a :class:`~hpcjobs.errors.SchedulerOutputError`
    naming the command (exit 1); a saved file is the user's input.
    """
    fmt = formats[-1] if formats else None
    expected = FORMAT_DESCRIPTIONS.get(fmt, fmt) if fmt else "saved scheduler output"
    return ConfigError(ConfigProblem(problem, file=str(path), expected=f"{expected} as the scheduler wrote it"))


#: The largest saved file a report reads (sacct text of a million jobs with their steps is about 600 MB).
MAX_SAVED_BYTES = 4 << 30


def _check_saved_path(p: Path) -> None:
    """Refuse, before reading, a saved input that is not a folder or a regular file of at most :data:`MAX_SAVED_BYTES`.

    A FIFO would block the read forever and a device (``/dev/zero``) would fill the memory.

    Raises:
        ConfigError: Missing, not a regular file or folder, or too large (exit 2, naming the file).
    """
    from hpcjobs.safe_files import file_kind

    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigError(ConfigProblem(f"cannot read it: {exc.strerror}", file=str(p))) from None
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(ConfigProblem(f"it is {file_kind(st.st_mode)}, not a regular file: save the scheduler's "
                                        "output to a file and pass that", file=str(p)))
    if st.st_size > MAX_SAVED_BYTES:
        raise ConfigError(ConfigProblem(f"it is {st.st_size:,} bytes, more than the {MAX_SAVED_BYTES:,} a report "
                                        "reads: split it by period (sacct --starttime/--endtime)", file=str(p)))


def _read_saved(p: Path, scheduler: str | None, tz: str | None, sacct_fields: Sequence[str] | None,
                delimiter: str | None, formats: list[str]) -> pd.DataFrame:
    """:func:`read_saved` of a checked path; the detected format is appended to ``formats`` (for the messages)."""
    if p.is_dir():  # a folder of accounting logs
        fmt = "pbs-accounting"
        text = ""
    else:
        try:
            text = _detection_text(p)
        except OSError as exc:
            raise ConfigError(ConfigProblem(f"cannot read it: {exc.strerror}", file=str(p))) from None
        try:
            fmt = detect_format(text, str(p))
        except ConfigError as exc:
            for problem in exc.problems:
                problem.file = problem.file or str(p)
            raise
    backend = find_backend(scheduler)
    if backend is not None:  # the scheduler's own dialect of what detection cannot tell apart
        fmt = backend.saved_format(fmt)
    formats.append(fmt)
    if fmt == "sstat":
        raise ConfigError(ConfigProblem(sstat_message(), file=str(p)))
    if fmt == "sacct-parsable2":
        return _read_sacct_text(p, text, tz, sacct_fields, delimiter)
    if fmt == "sacct-json":
        from hpcjobs.accounting.sources.slurm import read_sacct_json

        doc = load_json(text, str(p))
        try:
            return read_sacct_json(doc)
        except READ_ERRORS as exc:
            located = locate_json_error(doc, text, str(p), exc, read_sacct_json)
            if located is None:
                raise
            raise located from None
    if fmt == "squeue-json":
        from hpcjobs.accounting.sources.slurm_queue import read_squeue_json

        doc = load_json(text, str(p))
        try:
            return read_squeue_json(doc)
        except READ_ERRORS as exc:
            located = locate_json_error(doc, text, str(p), exc, read_squeue_json)
            if located is None:
                raise
            raise located from None
    if fmt == "kubectl-json":
        from hpcjobs.accounting.sources.kubernetes import read_kubectl_json

        return read_kubectl_json(text, str(p))
    if fmt == "swarm-json":
        from hpcjobs.accounting.sources.swarm import read_swarm_json

        return read_swarm_json(text, str(p))
    if fmt == "qstat-json":
        from hpcjobs.accounting.sources.pbs import read_qstat_json

        return read_qstat_json(text, tz=tz)
    if fmt == "torque-qstat-text":
        from hpcjobs.accounting.sources.torque import read_torque_qstat_text

        return read_torque_qstat_text(text, tz=tz)
    if fmt == "qstat-text":
        from hpcjobs.accounting.sources.pbs import read_qstat_text

        return read_qstat_text(text, tz=tz)
    if fmt == "torque-xml":
        from hpcjobs.accounting.sources.torque import read_torque_qstat_xml

        return read_torque_qstat_xml(text, tz=tz)
    if fmt == "torque-accounting":
        from hpcjobs.accounting.sources.torque import read_torque_accounting

        return read_torque_accounting(p, tz=tz)
    from hpcjobs.accounting.sources.pbs import read_pbs_accounting

    return read_pbs_accounting(p, tz=tz)


#: Bytes read to detect the format of a large file; sacct text is then read from the path, not from a str.
_DETECT_BYTES = 1 << 20


def _detection_text(p: Path) -> str:
    """The file's text as format detection needs it: the lines of its first MiB when that is sacct text, else all."""
    with p.open("rb") as fh:
        start = fh.read(_DETECT_BYTES + 1)
    cut = start.rfind(b"\n", 0, _DETECT_BYTES) if len(start) > _DETECT_BYTES else -1
    if cut > 0:
        head = start[:cut + 1].decode("utf-8", errors="replace")
        try:  # detect_format reads the first 4096 characters after leading blanks, and all of JSON/logs
            if len(head.lstrip()) > 4096 and detect_format(head) in ("sacct-parsable2", "sstat"):
                return head
        except ConfigError:
            pass
    return p.read_text(encoding="utf-8", errors="replace")


def _read_sacct_text(p: Path, text: str, tz: str | None, sacct_fields: Sequence[str] | None,
                     delimiter: str | None) -> pd.DataFrame:
    """Saved sacct text in any spelling (``text``: at least its first line); errors exit 2 naming the file."""
    from hpcjobs.accounting.sacct.text import prepare
    from hpcjobs.accounting.sources.slurm import SACCT_ACCOUNTING_FIELDS, SACCT_QUERY_FIELDS, read_sacct_parsable2

    first = text.split("\n", 1)[0].rstrip("\r")
    delim = delimiter or guess_delimiter(first) or "|"
    header = first.split(delim)[0].strip().lower() == "jobid"
    fields = list(sacct_fields) if sacct_fields else None if header else SACCT_ACCOUNTING_FIELDS
    if fields is SACCT_ACCOUNTING_FIELDS:  # headerless: hpcjobs' own query list (live reports) is known too
        count = len(first.split(delim))  # a last field left empty and a trailing delimiter look alike
        if len(SACCT_QUERY_FIELDS) in (count, count - 1 if first.endswith(delim) else -1):
            fields = SACCT_QUERY_FIELDS
    try:
        return read_sacct_parsable2(p, fields, tz=tz or "UTC", delimiter=delim)
    except SstatOutputError as exc:
        raise ConfigError(ConfigProblem(str(exc), file=str(p))) from None
    except SchedulerOutputError as exc:
        advice = ("" if sacct_fields or "--sacct-fields" in str(exc) else
                  "; save it with its header line (sacct without --noheader) or give --sacct-fields")
        if delimiter is None and not header:
            advice += f"; the delimiter was taken to be {delim!r} (--delimiter sets it)"
        raise ConfigError(ConfigProblem(f"{exc}{advice}", file=str(p))) from None
    except READ_ERRORS as exc:
        prepared = prepare(p, fields, delim)
        if prepared.sep != "|":
            raise
        plain = (prepared.source.decode(errors="replace") if isinstance(prepared.source, bytes)
                 else p.read_text(encoding="utf-8", errors="replace"))
        # the field names as sacct spells them (the header's own, or the list given), for the message
        names = list(fields) if fields else [n.strip() for n in first.rstrip("\r\n").split(delim) if n.strip()]
        if len(names) != len(prepared.names):
            names = list(prepared.names)
        located = locate_sacct_text_error(plain, names, str(p), exc,
                                          lambda t: read_sacct_parsable2(t, names, tz=tz or "UTC"))
        if located is None:
            raise
        raise located from None


def apply_filters(df: pd.DataFrame, filters: ReportFilters) -> pd.DataFrame:
    """Keep the rows (job and step rows alike) of jobs that match ``filters``.

    A job is in the period when it was submitted before ``until`` and had not ended before
    ``since`` (still running counts). User/account/partition are matched on the job row, so a
    job's steps, which sacct prints without a user or partition, stay with it.

    Args:
        df: A schema DataFrame.
        filters: The filters.

    Returns:
        The matching rows, index reset.
    """
    is_job = df["step"].isna()
    jobs = df.loc[is_job, ["end_time", "submit_time", "user", "account", "partition", "sweep_id"]]
    keep = pd.Series(True, index=jobs.index)
    if filters.since is not None:
        since = pd.Timestamp(filters.since).tz_convert("UTC")
        keep &= jobs["end_time"].isna() | (jobs["end_time"] >= since)
    if filters.until is not None:
        until = pd.Timestamp(filters.until).tz_convert("UTC")
        keep &= jobs["submit_time"].isna() | (jobs["submit_time"] < until)
    for col, wanted in (("user", filters.users), ("account", filters.accounts), ("partition", filters.partitions)):
        if wanted:
            keep &= jobs[col].astype("string").isin(list(wanted)).fillna(False)
    if filters.sweep is not None:
        keep &= (jobs["sweep_id"].astype("string") == filters.sweep).fillna(False)
    # a row stays when its (job_id, job_id_raw or "") pair is a kept job row's: compared as integer codes
    raw = pd.factorize(df["job_id_raw"].fillna(""))[0]
    pair = pd.factorize(df["job_id"], use_na_sentinel=False)[0].astype("int64") * (int(raw.max(initial=0)) + 1)
    pairs = pd.Series(pair + raw, index=df.index)
    matched = pairs.isin(pairs[is_job][keep]).to_numpy(dtype=bool)
    return (df if matched.all() else df[matched]).reset_index(drop=True)


def load_report_frame(filters: ReportFilters, *, from_file: str | os.PathLike[str] | None = None,
                      scheduler: str | None = None, tz: str | None = None,
                      sacct_fields: Sequence[str] | None = None, all_users: bool = False,
                      delimiter: str | None = None) -> pd.DataFrame:
    """The accounting data of a report: read ``from_file`` or query sacct, then :func:`apply_filters`.

    Args:
        filters: Period, users, accounts, partitions, sweep.
        from_file: A saved output to read instead of querying (see :func:`read_saved`).
        scheduler: ``slurm`` (default for a live query), ``kubernetes``, ``swarm`` (asked live too, each from
            its backend's :attr:`~hpcjobs.schedulers.base.BaseBackend.live_accounting_source`; a Swarm
            sweep's saved records of removed services are read as well), ``pbspro`` or ``torque``.
        tz: Time zone of the saved file's times (see :func:`read_saved`).
        sacct_fields: Field names of headerless saved sacct text.
        all_users: Live sacct query of every user (``--allusers``) when no user is given.
        delimiter: ``sacct --delimiter`` of saved sacct text (default: detected).

    Returns:
        A schema DataFrame.

    Raises:
        ConfigError: A live query asked of a scheduler without a live source (PBS/Torque: only saved files
            are read there), or a bad file.
        CommandError: sacct (kubectl, docker) failed.
    """
    if from_file is not None:
        df = read_saved(from_file, scheduler=scheduler, tz=tz, sacct_fields=sacct_fields, delimiter=delimiter)
    else:
        df = LIVE_SOURCES[live_source_of(scheduler)](filters, all_users)
    if filters.sweep is not None:
        from dataclasses import replace

        ids = df.loc[df["step"].isna(), "sweep_id"].dropna().astype(str).unique().tolist()
        filters = replace(filters, sweep=resolve_sweep_name(filters.sweep, ids))
    return apply_filters(df, filters)


def _query_sacct(filters: ReportFilters, all_users: bool) -> pd.DataFrame:
    """``sacct`` of the period (default: the last 7 days), users and accounts."""
    from hpcjobs.accounting.sources.slurm import query_sacct

    since = filters.since or datetime.now(timezone.utc) - timedelta(days=7)
    return query_sacct(since, filters.until, users=list(filters.users) or None,
                       accounts=list(filters.accounts) or None, all_users=all_users and not filters.users)


def _query_kubectl(filters: ReportFilters, all_users: bool) -> pd.DataFrame:
    """``kubectl get jobs,pods`` of hpcjobs' chunks (the filters are applied afterwards)."""
    from hpcjobs.accounting.sources.kubernetes import query_kubernetes

    return query_kubernetes()


def _query_docker(filters: ReportFilters, all_users: bool) -> pd.DataFrame:
    """``docker inspect`` of Swarm services and tasks, with the saved records of the sweep's removed ones."""
    from hpcjobs.accounting.sources.swarm import query_swarm

    return query_swarm(local_sweep(filters.sweep) if filters.sweep is not None else None)


#: The live accounting readers, by the source a backend names
#: (:attr:`~hpcjobs.schedulers.base.BaseBackend.live_accounting_source`): ``(filters, all_users) -> frame``.
LIVE_SOURCES: dict[str, Callable[[ReportFilters, bool], pd.DataFrame]] = {
    "sacct": _query_sacct, "kubectl": _query_kubectl, "docker": _query_docker}
#: The live source of a query that names no scheduler.
DEFAULT_LIVE_SOURCE = "sacct"


def live_source_of(scheduler: str | None) -> str:
    """The key in :data:`LIVE_SOURCES` of ``scheduler``'s live accounting (``None``: :data:`DEFAULT_LIVE_SOURCE`).

    Raises:
        ConfigError: The scheduler has no live accounting source (only saved files are read there).
    """
    if scheduler is None:
        return DEFAULT_LIVE_SOURCE
    backend = find_backend(scheduler)
    source = backend.live_accounting_source if backend is not None else None
    if source is None or source not in LIVE_SOURCES:
        from hpcjobs.schedulers.registry import BACKENDS

        live = [b.name for b in BACKENDS.values() if b.live_accounting_source in LIVE_SOURCES]
        names = ", ".join(live[:-1]) + f" and {live[-1]}" if len(live) > 1 else "".join(live)
        hint = backend.saved_accounting_hint if backend is not None else "save its accounting records"
        raise ConfigError(f"live accounting queries are implemented for {names}; for {scheduler} {hint} and pass "
                          "it with --from-file")
    return source


def _sacct_jobs(start: datetime, job_ids: Sequence[str], cache: bool) -> pd.DataFrame:
    """``sacct`` of ``job_ids`` since ``start`` (windowed, cached when ``cache``)."""
    from hpcjobs.accounting.sources.slurm import query_sacct

    return query_sacct(start, job_ids=list(job_ids), cache=cache)


#: The live sources that answer for a list of job ids: ``(start, job_ids, cache) -> frame``.
JOB_QUERIES: dict[str, Callable[[datetime, Sequence[str], bool], pd.DataFrame]] = {"sacct": _sacct_jobs}


def query_jobs_of(scheduler: str | None) -> Callable[[datetime, Sequence[str], bool], pd.DataFrame] | None:
    """How to ask ``scheduler``'s live accounting for given job ids, or ``None`` where it cannot (or has none)."""
    backend = find_backend(scheduler)
    source = backend.live_accounting_source if backend is not None else None
    return JOB_QUERIES.get(source) if source is not None else None


def has_live_accounting(scheduler: str | None) -> bool:
    """Whether ``scheduler`` (a name from a ledger, say) has a live accounting source."""
    backend = find_backend(scheduler)
    return backend is not None and backend.live_accounting_source in LIVE_SOURCES


def local_sweep(name: str) -> Path | None:
    """The folder of the sweep ``name`` means on this machine (exact id, then name, then a unique prefix, or a
    folder path: see :func:`hpcjobs.sweep.find.find_sweep`), or ``None`` when there is no such sweep here.

    Raises:
        ConfigError: The name or prefix is ambiguous among this machine's sweeps (the candidates listed; exit 2).
    """
    from hpcjobs.errors import IdArgumentError
    from hpcjobs.ids import check_id_argument
    from hpcjobs.sweep.find import find_sweep

    check_id_argument(name, what="sweep", key="--sweep")
    try:
        return find_sweep(name)
    except IdArgumentError:  # blank, a prefix too short or ambiguous: the same in the data
        raise
    except ConfigError as exc:
        if any(p.message.startswith("ambiguous") for p in exc.problems):
            raise
        return None


def resolve_sweep_name(name: str, ids_in_data: Sequence[str]) -> str:
    """The sweep id ``--sweep`` means, as ``status``/``cancel``/``resubmit`` read it.

    A sweep of this machine's sweep root (exact id, then name, then a unique prefix: see
    :func:`hpcjobs.sweep.find.find_sweep`) wins; else the sweep ids found in the accounting data
    are matched the same way (a saved file from another machine).

    Raises:
        ConfigError: No sweep matches (the data's sweeps are listed), or the name is ambiguous (exit 2).
    """
    from hpcjobs.ids import match_prefix

    folder = local_sweep(name)
    if folder is not None:
        return folder.name
    rules: tuple[Callable[[str], bool], ...] = (lambda i: i == name, lambda i: i.rsplit("-", 1)[0] == name)
    for match in rules:
        found = sorted({i for i in ids_in_data if match(i)})
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ConfigError(ConfigProblem(f"--sweep {name!r} is ambiguous: {', '.join(found[:10])}",
                                            key="--sweep"))
    prefixed = match_prefix(name, ids_in_data, what="sweep", key="--sweep", where=" in the accounting data")
    if prefixed is not None:
        return prefixed
    there = ", ".join(sorted(set(ids_in_data))[:10]) or "none"
    raise ConfigError(ConfigProblem(f"no sweep {name!r} in the sweep folder or in the accounting data (sweeps in "
                                    f"the data: {there})", key="--sweep"))
