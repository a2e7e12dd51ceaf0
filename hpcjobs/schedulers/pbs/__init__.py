"""PBS Pro / OpenPBS and Torque: everything hpcjobs knows of them, in one folder.

- :mod:`.backend`: :class:`~.backend.PbsProBackend` and :class:`~.backend.TorqueBackend`, the
  command builders (``qsub``, ``qstat``, ``qdel``) behind the contract of
  :mod:`hpcjobs.schedulers.base`;
- :mod:`.formats` (OpenPBS ``qstat -F json``), :mod:`.torque` (Torque ``qstat -x`` XML),
  :mod:`.errors` (the servers' error lines), :mod:`.queues` (queue limits): pure parsers;
- :mod:`.accounting_log`: the server's accounting log records (shared by both families);
- :mod:`.discover`, :mod:`.discover_torque`: a site config from ``qstat -Q``/``pbsnodes``.
"""
