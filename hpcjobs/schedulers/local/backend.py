"""The local runner as a backend: what points run on this machine get, and where their output goes.

It has no scheduler commands (:attr:`~hpcjobs.schedulers.base.Capabilities.runs_here`): none of the
required hooks is implemented, and :func:`hpcjobs.schedulers.client.client_for` refuses it. The
runner itself (processes, exit files, cancelling) is :mod:`hpcjobs.sweep.local`.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpcjobs.schedulers.base import BaseBackend, Capabilities

#: A local run's id: ``local-<runner pid>-<token>``, optionally with ``_<index>`` of one point.
JOB_ID_RE = re.compile(r"local-[0-9]{1,10}-[0-9a-f]{1,32}(?:_[0-9]{1,10})?")


class LocalBackend(BaseBackend):
    """The ``local`` site: each point a process of this machine (``HPCJOBS_ARRAY_INDEX`` set), ``#`` lines
    only comments."""

    name = "local"
    capabilities = Capabilities(runs_here=True, container_runtimes=frozenset({"apptainer", "singularity", "podman"}))
    directive_prefix = "#"
    array_index_var = "HPCJOBS_ARRAY_INDEX"
    job_id_var = "HPCJOBS_JOB_ID"
    job_id_what = "local run id"
    job_id_pattern = JOB_ID_RE
    job_id_grammar = "local-<pid>-<token>, optionally _<index>"

    # --- site hooks ---

    #: A local site has no partitions: the points run here.
    site_partitions = False

    # --- sweep hooks ---

    submitit_cluster = "local"

    def single_log_stem(self, name: str, job_id: str) -> str:
        """``<name>-<run id>``, as the runner names its files."""
        return f"{name}-{job_id.split('.')[0]}"

    def array_log_stem(self, base: Path, name: str, sweep_id: str, chunk: int | None, array_job_id: str | None,
                       array_index: int) -> Path | None:
        """``<name>-<run id>_<index>`` (as the runner names a point's files, like Slurm's ``%x-%A_%a``)."""
        return base / f"{name}-{array_job_id}_{array_index}" if array_job_id else None
