"""Accounting: what the scheduler recorded, as typed pandas DataFrames, and reports on it.

The package has three parts and some plumbing:

* :mod:`hpcjobs.accounting.sources`: one reader per source (Slurm ``sacct`` text and ``--json``, ``squeue --json``,
  PBS Pro/OpenPBS and Torque accounting logs and ``qstat``, hpcjobs' GPU sampler files), each
  returning the DataFrame of :mod:`hpcjobs.accounting.schema`;
* :mod:`hpcjobs.accounting.sacct`: the engine that turns ``sacct --parsable2`` text into typed
  columns (with the optional compiled scanner);
* :mod:`hpcjobs.accounting.reports`: tables (efficiency, queue wait, failures, sweeps, jobs),
  figures and the HTML page built from such a DataFrame;
* plumbing at this level: the schema, skipped-record warnings, the ``sacct`` window cache, input
  checks and :mod:`~hpcjobs.accounting.report_source` (what ``hpcjobs report`` reads).

The public functions are importable from here by name (``from hpcjobs.accounting import
read_sacct_parsable2, efficiency``). They are loaded on first use: importing this package imports
neither pandas nor any of its modules; the CLI imports them only inside the commands that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name → the module (below this package, or an absolute ``hpcjobs.`` name) that defines it.
_EXPORTS: dict[str, str] = {
    # sources
    **dict.fromkeys(("read_sacct_parsable2", "query_sacct", "sacct_accounting_argv", "SACCT_ACCOUNTING_FIELDS",
                     "SACCT_QUERY_FIELDS"), "sources.slurm"),
    "read_sacct_json": "sources.slurm_json",
    "read_squeue_json": "sources.slurm_queue",
    **dict.fromkeys(("read_pbs_accounting", "read_qstat_json", "read_qstat_text"), "sources.pbs"),
    **dict.fromkeys(("read_torque_accounting", "read_torque_qstat_xml", "read_torque_qstat_text"), "sources.torque"),
    **dict.fromkeys(("read_gpu_samples", "gpu_summary", "gpu_job_summary", "find_gpu_files"), "sources.gpu"),
    # plumbing
    **dict.fromkeys(("COLUMNS", "empty_frame", "conform"), "schema"),
    "SkippedRecordsWarning": "hpcjobs.skipped",
    **dict.fromkeys(("ReportFilters", "parse_when", "detect_format", "read_saved", "apply_filters",
                     "load_report_frame"), "report_source"),
    # reports
    **dict.fromkeys(("job_rows", "input_warnings"), "reports.rows"),
    **dict.fromkeys(("efficiency", "worst_offenders", "waste_summary", "failures", "failures_by_state",
                     "failures_by_exit", "exit_meaning", "report_tables", "EFFICIENCY_COLUMNS", "OFFENDER_COLUMNS",
                     "LOW_IS_BAD", "SECTIONS"), "reports.tables"),
    **dict.fromkeys(("queue_wait", "queue_wait_report", "WAIT_KEYS", "WALLTIME_BINS"), "reports.wait"),
    **dict.fromkeys(("sweep_frame", "failure_params", "SWEEP_FATE_COLUMNS", "failures_by_param", "label_attempts",
                     "final_attempts", "sweep_points_table", "sweep_jobs_table", "sweep_report_tables"),
                    "reports.sweeps"),
    **dict.fromkeys(("jobs_table", "DEFAULT_JOB_COLUMNS"), "reports.jobs"),
    **dict.fromkeys(("report_figures", "save_figure"), "reports.plots"),
    "write_page": "reports.page",
    **dict.fromkeys(("REPORT_TABLES", "ReportTable"), "reports.catalog"),
    # one call: a request to its tables, figures and page
    **dict.fromkeys(("build_report", "ReportRequest", "Report"), "build"),
    **dict.fromkeys(("load_sweep_report", "sweep_attempts_frame", "SweepReportData", "params_frame"),
                    "sweep_attempts"),
}

__all__ = sorted(_EXPORTS)

def __getattr__(name: str) -> Any:
    """Load a public name from the module that defines it, on first use (PEP 562).

    Raises:
        AttributeError: ``name`` is not public here (submodules are found by the import system).
    """
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module if module.startswith("hpcjobs.") else f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
