"""The sweep status query's ``sacct`` text read by column: a million array tasks without a million objects.

:func:`sacct_status_table` reads the output of :func:`hpcjobs.schedulers.slurm.formats.sacct_status_argv`
(``JobID|JobIDRaw|State|ExitCode|Reason|JobName|Comment``, one line per job, array task and step)
into a :class:`hpcjobs.schedulers.status_table.StatusTable` that says exactly what
:func:`hpcjobs.schedulers.slurm.formats.parse_sacct_status` says, for the ledger's purposes (state, state text,
exit code, task id): the lines of array tasks (``123_4``) are grouped as they are read; step lines
(``123_4.batch``) only explain a failure's reason, which the ledger does not keep, and are checked
and skipped; every other line (plain jobs, collapsed pending ranges ``123_[5-9%2]``, heterogeneous
jobs) goes through :func:`~hpcjobs.schedulers.slurm.formats.parse_sacct_status` itself. When an answer repeats a
task, or gives a range and tasks of the same array, the whole text is parsed by
:func:`~hpcjobs.schedulers.slurm.formats.parse_sacct_status` (its "last record wins" rule then applies).

Pandas-free: the status poller on a login node imports this module.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import groupby
from operator import itemgetter

from hpcjobs.schedulers.slurm.formats import (
    SACCT_STATUS_FIELDS,
    normalize_state,
    parse_exit_code,
    parse_job_id,
    parse_sacct_status,
)
from hpcjobs.schedulers.status_table import GroupKey, StatusTable

_NONE = ("", "None", "(null)", "N/A")


#: ``123.batch`` or ``123_4.extern``: a step of a job or array task (a subset of ``parse_job_id``'s forms).
_PLAIN_STEP = re.compile(r"\d+(?:_\d+)?\.[^.\s]+")


#: One array task's line: its array id, its index (as sacct writes it: no leading zero) and the fields
#: after JobIDRaw (State|ExitCode|Reason|JobName|Comment).
_TASK_LINE = re.compile(r"^([0-9]+)_(0|[1-9][0-9]*)\|[^|\n]*\|([^\n]*)$", re.M)
_STEP_LINE = re.compile(r"^[0-9]+(?:_[0-9]+)?\.[^.\s|]+\|", re.M)
#: Line breaks of ``str.splitlines`` other than ``\n`` (in ASCII text).
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
#: Characters of text read by one regular-expression pass (the tuples of one slice are held at a time).
_SLICE = 1 << 22


def sacct_status_table(stdout: str) -> StatusTable:
    """The status answer of ``sacct`` (:func:`hpcjobs.schedulers.slurm.formats.sacct_status_argv`) by column.

    An answer made only of array-task and step lines (a sweep's) is read by regular expressions, a
    slice at a time, its consecutive tasks of one outcome grouped without a Python step per line;
    anything else line by line.

    Raises:
        SchedulerOutputError: A line whose JobID is not a Slurm job id (as
            :func:`~hpcjobs.schedulers.slurm.formats.parse_sacct_status`).
    """
    if len(SACCT_STATUS_FIELDS) != 7:  # pragma: no cover - the field list and this reader change together
        return StatusTable.from_records(parse_sacct_status(stdout))
    table = _tasks_only(stdout)
    return table if table is not None else _by_line(stdout)


def _tasks_only(stdout: str) -> StatusTable | None:
    """:func:`sacct_status_table` of an answer whose every line is an array task or a step, else ``None``."""
    if (not stdout or not stdout.isascii() or stdout.startswith("\n") or "\n\n" in stdout
            or any(ch in stdout for ch in _OTHER_BREAKS)):
        return None
    lines = stdout.count("\n") + (0 if stdout.endswith("\n") else 1)
    runs: dict[tuple[str, str], list[int]] = {}
    tasks = 0
    pos, end = 0, len(stdout)
    while pos < end:
        cut = stdout.find("\n", pos + _SLICE)
        cut = end if cut < 0 else cut + 1
        found = _TASK_LINE.findall(stdout, pos, cut)
        tasks += len(found)
        for key, run in groupby(found, key=itemgetter(0, 2)):  # (array id, fields): consecutive lines alike
            runs.setdefault(key, []).extend(map(int, map(itemgetter(1), run)))
        pos = cut
    if tasks != lines and tasks + sum(1 for _ in _STEP_LINE.finditer(stdout)) != lines:
        return None
    groups: dict[GroupKey, list[int]] = {}
    outcomes: dict[str, tuple[str, str, int | None]] = {}
    for (base, fields), indices in runs.items():
        outcome = outcomes.get(fields)
        if outcome is None:
            parts = fields.split("|", 3)
            parts += [""] * (3 - len(parts))
            state_raw, exit_text, reason = parts[0], parts[1], parts[2]
            why = reason.strip()
            outcome = outcomes[fields] = (normalize_state(state_raw, None if why in _NONE else why), state_raw,
                                          parse_exit_code(exit_text)[0])
        groups.setdefault((base, outcome[0], outcome[1], outcome[2], base + "_", ""), []).extend(indices)
    table = StatusTable(groups, records=tasks)
    return table if _unrepeated(table) else StatusTable.from_records(parse_sacct_status(stdout))


def _unrepeated(table: StatusTable) -> bool:
    """Note the table's array ids; whether no task is in it twice (else its answer's last record must win)."""
    arrays: defaultdict[str, list[list[int]]] = defaultdict(list)
    for key, indices in table.groups.items():
        arrays[key[0]].append(indices)
    table.parents = set(arrays)
    return all(sum(map(len, lists)) == len(set().union(*lists)) for lists in arrays.values())


def _by_line(stdout: str) -> StatusTable:
    """:func:`sacct_status_table`, one line at a time."""
    groups: defaultdict[GroupKey, list[int]] = defaultdict(list)
    states: dict[tuple[str, str], str] = {}
    codes: dict[str, int | None] = {}
    others: list[str] = []
    n = 0
    for line in stdout.splitlines():
        if not line or line.isspace():
            continue
        jid, _, rest = line.partition("|")
        base, us, task = jid.partition("_")
        if not (us and base.isdecimal() and task.isdecimal() and task.isascii() and (task[0] != "0" or task == "0")):
            if "." in jid and (_PLAIN_STEP.fullmatch(jid) or parse_job_id(jid).is_step):  # a bad id raises
                continue
            others.append(line)
            continue
        parts = rest.split("|", 4)
        if len(parts) < 4:
            parts += [""] * (4 - len(parts))
        state_raw, exit_text, reason = parts[1], parts[2], parts[3]
        state = states.get((state_raw, reason))
        if state is None:
            why = reason.strip()
            state = states[(state_raw, reason)] = normalize_state(state_raw, None if why in _NONE else why)
        code = codes.get(exit_text, -1)
        if code == -1:
            code = codes[exit_text] = parse_exit_code(exit_text)[0]
        groups[(base, state, state_raw, code, base + "_", "")].append(int(task))
        n += 1
    table = StatusTable(dict(groups), records=n)
    if not _unrepeated(table):
        return StatusTable.from_records(parse_sacct_status(stdout))  # a task given twice: the last one wins
    if others:
        records = parse_sacct_status("\n".join(others))
        if any(r.array_job_id in table.parents for r in records):  # a range beside tasks of the same array
            return StatusTable.from_records(parse_sacct_status(stdout))
        table.add_records(records)
    return table


__all__ = ["sacct_status_table"]
