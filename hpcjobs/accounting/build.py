"""One call from a report request to its tables, figures and page: what ``hpcjobs report`` runs.

:func:`build_report` reads the accounting data (a live query or a saved file), narrows it to a sweep
when asked (each point counted by its final attempt), adds the GPU sampler files, makes the tables
of the section (or one row per job), and writes the figures and the HTML page when asked. The
notes a person should see (skipped records, inputs that look wrong, a ledger that is not here) come
back in :attr:`Report.warnings`; nothing is printed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs.accounting.report_source import ReportFilters
from hpcjobs.accounting.reports.catalog import REPORT_TABLES, SECTION_CHOICES, table_info
from hpcjobs.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    import pandas as pd



@dataclass(frozen=True)
class ReportRequest:
    """What a report is about, where its data comes from, and what to make of it.

    Attributes:
        filters: Period, users, accounts, partitions and sweep (:class:`ReportFilters`).
        all_attempts: With a sweep: count the attempts a resubmission replaced too.
        scheduler: The scheduler asked live (default: the sweep's, else Slurm); with ``from_file`` it
            settles the dialect of a file two schedulers share (PBS Pro vs Torque).
        from_file: A saved scheduler output to read instead of asking.
        tz: The time zone the saved file's times were written in.
        all_users: A live query of every user.
        sacct_fields: The ``--format`` fields of headerless saved sacct text.
        delimiter: The ``--delimiter`` of saved sacct text (default: detected).
        gpu_logs: A folder of in-job GPU sampler files (``*.gpu.csv``).
        section: One of :data:`SECTION_CHOICES`.
        table: Only this table of the section.
        top: Rows of the worst-offender tables.
        per_job: One row per job instead of the summary tables.
        columns: With ``per_job``: the columns to show.
        plot_dir: Write the figures there.
        plot_format: ``png`` or ``svg``.
        html_file: Write a self-contained HTML page there.
        remote: ``--remote [USER@]HOST[:PORT]``: ask the scheduler of that login node over SSH (a sweep
            submitted from this machine over SSH is asked on its own login node without it; a saved file
            given with ``from_file`` is read here).
        site: A site (name or file) whose scheduler is asked: over SSH when it has a ``remote:`` block.
    """

    filters: ReportFilters = field(default_factory=ReportFilters)
    all_attempts: bool = False
    scheduler: str | None = None
    from_file: str | None = None
    tz: str | None = None
    all_users: bool = False
    sacct_fields: Sequence[str] | None = None
    delimiter: str | None = None
    gpu_logs: str | None = None
    section: str = "all"
    table: str | None = None
    top: int = 20
    per_job: bool = False
    columns: Sequence[str] | None = None
    plot_dir: str | None = None
    plot_format: str = "png"
    html_file: str | None = None
    remote: str | None = None
    site: str | None = None

    def check(self) -> None:
        """Refuse options that do not go together, before anything is read.

        Raises:
            ConfigError: An empty sweep id, ``all_attempts`` without a sweep, ``columns`` without
                ``per_job``, an unknown section or plot format, or a table no report has (exit 2).
        """
        sweep = self.filters.sweep
        if sweep is not None:  # '' would be a prefix of every sweep id
            from hpcjobs.ids import check_id_argument

            check_id_argument(sweep, what="sweep", key="--sweep")
        if self.all_attempts and not sweep:
            raise ConfigError(ConfigProblem("--all-attempts goes with --sweep", key="--all-attempts"))
        if self.columns and not self.per_job:
            raise ConfigError(ConfigProblem("--columns goes with --jobs", key="--columns"))
        if self.section not in SECTION_CHOICES:
            raise ConfigError(ConfigProblem(f"unknown section {self.section!r}", key="--section",
                                            choices=SECTION_CHOICES))
        if self.plot_format not in ("png", "svg"):
            raise ConfigError(ConfigProblem(f"unknown plot format {self.plot_format!r}", key="--plot-format",
                                            choices=("png", "svg")))
        if self.table is not None and self.table not in REPORT_TABLES:
            raise ConfigError(ConfigProblem(f"no report has a table {self.table!r}", key="--table",
                                            choices=tuple(REPORT_TABLES)))

    def subtitle(self) -> str:
        """What the report covers, in one line (the HTML page's subtitle)."""
        f = self.filters
        parts = (("since", f.since.isoformat() if f.since else None),
                 ("until", f.until.isoformat() if f.until else None),
                 ("user", ",".join(f.users)), ("account", ",".join(f.accounts)),
                 ("partition", ",".join(f.partitions)), ("sweep", f.sweep), ("file", self.from_file))
        return ", ".join(f"{k}={v}" for k, v in parts if v) or "all jobs"


@dataclass
class Report:
    """A built report.

    Attributes:
        tables: The tables, by name, in display order (see :mod:`hpcjobs.accounting.reports.catalog`).
        jobs: The schema rows the tables were made from.
        gpu: The per-job GPU summary, when GPU sampler files were given.
        sweep_id: The sweep reported on, if any.
        attempts: The sweep's attempts from its ledger (``None`` without a sweep, or when its ledger is not here).
        warnings: What a person should be told (skipped records, suspect inputs, a missing ledger).
        written: The figure files and the HTML page written, in order.
    """

    tables: dict[str, pd.DataFrame]
    jobs: pd.DataFrame
    gpu: pd.DataFrame | None = None
    sweep_id: str | None = None
    attempts: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


def _read(request: ReportRequest, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame | None, str | None,
                                                           pd.DataFrame | None]:
    """The report's rows, the sweep's attempts and id, and the GPU summary, with skipped-record warnings as notes."""
    from hpcjobs.accounting.report_source import load_report_frame
    from hpcjobs.skipped import SkippedRecordsWarning

    read: dict[str, Any] = {"from_file": request.from_file, "scheduler": request.scheduler, "tz": request.tz,
                            "all_users": request.all_users,
                            "sacct_fields": list(request.sacct_fields) if request.sacct_fields else None,
                            "delimiter": request.delimiter}
    attempts = sweep_id = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedRecordsWarning)
        if request.filters.sweep:
            from hpcjobs.accounting.sweep_attempts import load_sweep_report

            data = load_sweep_report(request.filters, all_attempts=request.all_attempts, **read)
            df, attempts, sweep_id = data.jobs, data.attempts, data.sweep_id
        else:
            df = load_report_frame(request.filters, **read)
        gpu = None
        if request.gpu_logs:
            from hpcjobs.accounting.sources.gpu import find_gpu_files, gpu_job_summary

            gpu = gpu_job_summary(find_gpu_files(request.gpu_logs))
    for w in caught:
        if issubclass(w.category, SkippedRecordsWarning):
            notes.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return df, attempts, sweep_id, gpu


#: How many ids of unfinished jobs a note names (the count is always complete).
_LISTED_IDS = 5


def reader_notes(df: pd.DataFrame) -> list[str]:
    """What the reader of the data left for a person: ``df.attrs["notes"]`` (a queue snapshot read as a report)
    and the jobs of an accounting log left out because they had not ended (``df.attrs["unfinished"]``)."""
    notes = [str(n) for n in df.attrs.get("notes") or ()]
    unfinished = list(df.attrs.get("unfinished") or ())
    if unfinished:
        n = len(unfinished)
        shown = ", ".join(unfinished[:_LISTED_IDS]) + (f" and {n - _LISTED_IDS} more" if n > _LISTED_IDS else "")
        notes.append(f"{n} job{'s' if n != 1 else ''} had not ended when the accounting log was written (still "
                     f"queued or running) and {'are' if n != 1 else 'is'} not counted: {shown}")
    return notes


def _tables(request: ReportRequest, df: pd.DataFrame, attempts: pd.DataFrame | None,
            gpu: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """The tables the request asks for, from the rows already read."""
    columns = list(request.columns) if request.columns else None
    if request.per_job and attempts is not None:
        from hpcjobs.accounting.reports.sweeps import sweep_jobs_table

        return {"jobs": sweep_jobs_table(df, attempts, columns, gpu=gpu, with_replaced=request.all_attempts)}
    if request.per_job:
        from hpcjobs.accounting.reports.jobs import jobs_table

        return {"jobs": jobs_table(df, columns, gpu=gpu)}
    if attempts is not None:
        from hpcjobs.accounting.reports.sweeps import sweep_report_tables

        return sweep_report_tables(df, attempts, request.section, gpu=gpu, top=request.top,
                                   all_attempts=request.all_attempts)
    from hpcjobs.accounting.reports.tables import report_tables

    return report_tables(df, request.section, gpu=gpu, top=request.top)


def _only(tables: dict[str, pd.DataFrame], request: ReportRequest) -> dict[str, pd.DataFrame]:
    """``tables`` narrowed to ``request.table``; a table this report lacks is refused with the reason."""
    name = request.table
    if name is None:
        return tables
    if name not in tables:
        info = table_info(name)
        raise ConfigError(f"no table {name!r} in section {request.section}; tables: {', '.join(tables)}"
                          + ("" if info.when == "always" else f" ({name} is made {info.when})"))
    return {name: tables[name]}


def build_report(request: ReportRequest) -> Report:
    """Read, narrow, tabulate and (when asked) draw one report.

    Raises:
        ConfigError: Options that do not go together, unreadable or unknown input, no such sweep or
            table (exit 2).
        CommandError: A live scheduler query failed (its command, exit code and stderr).
    """
    request.check()
    notes: list[str] = []
    from hpcjobs import transport
    from hpcjobs.transport.login import parse_remote_option

    login = parse_remote_option(request.remote) if request.remote and not request.from_file else None
    if request.site is not None:
        from dataclasses import replace

        from hpcjobs.config.sites import load_site
        from hpcjobs.sweep.request import site_login

        site = load_site(request.site)
        request = replace(request, scheduler=request.scheduler or site.scheduler)
        login = None if request.from_file else site_login(site, request.remote)
    with transport.scope():  # over SSH: one connection for every query of the report
        transport.use(login)
        df, attempts, sweep_id, gpu = _read(request, notes)
    from hpcjobs.accounting.reports.rows import input_warnings

    notes += reader_notes(df) + input_warnings(df)
    if request.filters.sweep and attempts is None:
        notes.append(f"the ledger of sweep {sweep_id!r} is not on this machine: every attempt is counted and the "
                     "parameters are unknown")
    tables = _only(_tables(request, df, attempts, gpu), request)
    report = Report(tables, df, gpu, sweep_id, attempts, notes)
    _check_outputs(request)  # both, before either is written: a bad --html leaves no figures behind
    if request.plot_dir:
        from hpcjobs.accounting.reports.plots import report_figures, save_figure

        for name, fig in report_figures(df, request.section, gpu=gpu, tables=tables).items():
            report.written.append(save_figure(fig, Path(request.plot_dir) / f"{name}.{request.plot_format}",
                                              what="--plot"))
    if request.html_file:
        from hpcjobs.accounting.reports.page import write_page

        log_folder = metrics = None
        if attempts is not None and "sweep_points" in tables:
            from hpcjobs.accounting.report_source import local_sweep
            from hpcjobs.sweep.results import results_frame

            log_folder = local_sweep(sweep_id or request.filters.sweep or "")
            if log_folder is not None:  # the points' result metrics, as `hpcjobs results` reads them
                metrics = results_frame(log_folder, tables["sweep_points"]["point_id"].astype(str).tolist())
        title = f"hpcjobs sweep report: {sweep_id}" if sweep_id else "hpcjobs accounting report"
        report.written.append(write_page(request.html_file, df, section=request.section, gpu=gpu, title=title,
                                         subtitle=request.subtitle(), tables=tables, log_folder=log_folder,
                                         metrics=metrics, notes=notes, what="--html"))
    return report


def _check_outputs(request: ReportRequest) -> None:
    """Refuse a ``--plot`` folder or an ``--html`` file that cannot be written (the folders are made).

    Raises:
        ConfigError: One is (or goes through) a FIFO, a device, a file where a folder is needed, or is too long.
        FileSystemError: A folder cannot be made (permission, space).
    """
    from hpcjobs.safe_files import refuse_special_target, user_folder

    if request.plot_dir:
        user_folder(request.plot_dir, what="--plot")
    if request.html_file:
        refuse_special_target(request.html_file, what="--html")
        user_folder(Path(request.html_file).parent, what="--html")
