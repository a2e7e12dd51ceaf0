#!/bin/bash
#K8S namespace=default
#K8S image=hpcjobs-testbed/hostfs:1
#K8S imagePullPolicy=Never
#K8S tasks=2
#K8S parallel=2
#K8S indexed=null
#K8S requests={"cpu": "2", "memory": "1024Mi"}
#K8S limits={"cpu": "2", "memory": "1024Mi"}
#K8S nodes=2
#K8S activeDeadlineSeconds=600
#K8S volume={"hostPath": "/usr", "target": "/usr", "readOnly": true}
#K8S volume={"hostPath": "/etc", "target": "/etc", "readOnly": true}
#K8S runFolders=mount
#K8S runAs=submitter

# Rendered by hpcjobs 0.1.0 for site k8s-dist (kubernetes).
# Submitted as: kubectl create -f CHUNK.k8s.json, batch/v1 Jobs made from the #K8S lines above (one
# setting per line), whose pods run /bin/bash SCRIPT.
set -eo pipefail
# The pod's index: JOB_COMPLETION_INDEX in an Indexed Job, HPCJOBS_K8S_INDEX in a Job of one point.
export HPCJOBS_TASK_INDEX="${JOB_COMPLETION_INDEX:-${HPCJOBS_K8S_INDEX:?not started by hpcjobs on Kubernetes}}"
export HPCJOBS_JOB_ID="${HPCJOBS_K8S_JOB:-}"
# A single job's output goes to files in the submit directory, which is mounted (hpcjobs logs JOB_ID shows them).
exec >>hpcjobs-logs/ddp-"$HPCJOBS_JOB_ID".out 2>>hpcjobs-logs/ddp-"$HPCJOBS_JOB_ID".err
# >>> hpcjobs container rendezvous: 2 containers, one per node; this one is rank $HPCJOBS_TASK_INDEX.
HPCJOBS_NODE_RANK="$HPCJOBS_TASK_INDEX"
HPCJOBS_RDZV_DIR="${BASH_SOURCE[0]}.rdzv-$HPCJOBS_JOB_ID"
export HPCJOBS_NODE_RANK HPCJOBS_RDZV_DIR
# This container's address: the pod's IP (Kubernetes' downward API), else the one of its addresses
# that the job's network gives the service's tasks (Swarm's tasks.<service>), else its hostname's.
hpcjobs_container_ip() {
    local a b
    if [ -n "${HPCJOBS_POD_IP:-}" ]; then echo "$HPCJOBS_POD_IP"; return; fi
    if [ -n "${HPCJOBS_SWARM_SERVICE:-}" ]; then
        for a in $(hostname -I 2>/dev/null); do
            for b in $(getent ahostsv4 "tasks.$HPCJOBS_SWARM_SERVICE" 2>/dev/null | awk '{ print $1 }' | sort -u); do
                if [ "$a" = "$b" ]; then echo "$a"; return; fi
            done
        done
    fi
    getent hosts "$(hostname)" | awk 'NR == 1 { print $1 }'
}
hpcjobs_ip="$(hpcjobs_container_ip)"
if [ -z "$hpcjobs_ip" ]; then echo "hpcjobs: rank $HPCJOBS_NODE_RANK cannot find its own address" >&2; exit 3; fi
mkdir -p "$HPCJOBS_RDZV_DIR"
printf '%s\n' "$hpcjobs_ip" >"$HPCJOBS_RDZV_DIR/.host-$HPCJOBS_NODE_RANK.$$"
mv -f "$HPCJOBS_RDZV_DIR/.host-$HPCJOBS_NODE_RANK.$$" "$HPCJOBS_RDZV_DIR/host-$HPCJOBS_NODE_RANK"
# Wait (at most HPCJOBS_RDZV_TIMEOUT s, default 300) until every rank has written its address.
hpcjobs_wait_end=$((SECONDS + ${HPCJOBS_RDZV_TIMEOUT:-300}))
HPCJOBS_HOST_LIST=""
while :; do
    hpcjobs_found=0 HPCJOBS_HOST_LIST=""
    for ((hpcjobs_r = 0; hpcjobs_r < 2; hpcjobs_r++)); do
        if [ -s "$HPCJOBS_RDZV_DIR/host-$hpcjobs_r" ]; then
            hpcjobs_found=$((hpcjobs_found + 1))
            HPCJOBS_HOST_LIST="$HPCJOBS_HOST_LIST $(cat "$HPCJOBS_RDZV_DIR/host-$hpcjobs_r")"
        fi
    done
    if [ "$hpcjobs_found" -eq 2 ]; then break; fi
    if [ "$SECONDS" -ge "$hpcjobs_wait_end" ]; then
        echo "hpcjobs: rank $HPCJOBS_NODE_RANK: only $hpcjobs_found of 2 ranks wrote their address to $HPCJOBS_RDZV_DIR within ${HPCJOBS_RDZV_TIMEOUT:-300} s (do all 2 containers fit on the cluster at once? is the run folder the same on every node?)" >&2
        exit 3
    fi
    sleep 1
