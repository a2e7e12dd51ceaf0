#!/usr/bin/env bash
# Capture real outputs of the testbed's Slurm into tests/data/slurm/testbed/ (parser fixtures).
#
# Usage (root, testbed running; best right after "testbed.sh reset" so job ids are small):
#   bash tests/slurm/capture_fixtures.sh [OUTDIR]
# Submits, in parallel: a job that completes, one that exits 3, one that times out (--time=0:01),
# one cancelled while running, one cancelled while pending (held), a memory hog (600 MB with
# --mem=100M), a GPU job, a 12-task array throttled %3, a job with a --comment; snapshots squeue
# and sacct while jobs pend/run; then the final sacct (text and --json) once all ended, plus the
# stderr/exit code of failing commands. Every command run is appended to OUTDIR/COMMANDS.txt.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")/.." && pwd)/data/slurm/testbed}
mkdir -p "$OUT" "$OUT/errors"
OUT=$(cd "$OUT" && pwd)
WORK=/var/lib/hpcjobs-testbed/capture
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$WORK"
: >"$OUT/COMMANDS.txt"

# ArrayJobID/ArrayTaskID are not sacct fields in 22.05 ("Invalid field requested"): not in FMT.
FMT=JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,DerivedExitCode,Submit,Eligible,Start,End,Elapsed,ElapsedRaw,Timelimit,TimelimitRaw,NNodes,NCPUS,AllocCPUS,ReqCPUS,ReqMem,MaxRSS,AveRSS,TotalCPU,CPUTime,AllocTRES,ReqTRES,NodeList,Comment,Reason,WorkDir
SQFMT='%i|%A|%F|%K|%j|%u|%a|%P|%T|%r|%M|%l|%L|%D|%C|%m|%b|%V|%S|%k'

note() { printf '%s\t%s\n' "$1" "$2" >>"$OUT/COMMANDS.txt"; }
# shell-quote only the words that need it (single quotes), so the lines read like typed commands
quoted() {
    local a out=() safe='^[][A-Za-z0-9_,./=:%@+^-]+$'
    for a in "$@"; do
        if [[ $a =~ $safe ]]; then out+=("$a"); else out+=("'${a//\'/\'\\\'\'}'"); fi
    done
    echo "${out[*]}"
}

# cap FILE CMD...: stdout to OUT/FILE (stderr must be empty, rc 0)
cap() {
    local file=$1; shift
    note "$file" "$(quoted "$@")"
    "$@" >"$OUT/$file"
}

# cap_err NAME CMD...: stdout, stderr and exit code of a command expected to fail
cap_err() {
    local name=$1 rc=0; shift
    note "errors/$name.{stdout,stderr,rc}" "$(quoted "$@")"
    "$@" >"$OUT/errors/$name.stdout" 2>"$OUT/errors/$name.stderr" || rc=$?
    echo "$rc" >"$OUT/errors/$name.rc"
}

submit() {  # NAME SBATCH-ARGS...: prints the job id
    local name=$1; shift
    local id
    note "(submitted: $name)" "$(quoted sbatch --parsable -J "$name" "$@")"
    id=$(sbatch --parsable -J "$name" "$@")
    echo "${id%%;*}"
}

state_of() { squeue -h -j "$1" -o %T 2>/dev/null | head -n1; }
wait_state() {  # ID STATE TIMEOUT
    local deadline=$(( $(date +%s) + $3 ))
    until [[ $(state_of "$1") == "$2" ]]; do
        (( $(date +%s) < deadline )) || { echo "timeout waiting for $1 to be $2" >&2; return 1; }
        sleep 0.2
    done
}

T0=$(date +%s)
# sbatch --parsable output itself (one plain, one with -M: "id;cluster")
note "sbatch_parsable.txt" "sbatch --parsable -J cap-parsable -t 1 -o /dev/null --wrap true"
sbatch --parsable -J cap-parsable -t 1 -o /dev/null --wrap true >"$OUT/sbatch_parsable.txt"
note "sbatch_parsable_cluster.txt" "sbatch --parsable -M hpctest -J cap-parsable-m -t 1 -o /dev/null --wrap true"
sbatch --parsable -M hpctest -J cap-parsable-m -t 1 -o /dev/null --wrap true >"$OUT/sbatch_parsable_cluster.txt"
P1=$(cat "$OUT/sbatch_parsable.txt"); P2=$(cut -d';' -f1 "$OUT/sbatch_parsable_cluster.txt")

