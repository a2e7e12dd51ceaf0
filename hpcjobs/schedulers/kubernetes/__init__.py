"""Kubernetes: everything hpcjobs knows of it, in one folder.

- :mod:`.backend`: :class:`~.backend.KubernetesBackend`, ``batch/v1`` Jobs applied and queried with
  ``kubectl`` behind the contract of :mod:`hpcjobs.schedulers.base`;
- :mod:`.formats`: pure parsers of ``kubectl get -o json`` output.
"""
