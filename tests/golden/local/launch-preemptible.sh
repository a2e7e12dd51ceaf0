#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=4
export HPCJOBS_JOB_NAME=preemptible
export HPCJOBS_SITE=local

# >>> hpcjobs launch helpers
HPCJOBS_NNODES=1
HPCJOBS_TASKS_PER_NODE=1
HPCJOBS_NPROC_PER_NODE=1
HPCJOBS_JOB_ID="${HPCJOBS_JOB_ID:-$$}"
export HPCJOBS_NNODES HPCJOBS_TASKS_PER_NODE HPCJOBS_NPROC_PER_NODE HPCJOBS_JOB_ID

# The job's hosts, one per line, in node-rank order (the first runs the rendezvous).
hpcjobs_hosts() {
    if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
        scontrol show hostnames "$SLURM_JOB_NODELIST"
    elif [ -n "${PBS_NODEFILE:-}" ] && [ -r "$PBS_NODEFILE" ]; then
        awk 'NF && !seen[$1]++ { print $1 }' "$PBS_NODEFILE"
    else
        hostname
    fi
}

# The number in a job id: its digits before the first '.', the last 9 at most.
hpcjobs_job_number() {
    local id="${1%%.*}"
    id="${id//[^0-9]/}"
    if [ "${#id}" -gt 9 ]; then id="${id: -9}"; fi
    echo "$((10#${id:-0}))"
}

# Rendezvous port: 20000 + job number mod 10000 (the same on every node).
hpcjobs_rdzv_port() {
    echo "$((20000 + $(hpcjobs_job_number "$HPCJOBS_JOB_ID") % 10000))"
}

# This task's global rank under srun or mpiexec (0 in the batch script itself).
hpcjobs_task_rank() {
    echo "${SLURM_PROCID:-${PMIX_RANK:-${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${PALS_RANKID:-0}}}}}"
}

# DeepSpeed/MPI hostfile: "host slots=N" per host.
hpcjobs_hostfile() {
    local host
    hpcjobs_hosts | while read -r host; do
        printf '%s slots=%s\n' "$host" "$1"
    done
}

# TF_CONFIG of worker RANK: every host's tasks as workers (ports PORT, PORT+1, ...), host by host.
hpcjobs_tf_config() {
    local rank="$1" port="$2" per_node="$3" host i sep=""
    printf '{"cluster": {"worker": ['
    while read -r host; do
        for ((i = 0; i < per_node; i++)); do
            printf '%s"%s:%d"' "$sep" "$host" "$((port + i))"
            sep=", "
        done
    done < <(hpcjobs_hosts)
    printf ']}, "task": {"type": "worker", "index": %d}}\n' "$rank"
}

# Run CMD in its own process group with the preemption signal ignored by CMD itself (a launcher such
# as torchrun must not die of it), forward the signal to the whole group (its workers checkpoint on
# it), and wait for CMD.
hpcjobs_signal_group() {
    local pid status=0
    set -m
    (trap '' USR1; exec "$@") &
    pid=$!
    set +m
    trap 'kill -s USR1 -- "-$pid" 2>/dev/null || true' USR1
    while :; do
        wait "$pid" && status=0 || status=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    return "$status"
}

# Run hpcjobs_task_main PER_NODE times on every node, with HPCJOBS_NODE_RANK and HPCJOBS_TASK_RANK set
# (CPUS: cores per task).
hpcjobs_run_tasks() {
    local per_node="$1" cpus="$2"
    local i pid status=0 pids=()
    : "$cpus"
    for ((i = 0; i < per_node; i++)); do
        HPCJOBS_NODE_RANK=0 HPCJOBS_TASK_RANK="$i" hpcjobs_task_main &
        pids+=("$!")
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || status=$?
    done
    return "$status"
}
# <<< hpcjobs launch helpers
HPCJOBS_LOG_DIR="$PWD"/hpcjobs-logs
HPCJOBS_LAUNCH_DIR="$HPCJOBS_LOG_DIR/$HPCJOBS_JOB_NAME-$HPCJOBS_JOB_ID.launch"
export HPCJOBS_LOG_DIR HPCJOBS_LAUNCH_DIR
hpcjobs_gpu_sampler_pid=""
hpcjobs_timer_pid=""
hpcjobs_launch_cleanup() {
    if [ -n "$hpcjobs_gpu_sampler_pid" ]; then kill "$hpcjobs_gpu_sampler_pid" 2>/dev/null || true; fi
    if [ -n "$hpcjobs_timer_pid" ]; then kill "$hpcjobs_timer_pid" 2>/dev/null || true; fi
}
trap 'hpcjobs_launch_cleanup' EXIT

# Preemption: SIGUSR1 300 s before the wall-time limit (a timer below); the exit status 75 means "stopped with a checkpoint: resubmit to continue".
hpcjobs_main_pid=""

# Send signal SIG to TARGET (a pid, or -pgid) after SECONDS, unless this timer is killed first.
hpcjobs_after() {
    (
        sleep "$1" &
        sleeper=$!
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        wait "$sleeper" && kill -s "$2" -- "$3" 2>/dev/null
    ) </dev/null >/dev/null 2>&1 &
}

# Stop the program: send SIG to its process group, wait at most 150 s, then TERM it.
hpcjobs_stop_main() {
    local watchdog
    if [ -z "$hpcjobs_main_pid" ]; then return 0; fi
    kill -s "$1" -- "-$hpcjobs_main_pid" 2>/dev/null || kill -s "$1" "$hpcjobs_main_pid" 2>/dev/null || true
    hpcjobs_after 150 TERM "-$hpcjobs_main_pid"
    watchdog=$!
    wait "$hpcjobs_main_pid" 2>/dev/null || true
    kill "$watchdog" 2>/dev/null || true
}

hpcjobs_checkpoint() {
    echo "hpcjobs: running the checkpoint command" >&2
    if ! {
        cp -f checkpoint.pt "checkpoint-$(date +%s).pt"
    }; then
        echo "hpcjobs: the checkpoint command failed" >&2
    fi
}

hpcjobs_requeue() {
    echo "hpcjobs: stopped with a checkpoint; exit status 75 asks for a resubmission" >&2
    exit 75
}

hpcjobs_on_preempt() {
    trap '' USR1 TERM
    echo "hpcjobs: SIGUSR1 at $(date +%s): stopping the program for a checkpoint" >&2
    hpcjobs_stop_main USR1
    hpcjobs_checkpoint
    hpcjobs_requeue
}

hpcjobs_on_term() {
    trap '' USR1 TERM
    echo "hpcjobs: SIGTERM at $(date +%s): stopping the program and checkpointing (hpcjobs does not requeue on SIGTERM; the scheduler may requeue the job itself)" >&2
    hpcjobs_stop_main TERM
    hpcjobs_checkpoint
    exit 143
}
trap hpcjobs_on_preempt USR1
trap hpcjobs_on_term TERM
# The timer: 6900 s = wall time - 300 s after the script starts.
hpcjobs_after 6900 USR1 "$$"
hpcjobs_timer_pid=$!



# The program runs in the background in its own process group, so the SIGUSR1 trap can forward the signal.
set -m
{
    trap 'true' USR1
python train.py --resume-from checkpoint.pt --checkpoint-on-signal USR1
} &
hpcjobs_main_pid=$!
set +m
hpcjobs_status=0
wait "$hpcjobs_main_pid" || hpcjobs_status=$?
if [ "$hpcjobs_status" -ne 0 ]; then exit "$hpcjobs_status"; fi
