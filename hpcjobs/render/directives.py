"""Scheduler directives for a resolved job, one builder per scheduler family.

Each builder returns ``(name, text)`` pairs: ``text`` is what follows the
directive prefix (``#SBATCH``/``#PBS``), ``name`` is the option or resource a
site may forbid (``forbidden_directives``); forbidden ones are dropped.
Values reaching directives are validated names and paths (no spaces, quotes
or shell characters), so no quoting is needed inside directive lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hpcjobs.config.policy import forbidden_in
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.resolve import ResolvedJob
from hpcjobs.schedulers.kubernetes.backend import kubernetes_directives
from hpcjobs.schedulers.pbs.backend import pbs_array_argument, torque_array_argument
from hpcjobs.schedulers.slurm.backend import array_argument
from hpcjobs.schedulers.swarm.backend import swarm_directives
from hpcjobs.units import format_memory_pbs, format_memory_slurm, format_walltime_pbs, format_walltime_slurm

Directive = tuple[str, str]


def _slurm_array(job: ResolvedJob) -> str | None:
    return array_argument(job.array) if job.array is not None else None


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
    d += _slurm_mail(job)
    array = _slurm_array(job)
    pattern = "%x-%A_%a" if array else "%x-%j"
    d.append(("output", f"--output={job.output_dir}/{pattern}.out"))
    d.append(("error", f"--error={job.output_dir}/{pattern}.err"))
    if array:
        d.append(("array", f"--array={array}"))
    return d


#: ``notify.on`` events → Slurm ``--mail-type`` values and PBS ``-m`` letters (sbatch(1): BEGIN, END, FAIL;
#: qsub(1B) of OpenPBS and Torque: b = begins, e = terminates, a = aborted by the batch system).
_SLURM_MAIL = {"begin": "BEGIN", "end": "END", "fail": "FAIL"}
_PBS_MAIL = {"begin": "b", "end": "e", "fail": "a"}


def _slurm_mail(job: ResolvedJob) -> list[Directive]:
    """``--mail-user`` and ``--mail-type`` of ``notify`` (an array mails once for the whole array)."""
    if job.notify is None:
        return []
    email, events = job.notify
    return [("mail-user", f"--mail-user={email}"),
            ("mail-type", "--mail-type=" + ",".join(_SLURM_MAIL[e] for e in events))]


def _pbs_mail(job: ResolvedJob) -> list[Directive]:
    """``-M`` and ``-m`` of ``notify`` (PBS Pro and Torque; an array mails as one job, without ``j``)."""
    if job.notify is None:
        return []
    email, events = job.notify
    letters = "".join(letter for e, letter in _PBS_MAIL.items() if e in events)
    return [("M", f"-M {email}"), ("m", f"-m {letters}")]


def _pbs_head(job: ResolvedJob) -> list[Directive]:
    """Name, queue and account: the same on PBS Pro and Torque."""
    d: list[Directive] = [("N", f"-N {job.name}")]
    if job.scheduler_partition:
        d.append(("q", f"-q {job.scheduler_partition}"))
    if job.account:
        d.append(("A", f"-A {job.account}"))
    return d


def pbspro_directives(job: ResolvedJob) -> list[Directive]:
    """``#PBS`` options for PBS Pro / OpenPBS, with one merged ``select`` line."""
    d = _pbs_head(job)
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
    return d + _pbs_mail(job)


def torque_directives(job: ResolvedJob) -> list[Directive]:
    """``#PBS`` options for Torque: ``nodes=N:ppn=P[:gpus=G]`` and whole-job ``mem``."""
    d = _pbs_head(job)
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
    return d + _pbs_mail(job)


def local_directives(job: ResolvedJob) -> list[Directive]:
    """The local site has no scheduler and no directives."""
    del job
    return []


#: Scheduler family → directive builder.
DIRECTIVE_BUILDERS: dict[str, Callable[[ResolvedJob], list[Directive]]] = {
    "slurm": slurm_directives,
    "pbspro": pbspro_directives,
    "torque": torque_directives,
    "swarm": swarm_directives,
    "kubernetes": kubernetes_directives,
    "local": local_directives,
}



_CACHE: dict[tuple[object, ...], tuple[object, list[str]]] = {}
_CACHE_MAX = 256


def _directive_key(job: ResolvedJob) -> tuple[object, ...]:
    """Everything directives depend on (not the environment, setup or parameters of a sweep point)."""
    return (id(job.site), job.name, job.partition, job.account, job.qos, job.nodes, job.tasks_per_node,
            job.cpus_per_task, job.gpus_per_node, job.gpu_type, job.memory_per_node, job.walltime, job.exclusive,
            job.output_dir, job.extra_directives, job.array, job.notify)


def build_directives(job: ResolvedJob) -> list[str]:
    """All directive texts for ``job``: generated ones the site allows, then site/partition/user extras.

    Memoised on the fields directives depend on, so rendering many points of one sweep builds
    them once (the cached entry keeps its site object, so a reused ``id`` never matches).
    """
    key = _directive_key(job)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is job.site:
        return list(hit[1])
    result = _build_directives(job)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = (job.site, result)
    return list(result)


#: What may never appear in a directive line: control characters (a line feed ends the line, and
#: sbatch stops reading directives at the first line that is not one) and Unicode line separators.
_LINE_BREAK_RE = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def check_directive_text(text: str) -> None:
    """Refuse a directive that would not stay one line of the script.

    Raises:
        ConfigError: ``text`` holds a line break, NUL or another control character.
    """
    bad = _LINE_BREAK_RE.search(text)
    if bad:
        raise ConfigError(ConfigProblem(
            f"directive {text!r} contains the control character {bad.group()!r}: a directive must stay on one "
            "line (the scheduler would ignore everything after the break)", key="directives"))


def _build_directives(job: ResolvedJob) -> list[str]:
    forbidden = set(job.site.forbidden_directives)
    generated = [text for name, text in DIRECTIVE_BUILDERS[job.scheduler](job) if name not in forbidden]
    extras = [d for d in job.extra_directives if not forbidden_in(d, forbidden, job.scheduler)]
    result = generated + extras
    for text in result:
        check_directive_text(text)
    return result
