#!/bin/bash
#SWARM --mode=replicated-job
#SWARM --replicas=2
#SWARM --max-concurrent=2
#SWARM --restart-condition=none
#SWARM --limit-cpu=1
#SWARM --network=hpcjobs-testbed-net
#SWARM --mount=type=bind,source=/usr,target=/usr,readonly
#SWARM --mount=type=bind,source=/etc,target=/etc,readonly
#SWARM --init
#SWARM --endpoint-mode=dnsrr
#SWARM --no-resolve-image
#SWARM --label=hpcjobs.nodes=2
#SWARM --env=HPCJOBS_SWARM_SLOT={{.Task.Slot}}
#SWARM --env=HPCJOBS_SWARM_NODE_ID={{.Node.ID}}
#SWARM --env=HPCJOBS_SWARM_SERVICE={{.Service.Name}}
#SWARM image=hpcjobs-testbed/hostfs:1

# Rendered by hpcjobs 0.1.0 for site swarm-dist (swarm).
# Submitted as: docker service create --detach --name NAME --label hpcjobs.tag=TAG ARGUMENTS IMAGE /bin/bash SCRIPT,
# with one argument per #SWARM line above (the image line gives IMAGE).
set -eo pipefail
# Swarm numbers a replicated job's tasks by slot, 0..N-1, but writes slot 0 as the node's id.
hpcjobs_slot=${HPCJOBS_SWARM_SLOT:?not started by docker service create}
if [ "$hpcjobs_slot" = "${HPCJOBS_SWARM_NODE_ID:-}" ]; then hpcjobs_slot=0; fi
case $hpcjobs_slot in ''|*[!0-9]*) echo "hpcjobs: Swarm task slot '$hpcjobs_slot' is not a number" >&2; exit 2;; esac
export HPCJOBS_TASK_INDEX="$hpcjobs_slot" HPCJOBS_JOB_ID="${HPCJOBS_SWARM_SERVICE:-}"
# Swarm starts a slot again until one of its tasks exits 0: only the first task of a slot runs the job.
hpcjobs_claims="${BASH_SOURCE[0]}.claims"
mkdir -p "$hpcjobs_claims"
if ! mkdir "$hpcjobs_claims/$HPCJOBS_TASK_INDEX" 2>/dev/null; then
    echo "hpcjobs: task $HPCJOBS_TASK_INDEX of $HPCJOBS_JOB_ID already ran; Swarm started it again: not running it twice" >&2
    exit 0
fi
# A single job's output goes to files in the submit directory, which is mounted (hpcjobs logs JOB_ID shows them).
exec >>hpcjobs-logs/plain-"$HPCJOBS_JOB_ID".out 2>>hpcjobs-logs/plain-"$HPCJOBS_JOB_ID".err
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
export HPCJOBS_JOB_NAME=plain
export HPCJOBS_SITE=swarm-dist

python train.py
