"""``#SBATCH`` directives of a resolved job (long option forms; :meth:`SlurmBackend.directives`).

Each is a ``(name, text)`` pair (:data:`hpcjobs.schedulers.base.Directive`): ``text`` follows
``#SBATCH``, ``name`` is the option a site may forbid. Values reaching directives are validated
names and paths (no spaces, quotes or shell characters), so no quoting is needed inside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcjobs.config.arrays import ArraySpec
from hpcjobs.schedulers.base import Directive
from hpcjobs.units import format_memory_slurm, format_walltime_slurm

if TYPE_CHECKING:
    from hpcjobs.resolve import ResolvedJob

#: ``notify.on`` events → ``--mail-type`` values (sbatch(1): BEGIN, END, FAIL).
MAIL_TYPES = {"begin": "BEGIN", "end": "END", "fail": "FAIL"}


def array_argument(array: ArraySpec) -> str:
    """``--array`` value: ``0-99``, ``0-99:2``, ``0-99%10``."""
    text = f"{array.start}-{array.end}" + (f":{array.step}" if array.step != 1 else "")
    return text + (f"%{array.throttle}" if array.throttle else "")


def slurm_directives(job: ResolvedJob) -> list[Directive]:
    """``#SBATCH`` options (long forms)."""
    d: list[Directive] = [("job-name", f"--job-name={job.name}")]
    if job.scheduler_partition:
        d.append(("partition", f"--partition={job.scheduler_partition}"))
    if job.account:
        d.append(("account", f"--account={job.account}"))
    if job.qos:
        d.append(("qos", f"--qos={job.qos}"))
    d.append(("nodes", f"--nodes={job.nodes}"))
    d.append(("ntasks-per-node", f"--ntasks-per-node={job.tasks_per_node}"))
    d.append(("cpus-per-task", f"--cpus-per-task={job.cpus_per_task}"))
    if job.gpus_per_node:
        kind = f"{job.gpu_type}:" if job.gpu_type else ""
        if job.site.gpu_request == "gpus-per-node":
            d.append(("gpus-per-node", f"--gpus-per-node={kind}{job.gpus_per_node}"))
        else:
            d.append(("gres", f"--gres=gpu:{kind}{job.gpus_per_node}"))
    if job.memory_per_node is not None and not job.exclusive:
        d.append(("mem", f"--mem={format_memory_slurm(job.memory_per_node)}"))
    if job.walltime is not None:
        d.append(("time", f"--time={format_walltime_slurm(job.walltime)}"))
    if job.exclusive:
        d.append(("exclusive", "--exclusive"))
    if job.launch is not None and job.launch.preemptible:
        # B: signal the batch shell only; it forwards the signal to the program, checkpoints, requeues.
        d.append(("signal", f"--signal=B:{job.launch.signal}@{job.launch.signal_seconds}"))
        d.append(("requeue", "--requeue"))
        d.append(("open-mode", "--open-mode=append"))  # a requeued run appends to the same log files
    d += _mail(job)
    array = array_argument(job.array) if job.array is not None else None
    pattern = "%x-%A_%a" if array else "%x-%j"
    d.append(("output", f"--output={job.output_dir}/{pattern}.out"))
    d.append(("error", f"--error={job.output_dir}/{pattern}.err"))
    if array:
        d.append(("array", f"--array={array}"))
    return d


def _mail(job: ResolvedJob) -> list[Directive]:
    """``--mail-user`` and ``--mail-type`` of ``notify`` (an array mails once for the whole array)."""
    if job.notify is None:
        return []
    email, events = job.notify
    return [("mail-user", f"--mail-user={email}"),
            ("mail-type", "--mail-type=" + ",".join(MAIL_TYPES[e] for e in events))]
