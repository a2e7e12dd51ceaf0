"""The local runner (``site: local``): points run as processes of this machine, no scheduler at all.

- :mod:`.backend`: :class:`~.backend.LocalBackend`, what a point run here finds in its environment
  and where its files land; it builds no scheduler command (``runs_here``), the runner of
  :mod:`hpcjobs.sweep.local` starts the processes itself.
"""
