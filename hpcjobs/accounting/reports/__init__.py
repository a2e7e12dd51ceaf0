"""Reports on a schema DataFrame: tables, figures and the HTML page.

* :mod:`~hpcjobs.accounting.reports.rows`: the job rows every table starts from, and shared arithmetic;
* :mod:`~hpcjobs.accounting.reports.tables`: efficiency and waste, failures, and ``report_tables``;
* :mod:`~hpcjobs.accounting.reports.wait`: queue wait; :mod:`~hpcjobs.accounting.reports.sweeps`: sweep
  outcomes per parameter point; :mod:`~hpcjobs.accounting.reports.jobs`: one row per job;
* :mod:`~hpcjobs.accounting.reports.page`: the interactive HTML page; :mod:`~hpcjobs.accounting.reports.plots`:
  figure files (matplotlib); :mod:`~hpcjobs.accounting.reports.html`: how cells read.

The functions are importable by name from :mod:`hpcjobs.accounting`.
"""
