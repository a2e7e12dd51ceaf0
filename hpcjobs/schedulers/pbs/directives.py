"""``#PBS`` directives of a resolved job: PBS Pro's ``select`` form and Torque's ``nodes=N:ppn=P`` form.

Each is a ``(name, text)`` pair (:data:`hpcjobs.schedulers.base.Directive`): ``text`` follows
``#PBS``, ``name`` is the option or resource a site may forbid. Name, queue, account, wall time,
output files and mail are written the same way by both (:meth:`PbsProBackend.directives`,
:meth:`TorqueBackend.directives`). Values reaching directives are validated names and paths, so no
quoting is needed inside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcjobs.config.arrays import ArraySpec
from hpcjobs.schedulers.base import Directive
from hpcjobs.units import format_memory_pbs, format_walltime_pbs

if TYPE_CHECKING:
    from hpcjobs.resolve import ResolvedJob

#: ``notify.on`` events → ``-m`` letters (qsub(1B) of OpenPBS and Torque: b = begins, e = terminates,
#: a = aborted by the batch system).
MAIL_LETTERS = {"begin": "b", "end": "e", "fail": "a"}


def pbs_array_argument(array: ArraySpec) -> str:
    """PBS Pro ``-J`` value: ``0-99``, ``0-99:2``, ``0-99%10``.

    PBS refuses a range whose end is not above its start (``qsub: illegal -J value`` for ``5-5``:
    ``chk_Jrange`` in the OpenPBS sources), so an array of one task, such as a sweep chunk holding a
    single point, is written ``5-6:2``: one subjob, index 5, with ``PBS_ARRAY_INDEX`` as usual.
    """
    if array.size == 1:
        text = f"{array.start}-{array.start + 1}:2"
    else:
        text = f"{array.start}-{array.end}" + (f":{array.step}" if array.step != 1 else "")
    return text + (f"%{array.throttle}" if array.throttle else "")


def torque_array_argument(array: ArraySpec) -> str:
    """Torque ``-t`` value: ``0-99``, ``0,2,4``, ``0-99%10`` (no step syntax: steps are listed)."""
    text = f"{array.start}-{array.end}" if array.step == 1 else ",".join(str(i) for i in array.indices())
    return text + (f"%{array.throttle}" if array.throttle else "")


def _mail(job: ResolvedJob) -> list[Directive]:
    """``-M`` and ``-m`` of ``notify`` (PBS Pro and Torque; an array mails as one job, without ``j``)."""
    if job.notify is None:
        return []
    email, events = job.notify
    letters = "".join(letter for e, letter in MAIL_LETTERS.items() if e in events)
    return [("M", f"-M {email}"), ("m", f"-m {letters}")]


def _head(job: ResolvedJob) -> list[Directive]:
    """Name, queue and account: the same on PBS Pro and Torque."""
    d: list[Directive] = [("N", f"-N {job.name}")]
    if job.scheduler_partition:
        d.append(("q", f"-q {job.scheduler_partition}"))
    if job.account:
        d.append(("A", f"-A {job.account}"))
    return d


def pbspro_directives(job: ResolvedJob) -> list[Directive]:
    """``#PBS`` options for PBS Pro / OpenPBS, with one merged ``select`` line."""
    d = _head(job)
    forbidden = set(job.site.forbidden_directives)
    chunk = [str(job.nodes), f"ncpus={job.tasks_per_node * job.cpus_per_task}",
             f"mpiprocs={job.tasks_per_node}", f"ompthreads={job.cpus_per_task}"]
    if job.gpus_per_node:
        chunk.append(f"ngpus={job.gpus_per_node}")
        if job.gpu_type and job.site.gpu_type_resource:
            chunk.append(f"{job.site.gpu_type_resource}={job.gpu_type}")
    if job.memory_per_node is not None and "mem" not in forbidden:
        chunk.append(f"mem={format_memory_pbs(job.memory_per_node)}")
    chunk = [c for c in chunk if c.split("=")[0] not in forbidden]
    d.append(("select", "-l select=" + ":".join(chunk)))
    if job.walltime is not None:
        d.append(("walltime", f"-l walltime={format_walltime_pbs(job.walltime)}"))
    if job.nodes > 1 or job.exclusive:
        d.append(("place", "-l place=scatter" + (":excl" if job.exclusive else "")))
    if job.array is not None:
        d.append(("J", f"-J {pbs_array_argument(job.array)}"))
        stem = f"{job.output_dir}/{job.name}.^array_index^"
    else:
        stem = f"{job.output_dir}/{job.name}"
    d.append(("o", f"-o {stem}.out"))
    d.append(("e", f"-e {stem}.err"))
    return d + _mail(job)


def torque_directives(job: ResolvedJob) -> list[Directive]:
    """``#PBS`` options for Torque: ``nodes=N:ppn=P[:gpus=G]`` and whole-job ``mem``."""
    d = _head(job)
    nodes = f"nodes={job.nodes}:ppn={job.tasks_per_node * job.cpus_per_task}"
    if job.gpus_per_node:
        nodes += f":gpus={job.gpus_per_node}"
        if job.gpu_type:
            nodes += f":{job.gpu_type}"
    d.append(("nodes", f"-l {nodes}"))
    if job.memory_per_node is not None:
        d.append(("mem", f"-l mem={format_memory_pbs(job.memory_per_node * job.nodes)}"))
    if job.walltime is not None:
        d.append(("walltime", f"-l walltime={format_walltime_pbs(job.walltime)}"))
    if job.exclusive:
        d.append(("naccesspolicy", "-l naccesspolicy=singlejob"))
    if job.array is not None:
        d.append(("t", f"-t {torque_array_argument(job.array)}"))
    d.append(("o", f"-o {job.output_dir}/{job.name}.out"))
    d.append(("e", f"-e {job.output_dir}/{job.name}.err"))
    return d + _mail(job)
