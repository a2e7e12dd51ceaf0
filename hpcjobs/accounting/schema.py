"""The one normalised job-accounting schema shared by Slurm, PBS Pro/OpenPBS and Torque.

Every ingest function (``sacct`` text or JSON, ``qstat -f`` JSON/text/XML,
PBS/Torque accounting logs) returns a DataFrame with exactly these columns in
this order and with these dtypes; :func:`conform` enforces it. One row per job,
array task or (Slurm) step.

=================  ========================  ==================================================
column             dtype                     meaning
=================  ========================  ==================================================
scheduler          category                  ``slurm``, ``pbspro`` or ``torque``
cluster            category                  cluster / PBS server name, if known
job_id             string                    id as the scheduler prints it (``123_4``, ``1234[7].srv``)
job_id_raw         string                    unique numeric id of this job/task (Slurm JobIDRaw, PBS sequence number)
array_job_id       string                    parent array id (``123``, ``1234[].srv``), NA if not an array task
array_task_id      Int64                     index within the array, NA otherwise (NA for a collapsed pending range)
array_task_spec    string                    the pending range when several tasks share a row (``5-9%2``)
het_offset         Int64                     heterogeneous-job component (Slurm ``123+1``), NA otherwise
step               string                    step name (``batch``, ``extern``, ``0``), NA for the job/allocation row
job_name           string                    job name
user               category                  user name
account            category                  account / project
partition          category                  Slurm partition or PBS queue
qos                category                  QoS, NA where the scheduler has none
state              category                  normalised state (:data:`hpcjobs.states.ALL_STATES`)
state_raw          string                    the scheduler's own state text (``CANCELLED by 0``, ``F``)
exit_code          Int64                     exit status of the script (0-255), NA if unknown
exit_signal        Int64                     signal that killed it, NA/0 if none
submit_time        datetime64[ns, UTC]       when submitted
eligible_time      datetime64[ns, UTC]       when it became eligible to run
start_time         datetime64[ns, UTC]       when it started (NaT if never)
end_time           datetime64[ns, UTC]       when it ended (NaT if not yet)
wait               timedelta64[ns]           start − eligible (or submit when eligible unknown)
elapsed            timedelta64[ns]           run time
time_limit         timedelta64[ns]           requested wall-time limit (NaT = unlimited/unknown)
nodes              Int64                     nodes allocated (requested if not started)
cpus               Int64                     CPUs allocated (requested if not started)
gpus               Int64                     GPUs allocated (requested if not started)
gpu_type           category                  GPU model if the request named one
req_mem_bytes      Int64                     memory requested for the whole job, bytes
max_rss_bytes      Int64                     peak resident memory, bytes (max over steps for a job row)
mem_used_bytes     Int64                     memory used (Slurm: MaxRSS × NTasks, at most the request)
cpu_time           timedelta64[ns]           CPU time used (user + system)
gpu_utilization    Float64                   mean GPU utilisation, fraction, from the scheduler's own records
gpu_mem_max_bytes  Int64                     largest GPU memory used by one GPU, from the scheduler's own records
node_list          string                    nodes the job ran on
comment            string                    job comment (holds the hpcjobs tag)
sweep_id           category                  hpcjobs sweep id, from the tag, NA if not an hpcjobs job
chunk              Int64                     hpcjobs array chunk, from the tag
=================  ========================  ==================================================
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hpcjobs.states import ALL_STATES

#: Column name → pandas dtype, in the canonical order.
COLUMNS: dict[str, Any] = {
    "scheduler": "category",
    "cluster": "category",
    "job_id": "string",
    "job_id_raw": "string",
    "array_job_id": "string",
    "array_task_id": "Int64",
    "array_task_spec": "string",
    "het_offset": "Int64",
    "step": "string",
    "job_name": "string",
    "user": "category",
    "account": "category",
    "partition": "category",
    "qos": "category",
    "state": pd.CategoricalDtype(list(ALL_STATES)),
    "state_raw": "string",
    "exit_code": "Int64",
    "exit_signal": "Int64",
    "submit_time": "datetime64[ns, UTC]",
    "eligible_time": "datetime64[ns, UTC]",
    "start_time": "datetime64[ns, UTC]",
    "end_time": "datetime64[ns, UTC]",
    "wait": "timedelta64[ns]",
    "elapsed": "timedelta64[ns]",
    "time_limit": "timedelta64[ns]",
    "nodes": "Int64",
    "cpus": "Int64",
    "gpus": "Int64",
    "gpu_type": "category",
    "req_mem_bytes": "Int64",
    "max_rss_bytes": "Int64",
    "mem_used_bytes": "Int64",
    "cpu_time": "timedelta64[ns]",
    "gpu_utilization": "Float64",
    "gpu_mem_max_bytes": "Int64",
    "node_list": "string",
    "comment": "string",
    "sweep_id": "category",
    "chunk": "Int64",
}


def empty_frame() -> pd.DataFrame:
    """A DataFrame with the schema's columns and dtypes and no rows."""
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in COLUMNS.items()})


def conform(df: pd.DataFrame) -> pd.DataFrame:
    """Return ``df`` with exactly the schema's columns, in order, with the schema's dtypes.

    Missing columns are added as all-NA; extra columns are dropped.
    """
    out = {}
    n = len(df)
    for name, dtype in COLUMNS.items():
        if name in df.columns:
            col = df[name]
            if str(col.dtype) != str(dtype):
                col = col.astype(dtype)
            out[name] = col.reset_index(drop=True)
        else:
            out[name] = pd.Series([pd.NA] * n, dtype=dtype) if n else pd.Series([], dtype=dtype)
    return pd.DataFrame(out)
