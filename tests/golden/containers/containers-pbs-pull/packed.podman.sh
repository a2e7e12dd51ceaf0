#!/bin/bash
#PBS -N ctr-pack
#PBS -q gpu
#PBS -l select=1:ncpus=16:mpiprocs=1:ompthreads=16:ngpus=4
#PBS -l walltime=01:00:00
#PBS -J 0-1:2
#PBS -o hpcjobs-logs/ctr-pack.^array_index^.out
#PBS -e hpcjobs-logs/ctr-pack.^array_index^.err
#PBS -o hpcjobs-logs/ctr-pack-d2a55029.0.^array_index^.out
#PBS -e hpcjobs-logs/ctr-pack-d2a55029.0.^array_index^.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs-pull (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=16
export HPCJOBS_JOB_NAME=ctr-pack
export HPCJOBS_SITE=containers-pbs-pull

export HPCJOBS_SWEEP_ID=ctr-pack-d2a55029 HPCJOBS_SWEEP_DIR=/scratch/hpcjobs-sweeps/ctr-pack-d2a55029
export HPCJOBS_CHUNK=0 HPCJOBS_TOKEN=0000000000000000 HPCJOBS_PACK_SIZE=4

# One point of this packed task, in a subshell of its own (pack.sh.j2 runs it once per point).
hpcjobs_point() (
set -eo pipefail
export HPCJOBS_ARRAY_INDEX="${HPCJOBS_PACK_INDEX:?not a point of a packed task}"
# shellcheck source=/dev/null
source "$HPCJOBS_SWEEP_DIR/chunks/0.env"
export HPCJOBS_RUN_DIR="$HPCJOBS_SWEEP_DIR/points/$HPCJOBS_POINT_ID"
for _hpcjobs_d in "$HPCJOBS_SWEEP_DIR/points" "$HPCJOBS_RUN_DIR"; do
    if [ -L "$_hpcjobs_d" ]; then
        printf 'hpcjobs: %s is a symbolic link; a run folder must be a real folder\n' "$_hpcjobs_d" >&2
        exit 1
    fi
done
mkdir -p -- "$HPCJOBS_RUN_DIR"
for _hpcjobs_f in params.json stdout.log stderr.log; do
    if [ -L "$HPCJOBS_RUN_DIR/$_hpcjobs_f" ]; then rm -f -- "$HPCJOBS_RUN_DIR/$_hpcjobs_f"; fi
done
printf '%s\n' "$HPCJOBS_PARAMS_JSON" > "$HPCJOBS_RUN_DIR/params.json"
printf 'hpcjobs: point %s: stdout and stderr go to %s/stdout.log and stderr.log\n' "$HPCJOBS_POINT_ID" "$HPCJOBS_RUN_DIR"
exec >>"$HPCJOBS_RUN_DIR/stdout.log" 2>>"$HPCJOBS_RUN_DIR/stderr.log"
printf '=== hpcjobs: job %s on %s at %s ===\n' "${HPCJOBS_JOB_ID:-${SLURM_JOB_ID:-${PBS_JOBID:-?}}}" "$(hostname 2>/dev/null || echo '?')" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >&2
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
# shellcheck disable=SC2016  # the command is expanded by the container's shell
hpcjobs_podman_run "$(printf 'hpcjobs-%s-%s-%s-%s' "${PBS_JOBID:-$$}" "${PBS_ARRAY_INDEX:-0}" "${HPCJOBS_POINT_ID:-0}" "${HPCJOBS_TASK_RANK:-0}" | tr -c 'a-zA-Z0-9_.-' _)" --rm --init ${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"} --network=host --device nvidia.com/gpu=all --security-opt=label=disable --volume /glade/work:/glade/work --volume "$PWD":"$PWD" ${HPCJOBS_SWEEP_DIR:+"--volume=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --workdir "$PWD" --env OMP_NUM_THREADS --env HPCJOBS_JOB_NAME --env HPCJOBS_SITE --env LR --env CUDA_VISIBLE_DEVICES --env 'HPCJOBS_*' --quiet oci-archive:"$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar bash -c 'python train.py --lr "$LR" --out "$HPCJOBS_RUN_DIR"'
)

# pack: per_node 4: this array task runs chunk points 4*t .. 4*t+3 at once.
hpcjobs_pack_ids="$HPCJOBS_SWEEP_DIR/chunks/0.ids"
hpcjobs_pack_task="${PBS_ARRAY_INDEX:?not an array task}"
IFS=, read -r -a hpcjobs_pack_gpus <<< "${CUDA_VISIBLE_DEVICES:-0,1,2,3}"

# Run one point ($1: its index in the chunk, $2: its slot in this task, $3: its id); record its exit status.
hpcjobs_pack_run() {
    local rc=0 dir="$HPCJOBS_SWEEP_DIR/points/$3"
    if [ "$(cat "$dir/hpcjobs-exit.$HPCJOBS_TOKEN" 2>/dev/null)" = 0 ]; then
        echo "hpcjobs: point $3 completed in an earlier run of this job (requeued): not run again" >&2
        return 0
    fi
    mkdir -p "$dir"
    export HPCJOBS_PACK_INDEX="$1" HPCJOBS_PACK_SLOT="$2" OMP_NUM_THREADS=4
    CUDA_VISIBLE_DEVICES="$(IFS=,; echo "${hpcjobs_pack_gpus[*]:$(( $2 * 1 )):1}")"
    export CUDA_VISIBLE_DEVICES
    hpcjobs_point &
    wait "$!" || rc=$?
    printf '%s\n' "$rc" > "$dir/.hpcjobs-exit.$HPCJOBS_TOKEN.tmp"
    mv -f "$dir/.hpcjobs-exit.$HPCJOBS_TOKEN.tmp" "$dir/hpcjobs-exit.$HPCJOBS_TOKEN"
    return "$rc"
}

hpcjobs_pack_rc=0
hpcjobs_pack_pids=()
for (( hpcjobs_pack_slot = 0; hpcjobs_pack_slot < 4; hpcjobs_pack_slot++ )); do
    hpcjobs_pack_index=$(( hpcjobs_pack_task * 4 + hpcjobs_pack_slot ))
    hpcjobs_pack_point="$(sed -n "$(( hpcjobs_pack_index + 1 ))p" "$hpcjobs_pack_ids")"
    [ -n "$hpcjobs_pack_point" ] || break
    hpcjobs_pack_run "$hpcjobs_pack_index" "$hpcjobs_pack_slot" "$hpcjobs_pack_point" &
    hpcjobs_pack_pids+=("$!")
done
for hpcjobs_pack_pid in "${hpcjobs_pack_pids[@]}"; do
    wait "$hpcjobs_pack_pid" || hpcjobs_pack_rc=1
done
if [ "$hpcjobs_pack_rc" -ne 0 ]; then
    echo "hpcjobs: a point of this packed task failed (see each point's run folder)" >&2
    exit 1
fi
