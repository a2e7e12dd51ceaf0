#!/bin/bash
#PBS -N ctr-preempt
#PBS -q gpu
#PBS -l select=1:ncpus=1:mpiprocs=1:ompthreads=1:ngpus=1
#PBS -l walltime=02:00:00
#PBS -o hpcjobs-logs/ctr-preempt.out
#PBS -e hpcjobs-logs/ctr-preempt.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs-pull (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=ctr-preempt
export HPCJOBS_SITE=containers-pbs-pull

# >>> hpcjobs launch helpers
HPCJOBS_NNODES=1
HPCJOBS_TASKS_PER_NODE=1
HPCJOBS_NPROC_PER_NODE=1
HPCJOBS_JOB_ID="${PBS_JOBID:-$$}"
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
    # the batch script signals this group through pbsdsh (the PBS launchers do not forward the signal)
    if [ -n "${HPCJOBS_NODE_RANK:-}" ]; then echo "$pid" >"$HPCJOBS_LAUNCH_DIR/node-$HPCJOBS_NODE_RANK.pgid"; fi
    trap 'kill -s USR1 -- "-$pid" 2>/dev/null || true' USR1
    while :; do
        wait "$pid" && status=0 || status=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    return "$status"
}

# This job's exported environment and launch functions, for tasks started by pbsdsh or mpiexec
# (pbsdsh's tasks do not inherit the batch script's environment).
hpcjobs_write_node_env() {
    local name
    (
        umask 077
        {
            for name in $(compgen -e); do
                case "$name" in
                    PBS_TASKNUM | PBS_NODENUM | PBS_VNODENUM | PBS_MOMPORT | HOSTNAME | PWD | OLDPWD | SHLVL | BASHOPTS | SHELLOPTS | _) continue ;;
                esac
                printf 'export %s=%q\n' "$name" "${!name}"
            done
            declare -f hpcjobs_hosts hpcjobs_job_number hpcjobs_task_rank hpcjobs_tf_config hpcjobs_signal_group
            declare -f hpcjobs_task_main 2>/dev/null || true
            printf 'cd %q\n' "$PWD"
        } >"$1"
    )
}

# Run hpcjobs_task_main PER_NODE times on every node, with HPCJOBS_NODE_RANK and HPCJOBS_TASK_RANK set
# (CPUS: cores per task).
hpcjobs_run_tasks() {
    local per_node="$1" cpus="$2"
    local envfile="$HPCJOBS_LAUNCH_DIR/task-env.sh"
    mkdir -p "$HPCJOBS_LAUNCH_DIR"
    hpcjobs_write_node_env "$envfile"
    : "$cpus" # mpiexec --ppn places the ranks; OMP_NUM_THREADS sizes them
    # shellcheck disable=SC2016  # expanded by each task's shell
    mpiexec -n "$((HPCJOBS_NNODES * per_node))" --ppn "$per_node" \
        /bin/bash -c '. "$1"; HPCJOBS_TASK_RANK="$(hpcjobs_task_rank)"; HPCJOBS_NODE_RANK="$((HPCJOBS_TASK_RANK / $2))"; export HPCJOBS_NODE_RANK HPCJOBS_TASK_RANK; hpcjobs_task_main' hpcjobs-task "$envfile" "$per_node"
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

# Preemption: SIGUSR1 120 s before the wall-time limit (a timer below); the exit status 75 means "stopped with a checkpoint: resubmit to continue".
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
# The timer: 7080 s = wall time - 120 s after the script starts.
hpcjobs_after 7080 USR1 "$$"
hpcjobs_timer_pid=$!



# Container (podman): the command below runs in the job's image.
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f "$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' "$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar "$(hostname)" >&2
    exit 1
fi
# keep-id maps the job's user into the container; rootful Podman refuses it
if [[ $(id -u) -ne 0 ]]; then HPCJOBS_PODMAN_USERNS=keep-id; else HPCJOBS_PODMAN_USERNS=; fi
export HPCJOBS_PODMAN_USERNS
# The container is not this job's child (conmon detaches it) and a `podman run` still starting passes no
# signal on: a TERM, INT or HUP of this shell removes the container (TERM, KILL after 10 s).
hpcjobs_podman_run() {  # hpcjobs_podman_run NAME ARGS...: podman run --name NAME ARGS...
    local hpcjobs_ctr=$1 hpcjobs_ctr_pid='' hpcjobs_ctr_before=$! hpcjobs_ctr_rc=0 hpcjobs_ctr_traps
    shift
    hpcjobs_ctr_traps=$(trap -p TERM INT HUP)
    # set before the client starts: a signal at any moment finds them
    trap 'hpcjobs_podman_signalled 143' TERM
    trap 'hpcjobs_podman_signalled 130' INT
    trap 'hpcjobs_podman_signalled 129' HUP
    podman run --name "$hpcjobs_ctr" "$@" &
    hpcjobs_ctr_pid=$!
    wait "$hpcjobs_ctr_pid" || hpcjobs_ctr_rc=$?
    trap - TERM INT HUP
    eval "$hpcjobs_ctr_traps"
    return "$hpcjobs_ctr_rc"
}
# shellcheck disable=SC2317  # called by the traps above, with hpcjobs_podman_run's variables
hpcjobs_podman_signalled() {  # hpcjobs_podman_signalled STATUS: remove the container, exit STATUS
    local pid=$hpcjobs_ctr_pid
    # between `podman run &` and the assignment, $! is the client already
    if [ -z "$pid" ] && [ "$!" != "$hpcjobs_ctr_before" ]; then pid=$!; fi
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
        podman rm -f -t 10 "$hpcjobs_ctr" >/dev/null 2>&1 || sleep 1
    done
    podman rm -f -t 0 "$hpcjobs_ctr" >/dev/null 2>&1 || true
    exit "$1"
}
export -f hpcjobs_podman_run hpcjobs_podman_signalled

# The program runs in the background in its own process group, so the SIGUSR1 trap can forward the signal.
set -m
{
    trap 'true' USR1
# shellcheck disable=SC2016  # the command is expanded by the container's shell
hpcjobs_podman_run "$(printf 'hpcjobs-%s-%s-%s-%s' "${PBS_JOBID:-$$}" "${PBS_ARRAY_INDEX:-0}" "${HPCJOBS_POINT_ID:-0}" "${HPCJOBS_TASK_RANK:-0}" | tr -c 'a-zA-Z0-9_.-' _)" --rm --init ${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"} --network=host --device nvidia.com/gpu=all --security-opt=label=disable --volume /glade/work:/glade/work --volume "$PWD":"$PWD" ${HPCJOBS_SWEEP_DIR:+"--volume=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --workdir "$PWD" --env OMP_NUM_THREADS --env HPCJOBS_JOB_NAME --env HPCJOBS_SITE --env CUDA_VISIBLE_DEVICES --env 'HPCJOBS_*' --quiet oci-archive:"$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar bash -c 'python train.py --resume'
} &
hpcjobs_main_pid=$!
set +m
hpcjobs_status=0
wait "$hpcjobs_main_pid" || hpcjobs_status=$?
if [ "$hpcjobs_status" -ne 0 ]; then exit "$hpcjobs_status"; fi
