"""Python-callable sweeps through submitit: a function swept over the same sweep spec, same ledger.

>>> def train(lr: float, depth: int) -> float: ...                       # doctest: +SKIP
>>> fs = hpcjobs.sweep.functions.sweep_function(                          # doctest: +SKIP
...     train, {"grid": {"lr": [0.1, 0.01], "depth": [2, 4]}}, name="train",
...     site="mycluster", resources={"gpus_per_node": 1, "walltime": "1h"})
>>> fs.results()                                                          # doctest: +SKIP

The request is checked against the site's limits exactly as for a YAML experiment (partition,
GPUs, wall time, memory); submitit's ``AutoExecutor`` gets its parameters from the resolved job.
Points go in arrays of at most ``MaxArraySize − 1`` (one ``executor.batch()`` per chunk), each
chunk tagged ``hpcjobs:<sweep>:<chunk>:<token>`` in its comment and recorded in the sweep's ledger
before and after the submission, so ``hpcjobs status`` / ``cancel`` / ``ls`` work as for any sweep.
Only Slurm (and the ``local`` site, through submitit's local executor) are supported: submitit has
no PBS executor.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcjobs import states
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.sweep import SweepSpec
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.script import detect_current_site, load_checked_site_named
from hpcjobs.resolve import ResolvedJob, resolve
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.states import JobTag
from hpcjobs.sweep.chunks import chunk_capacity, plan_chunks
from hpcjobs.sweep.identity import sweep_root
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, experiment_sha256, new_token
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import Point
from hpcjobs.units import is_ascii_digits


def call_with_params(fn: Callable[..., Any], params: Mapping[str, Any]) -> Any:
    """Call ``fn`` with a point's parameters as keyword arguments (dotted names become ``model_depth``)."""
    return fn(**{k.replace(".", "_"): v for k, v in params.items()})


