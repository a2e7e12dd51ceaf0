"""Docker Swarm: everything hpcjobs knows of it, in one folder.

- :mod:`.backend`: :class:`~.backend.SwarmBackend`, ``docker service create --mode replicated-job``
  and the service/task queries behind the contract of :mod:`hpcjobs.schedulers.base`;
- :mod:`.formats`: pure parsers of ``docker service ps`` / ``docker inspect`` output.
"""