OK=$(submit cap-completed -t 2 -o %x-%j.out --wrap 'sleep 3; echo done')
FAIL=$(submit cap-exit3 -t 2 -o %x-%j.out --wrap 'sleep 3; exit 3')
TO=$(submit cap-timeout --time=0:01 -o %x-%j.out --wrap 'sleep 600')
CRUN=$(submit cap-cancel-running -t 2 -o %x-%j.out --wrap 'sleep 120')
CPEND=$(submit cap-cancel-pending --hold -t 2 -o %x-%j.out --wrap 'sleep 1')
MEM=$(submit cap-memhog -t 2 --mem=100M -o %x-%j.out \
    --wrap '/usr/bin/python3 -c "import time; b = b\"x\" * (600 * 1024 * 1024); time.sleep(20)"')
# shellcheck disable=SC2016
GPU=$(submit cap-gpu -p gpu --gres=gpu:1 -t 2 -o %x-%j.out --wrap 'echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; sleep 2')
ARR=$(submit cap-array --array=0-11%3 -t 2 -o %x-%A_%a.out --wrap 'sleep 4')
COM=$(submit cap-comment --comment=hpcjobs:capture:0:3f2a9c -t 2 -o %x-%j.out --wrap 'sleep 2')
IDS=$P1,$P2,$OK,$FAIL,$TO,$CRUN,$CPEND,$MEM,$GPU,$ARR,$COM
echo "job ids: parsable=$P1,$P2 completed=$OK exit3=$FAIL timeout=$TO cancel_running=$CRUN" \
     "cancel_pending=$CPEND memhog=$MEM gpu=$GPU array=$ARR comment=$COM" | tee "$OUT/JOBIDS.txt"

wait_state "$CRUN" RUNNING 30
sleep 1
# Snapshot 1: array tasks 0-2 running, 3-11 pending as ARR_[3-11%3]; held job pending.
cap squeue_running.txt squeue -o "$SQFMT"
cap squeue_running_array_expanded.txt squeue -r -o "$SQFMT"
cap squeue_running.json squeue --json
cap sacct_running.txt sacct -j "$IDS" --parsable2 --noheader --format=$FMT
cap sacct_running_X.txt sacct -j "$IDS" --parsable2 --noheader -X --format=$FMT
cap scontrol_show_job_array.txt scontrol show job "$ARR"
scancel "$CRUN"; note "(action)" "scancel $CRUN   # cap-cancel-running, while RUNNING"
scancel "$CPEND"; note "(action)" "scancel $CPEND   # cap-cancel-pending, while PENDING (held)"

# Snapshot 2 once the first array round has finished (ARR_[6-11%3] or similar)
sleep 5
cap squeue_array_midway.txt squeue -j "$ARR" -o "$SQFMT"
cap sacct_array_midway_X.txt sacct -j "$ARR" --parsable2 --noheader -X --format=$FMT

# Failing commands (stderr + exit code)
cap_err sbatch_bad_partition sbatch --parsable -p nosuch -t 1 --wrap true
cap_err sbatch_bad_account sbatch --parsable -A nosuch -t 1 --wrap true
cap_err sbatch_array_over_max sbatch --parsable --array=0-101 -t 1 --wrap true
cap_err sbatch_over_time_limit sbatch --parsable -t 2:00:00 --wrap true
cap_err scancel_unknown scancel 999999
cap_err sacct_unknown sacct -j 999999 --parsable2 --noheader -X --format=JobID,State,ExitCode
cap_err squeue_unknown squeue -j 999999
cap_err sacct_invalid_field sacct -j "$OK" --parsable2 --noheader --format=JobID,ArrayJobID

cap scontrol_show_config.txt scontrol show config
cap scontrol_show_partition.txt scontrol show partition

# Wait until every job has left the queue (the timeout job dominates: ~60-90 s).
deadline=$(( $(date +%s) + 180 ))
while [[ -n $(squeue -h -o %i) ]]; do
    (( $(date +%s) < deadline )) || { echo "jobs still queued after 180 s" >&2; squeue >&2; exit 1; }
    sleep 1
done
# ... and until sacct rows are complete (no JobName 'allocation' placeholder, partition set).
sleep 6
cap sacct.txt sacct -j "$IDS" --parsable2 --noheader --format=$FMT
cap sacct_X.txt sacct -j "$IDS" --parsable2 --noheader -X --format=$FMT
cap sacct_header_X.txt sacct -j "$IDS" --parsable2 -X --format=$FMT
cap sacct.json sacct -j "$IDS" --json
cp "$WORK"/cap-gpu-*.out "$OUT/gpu_job_output.txt"
note "gpu_job_output.txt" "(stdout of cap-gpu: echo CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES)"
echo "captured in $(( $(date +%s) - T0 )) s into $OUT"
sacct -j "$IDS" -X -P -o JobID,JobName,State,ExitCode,Elapsed,MaxRSS,ReqMem
sacct -j "$MEM" -P -o JobID,State,ExitCode,MaxRSS,ReqMem
