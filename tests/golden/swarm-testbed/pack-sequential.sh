#!/bin/bash
#SWARM --mode=replicated-job
#SWARM --replicas=1
#SWARM --max-concurrent=1
#SWARM --restart-condition=none
#SWARM --reserve-cpu=2
#SWARM --limit-cpu=2
#SWARM --reserve-memory=2G
#SWARM --limit-memory=2G
#SWARM --mount=type=bind,source=/usr,target=/usr,readonly
#SWARM --mount=type=bind,source=/etc,target=/etc,readonly
#SWARM --init
#SWARM --endpoint-mode=dnsrr
#SWARM --no-resolve-image
#SWARM --label=hpcjobs.walltime=1800
#SWARM --env=HPCJOBS_SWARM_SLOT={{.Task.Slot}}
#SWARM --env=HPCJOBS_SWARM_NODE_ID={{.Node.ID}}
#SWARM --env=HPCJOBS_SWARM_SERVICE={{.Service.Name}}
#SWARM image=hpcjobs-testbed/hostfs:1

# Rendered by hpcjobs 0.1.0 for site swarm-testbed (swarm).
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
exec >>hpcjobs-logs/pack-sequential-"$HPCJOBS_JOB_ID".out 2>>hpcjobs-logs/pack-sequential-"$HPCJOBS_JOB_ID".err
# Swarm has no time limit: after the wall time, stop the job and exit 124 (as GNU timeout does).
trap 'exit 124' USR1
( sleep 1800; echo "hpcjobs: wall time of 1800 s reached: stopping the job" >&2
  kill -USR1 0; sleep 30; kill -KILL 0 ) &

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=pack-sequential
export HPCJOBS_SITE=swarm-testbed

./simulate --size "$SIZE" --out "$HPCJOBS_RUN_DIR/result.json"
