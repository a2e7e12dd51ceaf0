"""Slurm: everything hpcjobs knows of it, in one folder.

- :mod:`.backend`: :class:`~.backend.SlurmBackend`, the command builders (``sbatch``, ``sacct``,
  ``squeue``, ``scancel``, ``scontrol``) behind the contract of :mod:`hpcjobs.schedulers.base`;
- :mod:`.formats`: pure parsers of their output; :mod:`.bulk`: the columnar status reader for
  arrays of a million tasks;
- :mod:`.discover`, :mod:`.discover_qos`: a site config from ``scontrol show partition/node`` and
  ``sacctmgr show qos``.
"""
