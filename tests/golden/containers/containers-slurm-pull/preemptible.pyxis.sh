#!/bin/bash
#SBATCH --job-name=ctr-preempt
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --gres=gpu:1
#SBATCH --time=02:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=ctr-preempt
export HPCJOBS_SITE=containers-slurm-pull

# >>> hpcjobs launch helpers
HPCJOBS_NNODES=1
HPCJOBS_TASKS_PER_NODE=1
HPCJOBS_NPROC_PER_NODE=1
HPCJOBS_JOB_ID="${SLURM_JOB_ID:-$$}"
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
    export -f hpcjobs_task_main hpcjobs_hosts hpcjobs_job_number hpcjobs_task_rank hpcjobs_tf_config hpcjobs_signal_group
    # shellcheck disable=SC2016  # expanded by each task's shell
    srun --nodes="$HPCJOBS_NNODES" --ntasks="$((HPCJOBS_NNODES * per_node))" --ntasks-per-node="$per_node" \
        --cpus-per-task="$cpus" --kill-on-bad-exit=1 --container-image=/scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh --container-mounts=/scratch:/scratch,"$PWD":"$PWD""${HPCJOBS_SWEEP_DIR:+,$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR}" --container-workdir="$PWD" \
        /bin/bash -c 'HPCJOBS_NODE_RANK="$SLURM_NODEID" HPCJOBS_TASK_RANK="$SLURM_PROCID"; export HPCJOBS_NODE_RANK HPCJOBS_TASK_RANK; hpcjobs_task_main'
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

# Preemption: SIGUSR1 120 s before the wall-time limit (--signal); the exit status 75 means "stopped with a checkpoint: resubmit to continue".
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

# Stop the program: send SIG to its process group, wait at most 60 s, then TERM it.
hpcjobs_stop_main() {
    local watchdog
    if [ -z "$hpcjobs_main_pid" ]; then return 0; fi
    kill -s "$1" -- "-$hpcjobs_main_pid" 2>/dev/null || kill -s "$1" "$hpcjobs_main_pid" 2>/dev/null || true
    hpcjobs_after 60 TERM "-$hpcjobs_main_pid"
    watchdog=$!
    wait "$hpcjobs_main_pid" 2>/dev/null || true
    kill "$watchdog" 2>/dev/null || true
}

hpcjobs_checkpoint() {
    echo "hpcjobs: running the checkpoint command" >&2
    if ! {
        echo checkpointed
    }; then
        echo "hpcjobs: the checkpoint command failed" >&2
    fi
}

hpcjobs_requeue() {
    local count="${SLURM_RESTART_COUNT:-0}"
    if [ "$count" -lt 3 ]; then
        echo "hpcjobs: requeueing job $SLURM_JOB_ID (restart $((count + 1)) of 3)" >&2
        if scontrol requeue "$SLURM_JOB_ID"; then
            exit 0
        fi
        echo "hpcjobs: scontrol requeue failed" >&2
    else
        echo "hpcjobs: not requeueing: $count restart(s), the limit is 3" >&2
    fi
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



# Container (pyxis): the command below runs in the job's image.
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh "$(hostname)" >&2
    exit 1
fi

# The program runs in the background in its own process group, so the SIGUSR1 trap can forward the signal.
set -m
{
    trap 'true' USR1
# shellcheck disable=SC2016  # the command is expanded by the container's shell
srun --nodes=1 --ntasks=1 --container-image=/scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh --container-mounts=/scratch:/scratch,"$PWD":"$PWD""${HPCJOBS_SWEEP_DIR:+,$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR}" --container-workdir="$PWD" bash -c 'python train.py --resume'
} &
hpcjobs_main_pid=$!
set +m
hpcjobs_status=0
wait "$hpcjobs_main_pid" || hpcjobs_status=$?
if [ "$hpcjobs_status" -ne 0 ]; then exit "$hpcjobs_status"; fi
