"""Memory used of a multi-task step on the real Slurm testbed: MaxRSS is per task, NTasks multiplies it.

A job's one ``srun`` step runs 2 tasks that each hold 150 MiB for 8 s (the testbed samples every second,
``JobAcctGatherFrequency = task=1``); hpcjobs' ``mem_used_bytes`` must be about 2 × 150 MiB, not the 150 MiB
of MaxRSS.
"""

from __future__ import annotations

import time

import pytest

from hpcjobs.accounting.sources.slurm import SACCT_QUERY_FIELDS, read_sacct_parsable2
from hpcjobs.process import run_command

pytestmark = pytest.mark.slurm

_MIB = 2**20
_HOLD = ('srun -n 2 /usr/bin/python3 -c "import time; b = bytearray(150 * 1024 * 1024); '
         'b[::4096] = b\\"x\\" * len(b[::4096]); time.sleep(8)"')


def test_two_task_step_memory_used(slurm_testbed, slurm_workdir) -> None:  # type: ignore[no-untyped-def]
    job = slurm_testbed.submit("-n", "2", "--mem=1G", "-t", "2", wrap=_HOLD, workdir=slurm_workdir)
    slurm_testbed.wait_terminal(job.job_id)
    argv = ["sacct", "--noheader", "--parsable2", "-j", job.job_id, "--format=" + ",".join(SACCT_QUERY_FIELDS)]
    deadline = time.monotonic() + 60
    while True:  # rows are partial for seconds after the end: wait for the step's MaxRSS and NTasks
        df = read_sacct_parsable2(run_command(argv, timeout=30).stdout, SACCT_QUERY_FIELDS)
        step = df[df["step"] == "0"]
        if len(step) and step["max_rss_bytes"].notna().all() and (df["req_mem_bytes"].notna().any()):
            break
        assert time.monotonic() < deadline, df.to_string()
        time.sleep(1)
    job_row = df[df["step"].isna()].iloc[0]
    assert job_row["state"] == "COMPLETED"
    assert 140 * _MIB < step["max_rss_bytes"].iloc[0] < 200 * _MIB  # one task's peak
    assert 2 * 140 * _MIB < job_row["mem_used_bytes"] < 2 * 200 * _MIB
    assert job_row["mem_used_bytes"] <= job_row["req_mem_bytes"] == 1024 * _MIB
