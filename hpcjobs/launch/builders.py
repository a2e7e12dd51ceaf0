"""Pure builders for what a launched job computes at run time.

The rendered script computes the same values in bash (``templates/launch/common.sh.j2``);
these functions are the reference the tests compare the bash against, and what Python
callers (e.g. a submitit sweep) use.

* Rendezvous port: ``base + (job number mod span)``. The job number is the job id's
  digits (``1234.server`` → 1234, PBS array ``12[3].server`` → 123), its last 9 digits when
  longer. Every node of a job computes the same port; jobs whose numbers differ by less than
  ``span`` never share one. The default range, 20000-29999, lies below Linux's ephemeral
  ports (32768-60999), so an outgoing connection never holds it.
* Hosts: Slurm ``scontrol show hostnames "$SLURM_JOB_NODELIST"``; PBS/Torque ``$PBS_NODEFILE``
  (one line per MPI slot) de-duplicated in order, so the first host is the mother superior.
  The rendezvous host is the first host; node ranks follow this order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

#: Digits kept from a job id (bash arithmetic is 64-bit; 9 digits keep it far from overflow).
JOB_NUMBER_DIGITS = 9


def job_number(job_id: str) -> int:
    """The number a job id stands for: its digits before the first ``.``, the last 9 at most.

    Args:
        job_id: ``SLURM_JOB_ID`` or ``PBS_JOBID`` (``1234``, ``1234.server``, ``12[3].server``).

    Returns:
        The number, 0 for an id without digits.
    """
    digits = re.sub(r"[^0-9]", "", job_id.split(".", 1)[0])
    return int(digits[-JOB_NUMBER_DIGITS:]) if digits else 0


def rendezvous_port(job_id: str, base: int = 20000, span: int = 10000) -> int:
    """The rendezvous (master) port of a job: ``base + job_number(job_id) % span``.

    Args:
        job_id: The scheduler's job id.
        base: First port of the range.
        span: Size of the range.

    Returns:
        A port in ``[base, base + span)``.

    Raises:
        ValueError: The range is empty or leaves 1024-65535.
    """
    if span < 1 or base < 1024 or base + span > 65536:
        raise ValueError(f"port range {base}+{span} is not within 1024-65535")
    return base + job_number(job_id) % span


def unique_hosts(lines: Iterable[str]) -> list[str]:
    """Host names in first-seen order (a ``$PBS_NODEFILE`` has one line per slot).

    Args:
        lines: Lines of a node file or of ``scontrol show hostnames``.

    Returns:
        Each host once, blank lines skipped, the first word of a line only.
    """
    seen: dict[str, None] = {}
    for line in lines:
        words = line.split()
        if words:
            seen.setdefault(words[0], None)
    return list(seen)


def hostfile(hosts: Sequence[str], slots: int) -> str:
    """A DeepSpeed/MPI hostfile: ``host slots=N`` per host.

    Args:
        hosts: The job's hosts, first host first.
        slots: Processes per host.

    Returns:
        The file's text, one line per host, newline-terminated.
    """
    return "".join(f"{h} slots={slots}\n" for h in hosts)


def tf_config(hosts: Sequence[str], rank: int, port: int, tasks_per_node: int = 1) -> dict[str, object]:
    """``TF_CONFIG`` for one worker of a MultiWorkerMirroredStrategy job.

    Workers are listed host by host; a host with several tasks gets consecutive ports
    (``port``, ``port + 1``, ...), so task ``rank`` (``SLURM_PROCID``, block distribution) is
    worker ``rank``.

    Args:
        hosts: The job's hosts, first host first.
        rank: This task's global rank.
        port: The job's rendezvous port.
        tasks_per_node: Workers per host.

    Returns:
        ``{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": rank}}``.

    Raises:
        ValueError: ``rank`` is not one of the workers.
    """
    workers = [f"{h}:{port + i}" for h in hosts for i in range(tasks_per_node)]
    if not 0 <= rank < len(workers):
        raise ValueError(f"rank {rank} is not one of the {len(workers)} workers")
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}


def tf_config_json(hosts: Sequence[str], rank: int, port: int, tasks_per_node: int = 1) -> str:
    """:func:`tf_config` as the JSON text the rendered script exports."""
    return json.dumps(tf_config(hosts, rank, port, tasks_per_node))


def gpu_csv_name(job_name: str, job_id: str) -> str:
    """File name of the in-job GPU sampler's CSV: ``<job name>-<job id>.gpu.csv``."""
    return f"{job_name}-{job_id}.gpu.csv"


#: The GPU sampler's query (the reader in hpcjobs/accounting/sources/gpu.py expects exactly these columns).
GPU_QUERY_FIELDS: tuple[str, ...] = (
    "timestamp", "index", "uuid", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
    "power.draw",
)


def gpu_sampler_argv(interval: int) -> list[str]:
    """The ``nvidia-smi`` command line the rendered script runs in the background."""
    return ["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY_FIELDS)}", "--format=csv,nounits", "-l", str(interval)]
