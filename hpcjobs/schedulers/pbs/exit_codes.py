"""What the negative exit statuses of PBS Pro / OpenPBS and Torque mean (their JOB_EXEC_* codes).

A negative ``Exit_status`` is written by the execution daemon when the job script did not run to its
end on its own (it could not start, or the MOM killed it past a limit); the two families number them
differently. :attr:`~hpcjobs.schedulers.base.BaseBackend.job_exec_codes` hands each table to the reports.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Negative PBS Pro / OpenPBS ``Exit_status`` (JOB_EXEC_* in OpenPBS ``src/include/job.h``).
PBS_EXEC_CODES: Mapping[int, str] = {
    -1: "could not start", -2: "could not start", -3: "start failed, will retry", -4: "aborted on MOM start",
    -10: "invalid uid/gid", -11: "rerun", -12: "checkpointed and killed", -20: "mother superior lost",
    -22: "hook error", -24: "ncpus exceeded", -25: "ncpus exceeded", -26: "vmem exceeded", -27: "mem exceeded",
    -28: "cput exceeded", -29: "walltime exceeded",
}
#: Negative Torque ``exit_status`` (JOB_EXEC_* in Torque ``src/include/pbs_job.h``).
TORQUE_EXEC_CODES: Mapping[int, str] = {
    -1: "could not start", -2: "could not start", -3: "start failed, will retry", -4: "aborted on MOM start",
    -8: "command could not be run", -9: "cannot create stdout/stderr", -10: "memory limit exceeded",
    -11: "walltime exceeded", -12: "cput exceeded", -13: "cgroup setup failed, will retry",
}