def executor_parameters(job: ResolvedJob) -> dict[str, Any]:
    """submitit ``AutoExecutor`` parameters for a resolved job (the scheduler's own from its backend's
    :meth:`~hpcjobs.schedulers.base.BaseBackend.submitit_parameters`)."""
    params: dict[str, Any] = {
        "name": job.name,
        "nodes": job.nodes,
        "tasks_per_node": job.tasks_per_node,
        "cpus_per_task": job.cpus_per_task,
    }
    if job.walltime:
        params["timeout_min"] = max(1, job.walltime // 60)
    if job.memory_per_node is not None:
        params["mem_gb"] = job.memory_per_node / 1024**3
    if job.gpus_per_node:
        params["gpus_per_node"] = job.gpus_per_node
    return get_backend(job.scheduler).submitit_parameters(job, params)


@dataclass
class FunctionSweep:
    """A submitted function sweep: its id, folder, points and submitit jobs (in point order)."""

    sweep_id: str
    folder: Path
    points: list[Point]
    jobs: list[Any] = field(default_factory=list)

    def results(self) -> list[Any]:
        """Each point's return value (blocks; raises submitit's error for a failed point)."""
        return [j.result() for j in self.jobs]

    def wait(self) -> dict[str, int]:
        """Wait for every job, record each point's outcome in the ledger, return the counts by state."""
        records = []
        for point, job in zip(self.points, self.jobs, strict=True):
            try:
                job.result()
                state, raw = states.COMPLETED, "COMPLETED"
            except Exception as exc:
                state, raw = states.FAILED, f"{type(exc).__name__}: {exc}"[:200]
            array_id, _, index = str(job.job_id).partition("_")
            records.append(JobStatus(str(job.job_id), state, raw, array_job_id=array_id if index else None,
                                     array_task_id=int(index) if is_ascii_digits(index) else None))
            del point
        with Ledger.open(self.folder) as ledger:
            ledger.record_status(records)
            return ledger.summary()


def sweep_function(
    fn: Callable[..., Any],
    sweep: SweepSpec | Mapping[str, Any],
    *,
    name: str,
    site: str | None = None,
    resources: Mapping[str, Any] | None = None,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    root: str | Path | None = None,
    throttle: int | None = None,
    max_array_size: int | None = None,
) -> FunctionSweep:
    """Sweep ``fn`` over ``sweep`` on a site through submitit, with an hpcjobs ledger.

    Args:
        fn: A picklable function; each point calls it with its parameters as keyword arguments.
        sweep: The sweep (the ``sweep:`` section's forms).
        name: Job name (also the start of the sweep id).
        site: Site name or file (default: detected, else ``local``).
        resources: Generic resources, as in an experiment file (``gpus_per_node``, ``walltime``...).
        throttle: At most N tasks of each array run at once.
        max_array_size: Override of the array size limit (else the site's, else the scheduler's).

    Raises:
        ConfigError: Bad sweep or resources, a request over the site's limits, or a PBS site.
    """
    import submitit

    spec = sweep if isinstance(sweep, SweepSpec) else SweepSpec.model_validate(dict(sweep))
    exp = Experiment.model_validate({"name": name, "command": "python (submitit)", "resources": dict(resources or {}),
                                     "partition": partition, "account": account, "qos": qos})
    site_config = load_checked_site_named(site or detect_current_site(ask_scheduler=True))
    backend = get_backend(site_config.scheduler)
    cluster = backend.submitit_cluster
    if cluster is None:
        raise ConfigError(ConfigProblem(f"function sweeps run through submitit, which supports Slurm and local "
                                        f"execution, not {site_config.scheduler}", key="site"))
    job = resolve(exp, site_config)
    points = expand(spec)
    identity = json.dumps({"fn": f"{fn.__module__}.{fn.__qualname__}", "sweep": spec.model_dump(mode="json"),
                           "resources": dict(resources or {}), "site": site_config.name}, sort_keys=True, default=str)
    sweep_id = f"{name}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"
    folder = sweep_root(root) / sweep_id
    meta = SweepMeta(sweep_id=sweep_id, experiment_path=f"python:{fn.__module__}.{fn.__qualname__}",
                     experiment_sha256=experiment_sha256(identity), site=site_config.name,
                     scheduler=site_config.scheduler, extra={"name": name, "kind": "function"})
    executor = submitit.AutoExecutor(folder=folder / "submitit" / "%j", cluster=cluster)
    executor.update_parameters(**executor_parameters(job))
    if throttle:
        executor.update_parameters(slurm_array_parallelism=throttle)
    limit = max_array_size or site_config.limits.max_array_size
    if limit is None and backend.capabilities.cluster_limits:
        from hpcjobs.schedulers.client import SchedulerClient

        limit = SchedulerClient(backend).limits().max_array_size
    result = FunctionSweep(sweep_id, folder, [])
    with Ledger.create(folder, meta, points) as ledger, ledger.lock():
        by_id = {p.point_id: p for p in points}
        pending = [p.point_id for p in ledger.pending_points()]
        used = [s.chunk for s in ledger.submissions()]
        for chunk in plan_chunks(pending, chunk_capacity(limit), max(used) + 1 if used else 0):
            token = new_token()
            tag = JobTag(sweep_id, chunk.number, token).render()
            chunk_parameters = backend.submitit_chunk_parameters(tag)
            if chunk_parameters:
                executor.update_parameters(**chunk_parameters)
            # submitit submits a batch of one as a plain job, of several as an array
            ledger.plan_chunk(chunk.point_ids, chunk.number, token=token, argv=["submitit", cluster, tag],
                              array=chunk.size > 1)
            with executor.batch():
                jobs = [executor.submit(call_with_params, fn, by_id[pid].params) for pid in chunk.point_ids]
            first = str(jobs[0].job_id)
            ledger.mark_submitted(token, first.split("_")[0] if "_" in first else first)
            result.points.extend(by_id[pid] for pid in chunk.point_ids)
            result.jobs.extend(jobs)
    return result
