"""A status answer held by column: array tasks grouped by job and outcome, not one object per task.

A poll of a million-point sweep is a million array tasks. :class:`StatusTable` keeps them as
groups, one per (array job, state, scheduler state text, exit code, task id spelling), each with the
list of its task indices, and plain (non-array) jobs in a small dict. The sweep ledger applies a group
with one SQL statement (:meth:`hpcjobs.sweep.ledger.store.Ledger.apply_status`).

It says the same as the list of :class:`hpcjobs.schedulers.base.JobStatus` records it is built from
(:meth:`StatusTable.from_records`), with the ledger's rule that a later record for the same task or
job wins; a backend may also build it straight from the scheduler's text
(``parse_status_table``, e.g. :func:`hpcjobs.schedulers.slurm.bulk.sacct_status_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from hpcjobs.schedulers.base import JobStatus
from hpcjobs.units import is_ascii_digits

#: ``(array_job_id, state, state_raw, exit_code, id_prefix, id_suffix)``. A task's own job id is
#: ``id_prefix + str(index) + id_suffix``; ``id_prefix`` ``None``: the record named no task id (a
#: collapsed pending range), so the id recorded for the task is kept.
GroupKey = tuple[str, str, str, "int | None", "str | None", "str | None"]
#: ``(state, state_raw, exit_code)`` of a plain job.
Outcome = tuple[str, str, "int | None"]


def task_indices(spec: str) -> list[int]:
    """Indices of a collapsed array range: ``5-9%2`` → 5..9, ``1,3,7-9`` → 1,3,7,8,9, ``0-8:4`` → 0,4,8."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        part = part.strip()
        if not part:
            continue
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        try:
            a, b, s = int(lo), int(hi or lo), int(step or 1)
        except ValueError:
            continue
        out.extend(range(a, b + 1, max(s, 1)))
    return out


def _split_task_id(job_id: str, index: int) -> tuple[str, str]:
    """``(prefix, suffix)`` with ``prefix + str(index) + suffix == job_id`` (``123_4`` → ``123_``, ``""``).

    The index after ``_`` or ``[`` is preferred (``1234[1].s1`` → ``1234[``, ``].s1``).

    Raises:
        ValueError: The index is not in the id.
    """
    text = str(index)
    at = -1
    for lead in ("_", "["):
        at = job_id.rfind(lead + text)
        while at >= 0:
            end = at + 1 + len(text)
            if end == len(job_id) or not is_ascii_digits(job_id[end]):
                return job_id[:at + 1], job_id[end:]
            at = job_id.rfind(lead + text, 0, at)
    at = job_id.rfind(text)
    if at < 0:
        raise ValueError(f"{index} is not in {job_id!r}")
    return job_id[:at], job_id[at + len(text):]


@dataclass
class StatusTable:
    """One status answer, by column.

    Attributes:
        groups: Task indices per :data:`GroupKey` (a task is in one group at most).
        plain: Plain job id → :data:`Outcome`.
        parents: Array job ids the answer mentions.
        ids: Ids of its records that are not one array task (plain jobs, collapsed ranges).
        records: How many records it was made of (tasks, ranges and plain jobs).
        digest: SHA-256 of the scheduler's text it was read from, when it was read from one.
        known: Set for an answer recognised as one already applied (:meth:`recognised`): there is
            nothing in it to apply, and these are the ids it covers.
    """

    groups: dict[GroupKey, list[int]] = field(default_factory=dict)
    plain: dict[str, Outcome] = field(default_factory=dict)
    parents: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    records: int = 0
    digest: str | None = None
    known: frozenset[str] | None = None
    _task_ids: set[str] | None = field(default=None, repr=False)

    @classmethod
    def recognised(cls, digest: str, covered: Iterable[str]) -> StatusTable:
        """An answer identical to one already applied (same text, ``digest``) to a ledger unchanged since.

        It has nothing to apply; it covers the ids ``covered`` (every id asked, as the last time).
        """
        return cls(digest=digest, known=frozenset(covered))

    @classmethod
    def from_records(cls, records: Iterable[JobStatus]) -> StatusTable:
        """The table of a list of records; a later record for the same task or job wins."""
        tasks: dict[tuple[str, int], tuple[str, str, int | None, str | None]] = {}
        table = cls()
        table.add_records(records, tasks)
        return table

    def add_records(self, records: Iterable[JobStatus],
                    tasks: dict[tuple[str, int], tuple[str, str, int | None, str | None]] | None = None) -> None:
        """Add records (e.g. a fallback query's answer for ids the first one left out); later ones win."""
        tasks = {} if tasks is None else tasks
        if self.groups:  # the tasks already here, so that a later record replaces theirs
            for key, indices in self.groups.items():
                for i in indices:
                    tasks[(key[0], i)] = (key[1], key[2], key[3], None if key[4] is None else task_job_id(key, i))
        n = 0
        for rec in records:  # the cases of Ledger.record_status, in its order
            n += 1
            outcome = (rec.state, rec.state_raw, rec.exit_code)
            if rec.array_job_id is not None:
                self.parents.add(rec.array_job_id)
            if rec.array_job_id is not None and rec.array_task_id is not None:
                tasks[(rec.array_job_id, rec.array_task_id)] = (*outcome, rec.job_id)
                continue
            self.ids.add(rec.job_id)
            if rec.array_job_id is not None and rec.array_task_spec:
                for i in task_indices(rec.array_task_spec):
                    tasks[(rec.array_job_id, i)] = (*outcome, None)
            elif rec.array_task_spec is None:  # a plain job (or an array's own record: matched like one)
                self.plain[rec.job_id] = outcome
        groups: dict[GroupKey, list[int]] = {}
        for (aid, i), (state, raw, code, jid) in tasks.items():
            prefix: str | None = None
            suffix: str | None = None
            if jid is not None:
                try:
                    prefix, suffix = _split_task_id(jid, i)
                except ValueError:
                    prefix, suffix = jid, None  # an id without its index: kept whole (see task_job_id)
            groups.setdefault((aid, state, raw, code, prefix, suffix), []).append(i)
        self.groups = groups
        self.records += n
        self._task_ids = None

    def array_records(self) -> Iterator[tuple[GroupKey, list[int]]]:
        """``(key, task indices)`` of every group."""
        return iter(self.groups.items())

    def __len__(self) -> int:
        return self.records

    def covers(self, job_id: str, same: Callable[[str, str], bool] | None = None) -> bool:
        """Whether the answer says anything about ``job_id`` (a job, an array, or one array task).

        Args:
            job_id: The id asked about.
            same: The backend's ``same_job`` (ids written differently for one job); default: equality.
        """
        if self.known is not None:
            return job_id in self.known or (same is not None and any(same(j, job_id) for j in self.known))
        if job_id in self.parents or job_id in self.ids:
            return True
        if same is not None and any(same(j, job_id) for j in (*self.parents, *self.ids)):
            return True
        if self._task_ids is None:
            self._task_ids = {task_job_id(key, i) for key, indices in self.groups.items() if key[4] is not None
                              for i in indices}
        if job_id in self._task_ids:
            return True
        return same is not None and any(same(j, job_id) for j in self._task_ids)


def task_job_id(key: GroupKey, index: int) -> str:
    """The job id of task ``index`` of a group (its prefix, the index, its suffix)."""
    prefix, suffix = key[4], key[5]
    if prefix is None:
        return ""
    return prefix if suffix is None else f"{prefix}{index}{suffix}"


__all__ = ["GroupKey", "Outcome", "StatusTable", "task_indices", "task_job_id"]
