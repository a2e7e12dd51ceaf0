#!/bin/bash
#SBATCH --job-name=ctr-ddp
#SBATCH --partition=gpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:4
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=16
export HPCJOBS_JOB_NAME=ctr-ddp
export HPCJOBS_SITE=containers-slurm-pull

# >>> hpcjobs launch helpers
HPCJOBS_NNODES=2
HPCJOBS_TASKS_PER_NODE=1
HPCJOBS_NPROC_PER_NODE=4
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
        --cpus-per-task="$cpus" --kill-on-bad-exit=1 \
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



# Container (apptainer): the torchrun below runs in the job's image.
module load apptainer/1.3
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif "$(hostname)" >&2
    exit 1
fi
HPCJOBS_RDZV_HOST="$(hpcjobs_hosts | awk 'NR == 1')"
HPCJOBS_RDZV_PORT="$(hpcjobs_rdzv_port)"
export HPCJOBS_RDZV_HOST HPCJOBS_RDZV_PORT
echo "hpcjobs: torchrun on $HPCJOBS_NNODES node(s), rendezvous $HPCJOBS_RDZV_HOST:$HPCJOBS_RDZV_PORT" >&2

# torchrun: one launcher per node, 4 process(es) per node.
hpcjobs_task_main() {
    hpcjobs_signal_group apptainer exec --nv --bind /scratch:/scratch ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif torchrun --nnodes="$HPCJOBS_NNODES" --nproc-per-node="$HPCJOBS_NPROC_PER_NODE" \
        --node-rank="$HPCJOBS_NODE_RANK" \
        --rdzv-backend=c10d --rdzv-endpoint="$HPCJOBS_RDZV_HOST:$HPCJOBS_RDZV_PORT" --rdzv-id="$HPCJOBS_JOB_ID" \
        train_ddp.py --steps 100
}
hpcjobs_run_tasks 1 16
