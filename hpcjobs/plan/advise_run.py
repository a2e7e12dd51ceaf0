"""One call from an advice request to the advice and its queue-wait comparison: what ``hpcjobs advise`` runs.

:func:`build_advice` reads the runs (one sweep's, every sweep of an experiment name, or a saved
scheduler output: :func:`hpcjobs.plan.rightsize.load_history`), puts the site whose partition limits
apply in place of the sweep's when one is named, computes the advice
(:func:`hpcjobs.plan.rightsize.advise_history`), and compares the expected queue wait of the asked
and of the proposed request (:func:`hpcjobs.plan.advice_wait.advice_wait`) when the request's
:attr:`AdviceRequest.wait` says so. Nothing is printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hpcjobs.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from hpcjobs.accounting.reports.advise import Advice, AdviceSettings
    from hpcjobs.plan.advice_wait import WaitComparison

#: When the queue waits are compared: ``auto`` unless only a saved file is read (no live history query
#: then), ``always``, or ``never``.
WaitMode = Literal["auto", "always", "never"]
WAIT_MODES: tuple[str, ...] = ("auto", "always", "never")

#: Days of accounting history the queue waits are read from, as ``hpcjobs plan`` reads it.
DEFAULT_WAIT_DAYS = 14


@dataclass(frozen=True)
class AdviceRequest:
    """Which runs advice is drawn from, how it is computed, and whether queue waits are compared.

    Attributes:
        sweep: A sweep as ``status`` takes it (id, name, unique prefix or folder).
        name: An experiment name: every sweep of that name in the sweep folder.
        from_file: A saved scheduler output (alone: all its jobs; with ``sweep``/``name``: their jobs in it).
        settings: Quantile, margin and runs needed (default: :class:`AdviceSettings`'s defaults).
        site: The site config (name or file) whose partition limits apply (default: the sweep's).
        scheduler: Settles the dialect of a saved file two schedulers share (PBS Pro vs Torque); for a
            sweep read live, its scheduler in place of the ledger's.
        tz: Time zone of the saved file's times.
        sacct_fields: ``--format`` fields of headerless saved sacct text.
        root: Folder of sweep folders.
        days: Days of accounting history for the queue-wait comparison.
        wait: When to compare queue waits (:data:`WaitMode`): ``auto`` compares unless the runs come from
            a saved file alone, ``always`` compares (``--days`` given), ``never`` does not (``--no-history``).
    """

    sweep: str | None = None
    name: str | None = None
    from_file: str | None = None
    settings: AdviceSettings | None = None
    site: str | None = None
    scheduler: str | None = None
    tz: str | None = None
    sacct_fields: Sequence[str] | None = None
    root: str | Path | None = None
    days: int = DEFAULT_WAIT_DAYS
    wait: WaitMode = "auto"

    def check(self) -> None:
        """Refuse a request that cannot be answered, before anything is read.

        Raises:
            ConfigError: An unknown ``wait`` mode or fewer than one day of history (exit 2).
        """
        if self.wait not in WAIT_MODES:
            raise ConfigError(ConfigProblem(f"unknown queue-wait mode {self.wait!r}", key="wait", choices=WAIT_MODES))
        if self.days < 1:
            raise ConfigError(ConfigProblem(f"--days must be at least 1, not {self.days}", key="--days"))

    def compares_wait(self) -> bool:
        """Whether the queue waits are compared: never with ``never``; with ``auto`` not for a saved file alone."""
        if self.wait == "never":
            return False
        return self.wait == "always" or self.from_file is None


@dataclass(frozen=True)
class AdviceReport:
    """What ``hpcjobs advise`` shows.

    Attributes:
        label: What the runs are (``sweep fit-1a2b3c4d``, ``3 sweeps named fit``, ``file sacct.txt``).
        advice: The proposals, the raises and the savings.
        wait: The queue wait of the asked and the proposed request (``None``: not compared).
    """

    label: str
    advice: Advice
    wait: WaitComparison | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``source`` (the label), the advice's fields and ``queue_wait`` (``None``: not compared)."""
        return {"source": self.label, **self.advice.as_dict(),
                "queue_wait": self.wait.as_dict() if self.wait is not None else None}


def build_advice(request: AdviceRequest) -> AdviceReport:
    """Read the runs, compute the advice within the site's limits, and compare queue waits when asked.

    Raises:
        ConfigError: Nothing to read from, no such sweep, name or site, unreadable input (exit 2).
        CommandError: A live accounting query failed.
    """
    request.check()
    from dataclasses import replace

    from hpcjobs.plan.rightsize import advise_history, load_history

    history = load_history(request.sweep, name=request.name, from_file=request.from_file, root=request.root,
                           scheduler=request.scheduler, tz=request.tz,
                           sacct_fields=list(request.sacct_fields) if request.sacct_fields else None)
    if request.site:
        from hpcjobs.render.script import load_checked_site_named

        history = replace(history, site=load_checked_site_named(request.site))
    advice = advise_history(history, request.settings)
    wait = None
    if request.compares_wait():
        from hpcjobs.plan.advice_wait import advice_wait

        wait = advice_wait(advice, history.jobs, days=request.days)
    return AdviceReport(history.label, advice, wait)


__all__ = ["DEFAULT_WAIT_DAYS", "WAIT_MODES", "AdviceReport", "AdviceRequest", "WaitMode", "build_advice"]
