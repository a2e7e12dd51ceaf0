"""The ``sacct --parsable2`` text engine: from bytes to the typed columns of the schema.

* :mod:`~hpcjobs.accounting.sacct.text`: the input (file or text), its header, delimiter and bad lines;
* :mod:`~hpcjobs.accounting.sacct.read`: the columns, read by the compiled scanner when it is built
  (:mod:`~hpcjobs.accounting.sacct.scan`, C source ``_scan.c``), else by pyarrow's CSV reader;
* :mod:`~hpcjobs.accounting.sacct.columns`: the column parsers that assemble the schema DataFrame,
  with :mod:`~hpcjobs.accounting.sacct.arrays` (numpy-level pieces) and
  :mod:`~hpcjobs.accounting.sacct.usage` (memory used, GPU usage from TRES and jobstats).
"""
