#!/bin/bash
#K8S namespace=default
#K8S image=hpcjobs-testbed/hostfs:1
#K8S imagePullPolicy=Never
#K8S tasks=1
#K8S parallel=1
#K8S indexed=null
#K8S requests={"cpu": "2", "memory": "2048Mi"}
#K8S limits={"cpu": "2", "memory": "2048Mi"}
#K8S activeDeadlineSeconds=1800
#K8S volume={"hostPath": "/usr", "target": "/usr", "readOnly": true}
#K8S volume={"hostPath": "/etc", "target": "/etc", "readOnly": true}
#K8S runFolders=mount
#K8S runAs=submitter

# Rendered by hpcjobs 0.1.0 for site k8s-testbed (kubernetes).
# Submitted as: kubectl create -f CHUNK.k8s.json, batch/v1 Jobs made from the #K8S lines above (one
# setting per line), whose pods run /bin/bash SCRIPT.
set -eo pipefail
# The pod's index: JOB_COMPLETION_INDEX in an Indexed Job, HPCJOBS_K8S_INDEX in a Job of one point.
export HPCJOBS_TASK_INDEX="${JOB_COMPLETION_INDEX:-${HPCJOBS_K8S_INDEX:?not started by hpcjobs on Kubernetes}}"
export HPCJOBS_JOB_ID="${HPCJOBS_K8S_JOB:-}"
# A single job's output goes to files in the submit directory, which is mounted (hpcjobs logs JOB_ID shows them).
exec >>hpcjobs-logs/pack-sequential-"$HPCJOBS_JOB_ID".out 2>>hpcjobs-logs/pack-sequential-"$HPCJOBS_JOB_ID".err

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=pack-sequential
export HPCJOBS_SITE=k8s-testbed

./simulate --size "$SIZE" --out "$HPCJOBS_RUN_DIR/result.json"
