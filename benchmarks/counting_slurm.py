"""A counting fake Slurm behind the subprocess seam (``hpcjobs.process.run_command``): no cluster needed.

Answers like a healthy Slurm and counts every call: ``sbatch`` (a new job id; the array size is read
from the script's ``--array=0-N`` directive), ``scontrol show config`` (``MaxArraySize``), the tag
queries of :meth:`hpcjobs.schedulers.slurm.backend.SlurmBackend.tag_query_argvs` (``squeue --format=%F|%k``,
``sacct -X --format=JobID,Comment``), the status query of :func:`hpcjobs.schedulers.slurm.formats.sacct_status_argv`
(one ``sacct`` row per array task, in the state :attr:`CountingSlurm.state` says) and ``scancel``.

With a ``journal`` file every job it queues is appended (and fsynced) there before ``sbatch``
"returns", and read back by every new instance: a process killed at any moment leaves the queue as
the scheduler would hold it, and the next process (a resume) sees the same jobs. That is what the
``kill -9`` trials of the sweep tests run against; ``benchmarks/bench_sweep_calls.py`` uses it in
memory.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path

from hpcjobs.process import CommandResult

_ARRAY_RE = re.compile(r"--array=0-(\d+)")


def _is_tag_query(argv: list[str]) -> bool:
    """``squeue --format=%F|%k`` (queued jobs) or ``sacct -X --format=JobID,Comment`` (finished ones)."""
    return (argv[0] == "squeue" and "--format=%F|%k" in argv) or (argv[0] == "sacct" and "--format=JobID,Comment"
                                                                   in argv)


class CountingSlurm:
    """Answers sbatch/sacct/squeue/scontrol like a healthy Slurm and counts every call.

    Attributes:
        max_array_size: What ``scontrol show config`` reports.
        calls: Calls per command (``sbatch``, ``sacct``, ``squeue``, ``scontrol``, ``scancel``).
        status_calls: ``sacct --jobs=`` status queries only (tag queries excluded).
        jobs: Job id → (comment, array size), in submission order.
        state: The state every task of every job is reported in by the next status query.
        reverse: Report the jobs in the reverse order of the ids asked (the same states, another text).
        answer_s: Seconds spent making the status answers (the scheduler's time, not the caller's).
    """

    def __init__(self, max_array_size: int = 1001, *, journal: str | Path | None = None,
                 first_id: int = 1000) -> None:
        self.max_array_size = max_array_size
        self.calls: Counter[str] = Counter()
        self.status_calls = 0
        self.jobs: dict[str, tuple[str, int]] = {}
        self.state = "RUNNING"
        self.reverse = False
        self.answer_s = 0.0
        self.first_id = first_id
        self.journal = Path(journal) if journal is not None else None
        if self.journal is not None and self.journal.exists():
            for line in self.journal.read_text().splitlines():
                parts = line.split("|")
                if len(parts) == 3 and parts[2].isdigit():  # a torn last line is a job never queued
                    self.jobs[parts[0]] = (parts[1], int(parts[2]))

    def _queue(self, comment: str, size: int) -> str:
        job = str(self.first_id + len(self.jobs))
        if self.journal is not None:
            fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{job}|{comment}|{size}\n".encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        self.jobs[job] = (comment, size)
        return job

    def submitted_tasks(self) -> Counter[str]:
        """How many times each (comment, array index) was queued: a point submitted twice counts 2."""
        return Counter(f"{comment}#{i}" for comment, size in self.jobs.values() for i in range(size))

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = [str(a) for a in argv]
        cmd = argv[0]
        self.calls[cmd] += 1
        out = ""
        if cmd == "sbatch":
            comment = next(a.split("=", 1)[1] for a in argv if a.startswith("--comment="))
            match = _ARRAY_RE.search(Path(argv[-1]).read_text())
            out = self._queue(comment, int(match.group(1)) + 1 if match else 1) + "\n"
        elif cmd == "scontrol":
            out = f"ClusterName = bench\nMaxArraySize = {self.max_array_size}\nMinJobAge = 300 sec\n"
        elif _is_tag_query(argv):  # every job with its comment
            out = "".join(f"{j}|{c}\n" for j, (c, _) in self.jobs.items())
        elif cmd == "sacct":
            self.status_calls += 1
            start = time.perf_counter()
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            ids = ids[::-1] if self.reverse else ids
            state = self.state
            out = "".join(f"{j}_{i}|{j}|{state}|0:0|None|bench|{self.jobs[j][0]}\n"
                          for j in ids if j in self.jobs for i in range(self.jobs[j][1]))
            self.answer_s += time.perf_counter() - start
        return CommandResult(tuple(argv), 0, out, "", 0.0)
