"""What a scheduler backend is: command builders plus pure parsers behind a small Protocol.

A backend never runs anything itself. :class:`hpcjobs.schedulers.client.SchedulerClient`
(or a test) pairs a backend's ``*_argv`` builders with
:func:`hpcjobs.process.run_command` and feeds the output to the backend's pure
``parse_*`` functions. That keeps every parser testable on recorded real output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Protocol

from hpcjobs.ids import check_values, is_safe_value


@dataclass(frozen=True)
class ArraySpec:
    """A job array's index range: ``start``..``end`` inclusive, every ``step``, at most ``throttle`` running."""

    start: int
    end: int
    step: int = 1
    throttle: int | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start or self.step < 1:
            raise ValueError(f"invalid array range {self.start}-{self.end}:{self.step}")
        if self.throttle is not None and self.throttle < 1:
            raise ValueError(f"invalid array throttle {self.throttle}")

    @property
    def size(self) -> int:
        """Number of tasks in the array."""
        return (self.end - self.start) // self.step + 1

    def indices(self) -> range:
        """The task indices."""
        return range(self.start, self.end + 1, self.step)


@dataclass(frozen=True)
class JobDependency:
    """Jobs a submission waits for, and for which ending of them.

    Attributes:
        condition: ``ok``: every job ended successfully (exit code 0; Slurm and PBS ``afterok``);
            ``any``: every job ended, in any state (``afterany``). An array job id stands for all its tasks.
        job_ids: The scheduler's ids (``123``, ``123[].server``).
    """

    condition: str
    job_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.condition not in ("ok", "any"):
            raise ValueError(f"unknown dependency condition {self.condition!r} (ok or any)")


@dataclass(frozen=True)
class SubmitOptions:
    """What a submission needs beyond the script itself.

    Attributes:
        array: Submit as a job array with this range.
        dependencies: Job ids this job must wait for (``afterok``).
        after: Further jobs it waits for, each group with its condition (pipelines: ``after:``).
        job_name: Override of the job name in the script.
        comment: Free text stored with the job (carries the hpcjobs tag).
        hold: Submit in a held state.
        extra_args: Raw extra arguments for the submit command (site escape hatch).
    """

    array: ArraySpec | None = None
    dependencies: tuple[str, ...] = ()
    after: tuple[JobDependency, ...] = ()
    job_name: str | None = None
    comment: str | None = None
    hold: bool = False
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobStatus:
    """One job's (or array task's) state as a status poll saw it.

    Attributes:
        job_id: The id as the scheduler prints it (``123``, ``123_4``, ``1234[7].server``).
        state: Normalised state (:mod:`hpcjobs.states`).
        state_raw: The scheduler's own state text.
        array_job_id: Parent array id, if this is an array task.
        array_task_id: Task index, if this is an array task (``None`` for a collapsed pending range).
        array_task_spec: The pending index range when several tasks share one record (``5-9%2``).
        exit_code: Exit status of the script, when finished and known.
        exit_signal: Signal that ended it, when known.
        reason: Why it is pending or how it ended, when the scheduler says.
        name: Job name.
        comment: Job comment (where the hpcjobs tag lives on Slurm).
    """

    job_id: str
    state: str
    state_raw: str
    array_job_id: str | None = None
    array_task_id: int | None = None
    array_task_spec: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    reason: str | None = None
    name: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class ClusterLimits:
    """Limits a scheduler enforces that shape how hpcjobs submits.

    Attributes:
        max_array_size: Array indices must be below this (Slurm MaxArraySize, PBS max_array_size).
        max_job_count: Jobs the controller holds at once (Slurm MaxJobCount).
        max_submit_jobs: Jobs one user may have queued or running, if limited.
        min_job_age_s: Seconds a finished job stays visible to ``squeue``/``qstat`` without ``-x``.
    """

    max_array_size: int | None = None
    max_job_count: int | None = None
    max_submit_jobs: int | None = None
    min_job_age_s: int | None = None


class JobIdGrammar:
    """:meth:`SchedulerBackend.valid_job_id` and :meth:`SchedulerBackend.check_job_ids` from a backend's
    :attr:`~SchedulerBackend.job_id_pattern`: the one check each backend's argv builders call."""

    #: What a job id of this scheduler is called in messages (``Slurm job id``).
    job_id_what: str = "job id"
    job_id_pattern: re.Pattern[str]
    job_id_grammar: str

    def valid_job_id(self, text: object) -> bool:
        """Whether ``text`` is spelled like one of this scheduler's job ids."""
        return is_safe_value(text, self.job_id_pattern)

    def check_job_ids(self, job_ids: Iterable[object], *, source: str | PathLike[str] | None = None) -> list[str]:
        """``job_ids`` as a list, each checked against :attr:`job_id_pattern` before it reaches an argv.

        Raises:
            UnsafeValueError: One is not a job id of this scheduler.
            TypeError: ``job_ids`` is one string (a list of ids is wanted).
        """
        if isinstance(job_ids, (str, bytes)):
            raise TypeError(f"check_job_ids takes a list of job ids, not the string {job_ids!r}")
        return check_values(job_ids, self.job_id_pattern, what=self.job_id_what, expected=self.job_id_grammar,
                            source=source)


class SchedulerBackend(Protocol):
    """Command builders and pure parsers for one scheduler family."""

    #: Registry key: ``slurm``, ``pbspro``, ``torque`` or ``local``.
    name: str
    #: The prefix of directive lines in a batch script (``#SBATCH``, ``#PBS``).
    directive_prefix: str
    #: Environment variable that holds the array index inside a running task.
    array_index_var: str
    #: The grammar of this scheduler's job ids, matched in full: every id that goes into one of the
    #: ``*_argv`` commands (read from a ledger, an index, a cache or the scheduler's own output) is
    #: checked against it first (:meth:`check_job_ids`), so none can be taken as an option.
    job_id_pattern: re.Pattern[str]
    #: :attr:`job_id_pattern` in words, for error messages.
    job_id_grammar: str

    def valid_job_id(self, text: object) -> bool:
        """Whether ``text`` is spelled like one of this scheduler's job ids (:attr:`job_id_pattern`)."""
        ...

    def check_job_ids(self, job_ids: Iterable[object], *, source: str | PathLike[str] | None = None) -> list[str]:
        """``job_ids`` as a list, each checked against :attr:`job_id_pattern`.

        Raises:
            UnsafeValueError: One is not a job id of this scheduler (the message names the value, and
                ``source`` or the file :func:`hpcjobs.ids.values_from` set).
        """
        ...

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """The command that submits ``script``."""
        ...

    def parse_submit(self, stdout: str) -> str:
        """The job id from the submit command's standard output."""
        ...

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One command that reports the state of all ``job_ids`` (finished ones included)."""
        ...

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """Parse the status command's output into one record per job or array task."""
        ...

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """The command that cancels ``job_ids``."""
        ...
