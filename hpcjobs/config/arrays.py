"""A job array's index range, as the experiment and the sweep ask for it.

It lives below :mod:`hpcjobs.resolve` (a resolved job carries one) and below the scheduler
backends, which turn it into their own syntax (``--array``, ``-J``, ``-t``);
:mod:`hpcjobs.schedulers.base` re-exports it under its old name.
"""

from __future__ import annotations

from dataclasses import dataclass


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
