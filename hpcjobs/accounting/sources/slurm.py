"""Slurm accounting ingest: ``sacct --parsable2`` text and ``sacct --json`` → the accounting schema.

The text reader is vectorised: pyarrow reads the ``|``-separated text, pyarrow compute
kernels parse the high-cardinality columns (ids, times, durations, MaxRSS), and the
low-cardinality ones (State, ExitCode, Timelimit, ReqMem, TRES, Comment) are parsed once per
distinct value with the hand-tested scalar parsers of :mod:`hpcjobs.schedulers.slurm.formats` and
spread back with ``take``. There is no per-line Python loop.

Conventions (see :mod:`hpcjobs.accounting.schema` for the columns):

* One row per job, array task, collapsed pending array range, het component and step.
  ``job_id`` is the job part of the id (``3_9`` for the step ``3_9.batch``), ``step`` the step.
* Times are printed by sacct in the time zone of the sacct process; :func:`query_sacct` runs it
  with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard``. ``Unknown``/``None`` → NaT. Epoch
  seconds (``SLURM_TIME_FORMAT=%s``) are read too.
* ``max_rss_bytes`` of a job row that has none (sacct leaves MaxRSS blank on job rows) is the
  maximum over its steps. That is the peak of the largest single task, a lower bound of the
  job's true peak when steps overlap, and the quantity comparable with a per-task request —
  the same choice ``seff`` makes.
* ``req_mem_bytes``: ReqMem for the whole job (21.08+), old ``Mc``/``Mn`` scaled by CPUs/nodes,
  else the ``mem=`` of ReqTRES. ``cpus``/``nodes``/``gpus``: allocated, else requested.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from hpcjobs import process
from hpcjobs.accounting.cache import WindowCache, window_key
from hpcjobs.accounting.sacct.columns import COLUMN_GROUPS, assemble_frame
from hpcjobs.accounting.sacct.read import read_columns
from hpcjobs.accounting.sacct.text import as_source, check_fields, prepare, sample_lines
from hpcjobs.accounting.schema import conform, empty_frame
from hpcjobs.accounting.sources.slurm_json import read_sacct_json
from hpcjobs.errors import SchedulerOutputError, reading_output_of
from hpcjobs.process import CommandResult, output_limits
from hpcjobs.skipped import attach

__all__ = ["SACCT_ACCOUNTING_FIELDS", "SACCT_QUERY_FIELDS", "query_sacct", "read_sacct_json", "read_sacct_parsable2",
           "sacct_accounting_argv"]

#: Fields asked of sacct for accounting; Comment last because it is free text.
SACCT_ACCOUNTING_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "State",
    "ExitCode", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Timelimit", "NNodes", "AllocCPUS",
    "ReqCPUS", "AllocTRES", "ReqTRES", "ReqMem", "MaxRSS", "TotalCPU", "NodeList", "Comment",
)
#: Fields :func:`query_sacct` asks for: the above plus NTasks (memory used = MaxRSS × NTasks), the usage TRES
#: (``gres/gpuutil``, ``gres/gpumem``) and AdminComment (jobstats), before the free-text Comment.
SACCT_QUERY_FIELDS: tuple[str, ...] = (
    *SACCT_ACCOUNTING_FIELDS[:-1], "NTasks", "TRESUsageInAve", "TRESUsageInMax", "AdminComment", "Comment",
)

_SACCT_TIME_FMT = "%Y-%m-%dT%H:%M:%S"
_THREADED_FROM_ROWS = 50_000  # below this, threads cost more than they save


def sacct_accounting_argv(
    *,
    users: Sequence[str] | None = None,
    accounts: Sequence[str] | None = None,
    all_users: bool = False,
    job_ids: Sequence[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    states: Sequence[str] | None = None,
    steps: bool = True,
    duplicates: bool = False,
    fields: Sequence[str] = SACCT_ACCOUNTING_FIELDS,
) -> list[str]:
    """The sacct command for an accounting query.

    Args:
        users: ``--user`` list (sacct's default is the caller).
        accounts: ``--accounts`` list.
        all_users: ``--allusers`` (root or operator privileges needed to see others' jobs).
        job_ids: ``--jobs`` list.
        start: ``--starttime``: jobs active at or after it (timezone-aware times are sent in UTC).
        end: ``--endtime``: jobs active before it.
        states: ``--state`` list (with a state, sacct selects jobs in that state within the window).
        steps: Include step rows; ``False`` adds ``--allocations``.
        duplicates: ``--duplicates``: also earlier records of requeued jobs.
        fields: ``--format`` fields.

    Returns:
        The argv list.
    """
    argv = ["sacct", "--noheader", "--parsable2", "--format=" + ",".join(fields)]
    if all_users:
        argv.append("--allusers")
    if users:
        argv.append("--user=" + ",".join(users))
    if accounts:
        argv.append("--accounts=" + ",".join(accounts))
    if job_ids:  # read from a ledger: checked, so that none adds another id or option (a comma, a space)
        from hpcjobs.schedulers.slurm.backend import SlurmBackend

        argv.append("--jobs=" + ",".join(SlurmBackend().check_job_ids(job_ids)))
    if states:
        argv.append("--state=" + ",".join(states))
    if not steps:
        argv.append("--allocations")
    if duplicates:
        argv.append("--duplicates")
    if start is not None:
        argv.append("--starttime=" + _sacct_time(start))
    if end is not None:
        argv.append("--endtime=" + _sacct_time(end))
    return argv


def _sacct_time(t: datetime) -> str:
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.strftime(_SACCT_TIME_FMT)


# ---------------------------------------------------------------------------
# sacct --parsable2


def read_sacct_parsable2(
    source: str | bytes | os.PathLike[str],
    fields: Sequence[str] | None = SACCT_ACCOUNTING_FIELDS,
    *,
    tz: str = "UTC",
    cluster: str | None = None,
    delimiter: str = "|",
) -> pd.DataFrame:
    """Read ``sacct --parsable2``/``--parsable`` output, with or without header, into the accounting schema.

    Args:
        source: The text (``str``/``bytes``) or a path to a file holding it (a ``str`` without a newline
            that names an existing file is that file). A header line is skipped.
        fields: The ``--format`` fields, in order (names as in ``sacct --helpformat``, any case).
            Any subset works; missing schema columns are NA. ``None``: read them from the header line
            sacct prints without ``--noheader``. Headerless text is read with them only when its values
            have the fields' types (times are times, states are states, ids are ids, ...).
        tz: Time zone the times were printed in (the sacct process's ``TZ``).
        cluster: Cluster name for the rows when ``Cluster`` is not among the fields.
        delimiter: ``sacct --delimiter`` (any characters); a delimiter ending every line (``--parsable``)
            is accepted.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`. Lines with another number of fields
        than the first (a value holding the delimiter or a newline) are left out and listed in
        ``df.attrs["skipped"]``, with a :class:`~hpcjobs.skipped.SkippedRecordsWarning`.

    Raises:
        SchedulerOutputError: The first line has more or fewer fields than ``fields``, the values do not fit
            the fields, the text is ``sstat`` output, or a JobID is malformed.
    """
    source = as_source(source)
    if isinstance(source, (str, bytes)) and not source.strip():
        return empty_frame()
    prepared = prepare(source, fields, delimiter)
    if not prepared.header:
        check_fields(sample_lines(prepared.source, False), prepared.names, prepared.sep,
                     given=fields is not None and fields is not SACCT_ACCOUNTING_FIELDS
                     and fields is not SACCT_QUERY_FIELDS,
                     shown=list(fields) if fields is not None else None)
    col, skipped = read_columns(prepared)
    n = len(next(iter(col.values())))
    if n == 0:
        return attach(empty_frame(), skipped)
    if "jobid" not in col:
        raise SchedulerOutputError("sacct fields must include JobID")
    out: dict[str, pd.Series] = {"scheduler": pd.Series(pd.Categorical.from_codes(np.zeros(n, np.int8), ["slurm"]))}
    if "cluster" not in col and cluster is not None:
        out["cluster"] = pd.Series(pd.Categorical.from_codes(np.zeros(n, np.int8), [cluster]))
    tasks = COLUMN_GROUPS
    if n < _THREADED_FROM_ROWS:
        for task in tasks:
            out.update(task(col, tz))
    else:  # the kernels release the GIL: independent column groups run side by side
        with ThreadPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 1)) as pool:
            for part in pool.map(lambda task: task(col, tz), tasks):
                out.update(part)
    return attach(assemble_frame(out, n), skipped)



# ---------------------------------------------------------------------------
# Windowed, cached queries

Runner = Callable[..., CommandResult]
_ONE_DAY = timedelta(days=1)
_ONE_HOUR = timedelta(hours=1)


def _windows(start: datetime, end: datetime, size: timedelta) -> list[tuple[datetime, datetime]]:
    """Windows of ``size`` aligned to multiples of ``size`` since the epoch (UTC), covering [start, end)."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    k = (start - epoch) // size
    out = []
    ws = epoch + k * size
    while ws < end:
        out.append((ws, ws + size))
        ws += size
    return out


def _aware(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def query_sacct(
    start: datetime,
    end: datetime | None = None,
    *,
    users: Sequence[str] | None = None,
    accounts: Sequence[str] | None = None,
    all_users: bool = False,
    job_ids: Sequence[str] | None = None,
    states: Sequence[str] | None = None,
    steps: bool = True,
    window: timedelta = _ONE_DAY,
    cache: WindowCache | bool | None = True,
    margin: timedelta = _ONE_HOUR,
    now: datetime | None = None,
    runner: Runner | None = None,
    timeout: float = 300.0,
) -> pd.DataFrame:
    """Run sacct over [start, end) in windows and return one accounting DataFrame.

    Windows are aligned to multiples of ``window`` (UTC midnight for days) so different reports
    share them. A window that ended more than ``margin`` before ``now`` is final: it is read from
    the cache when there, else queried and stored. sacct selects jobs *active* in a window, so a
    job spanning windows comes back from each; rows are de-duplicated on (``job_id_raw``, ``job_id``,
    ``step``), the later window winning, and rows not active within [start, end) are dropped.

    Args:
        start: Start of the period (naive times are UTC).
        end: End of the period; default ``now``.
        users: Passed to :func:`sacct_accounting_argv`, like ``accounts``, ``all_users``, ``job_ids``,
            ``states`` and ``steps``.
        window: Window length.
        cache: A :class:`WindowCache`, ``True`` for the default one, ``False``/``None`` for none.
        margin: How long after a window's end its records are considered final.
        now: The current time (tests).
        runner: Replacement for :func:`hpcjobs.process.run_command` (tests).
        timeout: Seconds allowed per sacct call.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        CommandError: sacct failed. CommandTimeout: sacct ran past ``timeout``.
        SchedulerOutputError: sacct printed something unreadable.
    """
    run = runner or process.run_command  # looked up at each call: the process seam tests replace
    now_ = _aware(now or datetime.now(timezone.utc))
    start_, end_ = _aware(start), _aware(end or now_)
    store = WindowCache() if cache is True else (cache or None)
    shape = sacct_accounting_argv(users=users, accounts=accounts, all_users=all_users, job_ids=job_ids,
                                  states=states, steps=steps, fields=SACCT_QUERY_FIELDS)
    env = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    frames = []
    for ws, we in _windows(start_, end_, window):
        final = we + margin < now_
        key = window_key(shape, ws, we)
        df = store.load(key) if (store is not None and final) else None
        if df is None:
            argv = sacct_accounting_argv(users=users, accounts=accounts, all_users=all_users, job_ids=job_ids,
                                         states=states, steps=steps, start=ws, end=we, fields=SACCT_QUERY_FIELDS)
            with output_limits(None):  # accounting text for reports: hundreds of MB is legitimate
                result = run(argv, timeout=timeout, env=env)
            with reading_output_of(result.argv, result.stdout, result.returncode):
                df = read_sacct_parsable2(result.stdout, SACCT_QUERY_FIELDS)
            if store is not None and final:
                store.store(key, df)
        frames.append(df)
    if not frames:
        return empty_frame()
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    df = df.drop_duplicates(subset=["job_id_raw", "job_id", "step"], keep="last")
    began = df["start_time"].fillna(df["eligible_time"]).fillna(df["submit_time"])
    active = (began.isna() | (began < end_)) & (df["end_time"].isna() | (df["end_time"] >= start_))
    return conform(df[active])
