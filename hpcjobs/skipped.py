"""Records a reader could not turn into rows: counted, located and reported, never dropped silently.

Every accounting reader either makes a row of each record or lists it here. The list travels with
the frame as ``df.attrs["skipped"]`` (one :class:`Skipped` per record) and is announced once per
read with :func:`warnings.warn` and the :class:`SkippedRecordsWarning` category, whose text reads
``2 records skipped: line 14: <why>; line 20: <why>``. ``hpcjobs report`` prints that text as one
line on stderr.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: How many skipped records the warning text lists one by one (the count is always complete).
LISTED = 5


class SkippedRecordsWarning(UserWarning):
    """Some records of an accounting input were not read; ``skipped`` lists them.

    Attributes:
        skipped: The records, in input order.
    """

    def __init__(self, skipped: Sequence[Skipped]) -> None:
        self.skipped = list(skipped)
        super().__init__(describe(self.skipped))


@dataclass(frozen=True)
class Skipped:
    """One record that did not become a row.

    Attributes:
        line: 1-based line of the record in its input (``None`` when the input has no lines).
        reason: Why it was skipped, in words.
        text: The start of the record, for the message.
        file: The file it is in, when the input was a file or several.
    """

    line: int | None
    reason: str
    text: str = ""
    file: str | None = None

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line) if p is not None)
        head = f"line {where}" if self.line is not None and self.file is None else where
        shown = self.text if len(self.text) <= 60 else self.text[:59] + "…"
        return f"{head + ': ' if head else ''}{self.reason}" + (f" ({shown!r})" if shown else "")


def describe(skipped: Sequence[Skipped]) -> str:
    """``N record(s) skipped: line 14: why; ...`` (the first :data:`LISTED` of them spelled out)."""
    n = len(skipped)
    listed = "; ".join(str(s) for s in skipped[:LISTED])
    more = f"; and {n - LISTED} more" if n > LISTED else ""
    return f"{n} record{'s' if n != 1 else ''} skipped: {listed}{more}"


def attach(df: pd.DataFrame, skipped: Sequence[Skipped], *, stacklevel: int = 3) -> pd.DataFrame:
    """Record ``skipped`` in ``df.attrs["skipped"]`` and warn once when it is not empty.

    Args:
        df: The frame the reader returns.
        skipped: What it skipped.
        stacklevel: Passed to :func:`warnings.warn` (point at the reader's caller).

    Returns:
        ``df`` itself.
    """
    df.attrs["skipped"] = list(skipped)
    if skipped:
        warnings.warn(SkippedRecordsWarning(skipped), stacklevel=stacklevel)
    return df
