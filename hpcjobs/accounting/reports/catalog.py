"""Every table a report can hold: its name, section, heading and the inputs it needs.

The builders (:func:`hpcjobs.accounting.reports.tables.report_tables`, the sweep and per-job tables)
make the tables; this catalog says where each goes (the HTML page's sections, ``--section``), what it
is called on a page, and what it is made from, so that ``hpcjobs report --table NAME`` can say which
tables exist and why one is absent. Importing it imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The report's sections, in page order, with their headings.
SECTIONS: dict[str, str] = {"efficiency": "Efficiency and waste", "wait": "Queue wait", "failures": "Failures"}

#: What ``--section`` takes (``all``: every section).
SECTION_CHOICES = (*SECTIONS, "all")

#: The inputs a table can need: the scheduler's accounting rows, the in-job GPU sampler files, the
#: sweep's ledger (its points and attempts).
INPUTS = ("jobs", "gpu", "ledger")


@dataclass(frozen=True)
class ReportTable:
    """One table of a report.

    Attributes:
        name: Its key in the report (``--table NAME``, the JSON key, the ``# NAME`` CSV line).
        section: The section it belongs to (a key of :data:`SECTIONS`).
        heading: Its heading on a page.
        inputs: What it is made from (of :data:`INPUTS`); every table needs ``jobs``.
        when: When it is made, for a person asking about an absent table.
    """

    name: str
    section: str
    heading: str
    inputs: tuple[str, ...] = ("jobs",)
    when: str = "always"


def _tables() -> dict[str, ReportTable]:
    wait_keys = ("partition", "gpus", "nodes", "hour", "weekday", "walltime")
    tables = [
        *(ReportTable(f"waste_by_{k}", "efficiency", f"Waste by {k}") for k in ("user", "account", "partition")),
        ReportTable("worst_cpu_waste", "efficiency", "Worst cpu waste"),
        ReportTable("worst_gpu_waste", "efficiency", "Worst gpu waste", ("jobs", "gpu"),
                    "when some job allocated GPUs"),
        ReportTable("right_sizing", "efficiency", "Right sizing"),
        *(ReportTable(f"wait_by_{k}", "wait", f"Wait by {k}") for k in wait_keys),
        ReportTable("failures_by_state", "failures", "Failures by state"),
        ReportTable("failures_by_exit", "failures", "Failures by exit"),
        ReportTable("sweep_points", "failures", "Sweep points", ("jobs", "ledger"),
                    "with --sweep, when the sweep's ledger is on this machine"),
        ReportTable("failures_by_param", "failures", "Failures by param", ("jobs", "ledger"),
                    "with --sweep, when the sweep's ledger is on this machine"),
        ReportTable("jobs", "efficiency", "Jobs", ("jobs",), "with --jobs (one row per job, instead of the others)"),
    ]
    return {t.name: t for t in tables}


#: Every table, by name, in display order.
REPORT_TABLES: dict[str, ReportTable] = _tables()


def table_info(name: str) -> ReportTable:
    """The catalog entry of ``name``; a table the catalog does not know goes to ``efficiency`` under its name."""
    known = REPORT_TABLES.get(name)
    if known is not None:
        return known
    return ReportTable(name, "efficiency", name.replace("_", " ").capitalize())


def tables_of(section: str) -> list[str]:
    """The names of the tables ``section`` (or ``all``) can hold, in display order (``jobs`` aside)."""
    return [t.name for t in REPORT_TABLES.values() if t.name != "jobs" and section in (t.section, "all")]
