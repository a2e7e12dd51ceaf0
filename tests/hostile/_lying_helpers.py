"""A fake Slurm that lies, behind the subprocess seam (``hpcjobs.process.run_command``), with a fake clock.

Each ``sbatch`` call takes the next fate from ``script``:

- ``ok``: queued, prints the id, exit 0;
- ``late``: says "Socket timed out", exit 1, and the job appears in the queue ``delay`` fake seconds later;
- ``lost``: says "Socket timed out", exit 1, nothing is ever queued;
- ``timeout``: the command times out (``CommandTimeout``) and the job appears ``delay`` seconds later;
- ``id-exit1``: queued, prints the id, exit 1 with an error;
- ``bogus``: queued, prints a wrong id (``990000 + n``), exit 0;
- ``bogus-nojob``: prints a wrong id, exit 0, nothing queued;
- ``garbage``: queued, prints text that is no id, exit 0;
- ``twice``: queued twice under the same tag, prints the first id;
- ``refuse``: "Invalid account", exit 1, nothing queued.

Time only moves when the code under test sleeps (``fake.sleep``); ``squeue`` shows a job once the fake
time reaches its ``visible_at``. ``squeue_broken`` makes the tag query fail (exit 1).

Accounting: with ``accounting_knows`` set, ``sacct`` answers the tag query and the status calls for
every job it has seen (else it lags: the tag query finds nothing). ``accounting_down`` makes every
``sacct`` exit 1 as it does while slurmdbd is down. :meth:`LyingSlurm.finish` ends a job's tasks and
:meth:`LyingSlurm.purge` takes a finished job out of ``squeue`` (``MinJobAge`` passed); a job's
``queue_state`` is what ``squeue`` shows instead of its accounting state (a requeue).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs.errors import CommandError, CommandTimeout
from hpcjobs.process import CommandResult

SOCKET = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
#: What sacct prints while slurmdbd is down (exit 1).
DBD_DOWN = "sacct: error: Problem talking to the database: Connection refused\n"


@dataclass
class FakeJob:
    """One job the fake scheduler holds."""

    job_id: str
    comment: str
    array: str
    name: str
    visible_at: float
    state: str = "PENDING"
    #: Still in ``squeue`` (``False`` once ``MinJobAge`` passed after it ended).
    in_queue: bool = True
    #: What ``squeue`` shows when it differs from accounting (a requeued job: ``PENDING`` again).
    queue_state: str | None = None


@dataclass
class LyingSlurm:
    """The fake; call it like ``run_command``."""

    script: list[str] = field(default_factory=list)
    delay: float = 3.0
    now: float = 0.0
    squeue_broken: bool = False
    #: The queue breaks at the first sbatch (the check that a new sweep has no job yet still answered).
    break_queue_on_sbatch: bool = False
    accounting_knows: bool = False
    accounting_down: bool = False
    #: Jobs whose records slurmctld still holds for slurmdbd (``sdiag``'s DBD Agent queue): not in sacct.
    held: set[str] = field(default_factory=set)
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    next_id: int = 100
    bogus: int = 990000

    def sleep(self, seconds: float) -> None:
        """The injected sleep: moves the fake clock."""
        self.now += seconds

    def _queue(self, comment: str, array: str, name: str, at: float) -> str:
        job_id = str(self.next_id)
        self.next_id += 1
        self.jobs[job_id] = FakeJob(job_id, comment, array, name, at)
        return job_id

    def visible(self) -> list[FakeJob]:
        """Jobs the scheduler's queue shows now."""
        return [j for j in self.jobs.values() if j.visible_at <= self.now and j.in_queue]

    def accounted(self) -> list[FakeJob]:
        """Jobs accounting knows now (queued ones and those that left the queue)."""
        if not self.accounting_knows:
            return []
        return [j for j in self.jobs.values() if j.visible_at <= self.now and j.job_id not in self.held]

    def finish(self, job_id: str, state: str = "COMPLETED") -> None:
        """End every task of ``job_id``."""
        self.jobs[job_id].state = state

    def purge(self, job_id: str) -> None:
        """``MinJobAge`` passed: the job leaves ``squeue`` (accounting still knows it)."""
        self.jobs[job_id].in_queue = False

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        rc, out, err = 0, "", ""
        cmd = argv[0]
        if cmd == "sbatch":
            self.squeue_broken = self.squeue_broken or self.break_queue_on_sbatch
            rc, out, err = self._sbatch(argv)
        elif cmd == "scontrol":
            out = "ClusterName = fake\nMaxArraySize = 1001\nMinJobAge = 300 sec\n"
        elif cmd == "sacctmgr":
            out = ""
        elif cmd == "sdiag":
            out = f"Server thread count:  3\nAgent queue size:     0\nDBD Agent queue size: {len(self.held)}\n"
        elif cmd == "squeue" and "--format=%F|%k" in argv:
            if self.squeue_broken:
                rc, err = 1, "squeue: error: Unable to contact slurm controller (connect failure)\n"
            else:
                wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))
                out = "".join(f"{j.job_id}|{j.comment}\n" for j in self.visible() if j.name == wanted)
        elif cmd == "sacct" and self.accounting_down:
            rc, err = 1, DBD_DOWN
        elif cmd == "sacct" and "--format=JobID,Comment" in argv:
            wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))
            out = "".join(f"{j.job_id}|{j.comment}\n" for j in self.accounted() if j.name == wanted)
        elif cmd == "sacct":
            out = self._status(argv, "sacct")
        elif cmd == "squeue":
            out = self._status(argv, "squeue")
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            if not out and len(ids) == 1:  # as squeue 22.05: one unknown id exits 1, several exit 0
                rc, err = 1, "slurm_load_jobs error: Invalid job id specified\n"
        elif cmd == "scancel":
            for j in argv[1:]:
                if j == "--":
                    continue
                if j in self.jobs:
                    self.jobs[j].state = "CANCELLED"
        if check and rc:
            raise CommandError(argv, rc, out, err)
        return CommandResult(tuple(argv), rc, out, err, 0.0)

    def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
        fate = self.script.pop(0) if self.script else "ok"
        comment = next(a.split("=", 1)[1] for a in argv if a.startswith("--comment="))
        text = Path(argv[-1]).read_text()
        array = re.search(r"^#SBATCH --array=(\S+)", text, re.M).group(1)
        name = re.search(r"^#SBATCH --job-name=(\S+)", text, re.M).group(1)
        if fate == "refuse":
            return 1, "", "sbatch: error: Batch job submission failed: Invalid account or account/partition\n"
        if fate == "lost":
            return 1, "", SOCKET
        if fate == "late":
            self._queue(comment, array, name, self.now + self.delay)
            return 1, "", SOCKET
        if fate == "timeout":
            self._queue(comment, array, name, self.now + self.delay)
            raise CommandTimeout(argv, None, "", "", reason="timed out after 60 s")
        if fate == "bogus-nojob":
            self.bogus += 1
            return 0, f"{self.bogus}\n", ""
        job_id = self._queue(comment, array, name, self.now)
        if fate == "twice":
            self._queue(comment, array, name, self.now)
        if fate == "id-exit1":
            return 1, f"{job_id}\n", "sbatch: error: slurm_receive_msg: Zero Bytes were transmitted or received\n"
        if fate == "bogus":
            self.bogus += 1
            return 0, f"{self.bogus}\n", ""
        if fate == "garbage":
            return 0, "sbatch: Submitted batch job, maybe\n", ""
        return 0, f"{job_id}\n", ""

    def _status(self, argv: list[str], cmd: str) -> str:
        ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
        lines = []
        for j in ids:
            job = self.jobs.get(j)
            if job is None or job.visible_at > self.now or (cmd == "squeue" and not job.in_queue):
                continue
            start, end = job.array.split("%")[0].split("-")
            for i in range(int(start), int(end) + 1):
                if cmd == "sacct":
                    lines.append(f"{j}_{i}|{j}|{job.state}|0:0|None|{job.name}|{job.comment}")
                else:
                    lines.append(f"{j}_{i}|{j}|{j}|{i}|{job.queue_state or job.state}|None|{job.name}|{job.comment}")
        return "".join(f"{line}\n" for line in lines)

    def sbatch_calls(self) -> int:
        """How many times sbatch ran."""
        return sum(1 for c in self.calls if c[0] == "sbatch")

    def live(self) -> list[FakeJob]:
        """Jobs not cancelled (what would run)."""
        return [j for j in self.jobs.values() if j.state != "CANCELLED"]


def experiment(folder: Path, n: int, name: str = "lying") -> Path:
    """An experiment file with a sweep of ``n`` points."""
    f = folder / "exp.yaml"
    f.write_text(f"name: {name}\ncommand: echo $x\nsweep:\n  grid:\n    x: {list(range(n))}\n")
    return f