done
HPCJOBS_HOST_LIST="${HPCJOBS_HOST_LIST# }"
# This container's address, which torchrun (--local-addr) advertises rather than the container's
# hostname, a name the other containers may not resolve (no cluster DNS).
HPCJOBS_LOCAL_ADDR="$hpcjobs_ip"
export HPCJOBS_LOCAL_ADDR
# For a program that sets up torch.distributed itself (launcher none); torchrun sets its workers' own.
MASTER_ADDR="${HPCJOBS_HOST_LIST%% *}"
MASTER_PORT="${HPCJOBS_MASTER_PORT:-29500}"
WORLD_SIZE=2
RANK="$HPCJOBS_NODE_RANK"
LOCAL_RANK=0
export HPCJOBS_HOST_LIST MASTER_ADDR MASTER_PORT WORLD_SIZE RANK LOCAL_RANK
echo "hpcjobs: rank $RANK of $WORLD_SIZE at $hpcjobs_ip; rank 0 at $MASTER_ADDR" >&2
# <<< hpcjobs container rendezvous

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=ddp
export HPCJOBS_SITE=k8s-dist

# >>> hpcjobs launch helpers
HPCJOBS_NNODES=2
HPCJOBS_TASKS_PER_NODE=2
HPCJOBS_NPROC_PER_NODE=2
HPCJOBS_JOB_ID="${HPCJOBS_JOB_ID:-$$}"
export HPCJOBS_NNODES HPCJOBS_TASKS_PER_NODE HPCJOBS_NPROC_PER_NODE HPCJOBS_JOB_ID

# The job's hosts, one per line, in node-rank order (the first runs the rendezvous).
hpcjobs_hosts() {
    if [ -n "${HPCJOBS_HOST_LIST:-}" ]; then  # the containers' addresses, rank by rank (launch/containers.sh.j2)
        printf '%s\n' $HPCJOBS_HOST_LIST
        return
    fi
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
    # one container per node: its rank is the node's (launch/containers.sh.j2)
    local node="${HPCJOBS_NODE_RANK:-0}"
    for ((i = 0; i < per_node; i++)); do
        HPCJOBS_NODE_RANK="$node" HPCJOBS_TASK_RANK="$((node * per_node + i))" hpcjobs_task_main &
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


HPCJOBS_RDZV_HOST="$(hpcjobs_hosts | awk 'NR == 1')"
HPCJOBS_RDZV_PORT="$(hpcjobs_rdzv_port)"
export HPCJOBS_RDZV_HOST HPCJOBS_RDZV_PORT
echo "hpcjobs: torchrun on $HPCJOBS_NNODES node(s), rendezvous $HPCJOBS_RDZV_HOST:$HPCJOBS_RDZV_PORT" >&2

# torchrun: one launcher per node, 2 process(es) per node.
hpcjobs_task_main() {
    hpcjobs_signal_group torchrun --nnodes="$HPCJOBS_NNODES" --nproc-per-node="$HPCJOBS_NPROC_PER_NODE" \
        --node-rank="$HPCJOBS_NODE_RANK" \
        --rdzv-backend=c10d --rdzv-endpoint="$HPCJOBS_RDZV_HOST:$HPCJOBS_RDZV_PORT" --rdzv-id="$HPCJOBS_JOB_ID" \
        --local-addr="$HPCJOBS_LOCAL_ADDR" \
        allreduce.py --steps 3
}
hpcjobs_run_tasks 1 2
