"""Readers, one per source of accounting records, each returning the schema DataFrame.

* :mod:`~hpcjobs.accounting.sources.slurm`: ``sacct --parsable2`` text (file, text or a live
  ``sacct`` query in day windows; the parsing itself is :mod:`hpcjobs.accounting.sacct`);
* :mod:`~hpcjobs.accounting.sources.slurm_json`: ``sacct --json``;
* :mod:`~hpcjobs.accounting.sources.pbs`: PBS Pro/OpenPBS accounting logs and ``qstat -f`` (text, JSON);
* :mod:`~hpcjobs.accounting.sources.torque`: Torque accounting logs and ``qstat -f`` (text, XML);
* :mod:`~hpcjobs.accounting.sources.gpu`: the CSV files of hpcjobs' GPU sampler.
"""
