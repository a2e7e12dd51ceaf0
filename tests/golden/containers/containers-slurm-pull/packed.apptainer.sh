#!/bin/bash
#SBATCH --job-name=ctr-pack
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:4
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%A_%a.out
#SBATCH --error=hpcjobs-logs/%x-%A_%a.err
#SBATCH --array=0-0

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=16
export HPCJOBS_JOB_NAME=ctr-pack
export HPCJOBS_SITE=containers-slurm-pull

export HPCJOBS_SWEEP_ID=ctr-pack-cc9daee4 HPCJOBS_SWEEP_DIR=/scratch/hpcjobs-sweeps/ctr-pack-cc9daee4
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
# Container (apptainer): the command below runs in the job's image.
module load apptainer/1.3
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif "$(hostname)" >&2
    exit 1
fi
# shellcheck disable=SC2016  # the command is expanded by the container's shell
apptainer exec --nv --bind /scratch:/scratch ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-99dea3046ad0.sif bash -c 'python train.py --lr "$LR" --out "$HPCJOBS_RUN_DIR"'
)
export -f hpcjobs_point

# pack: per_node 4: this array task runs chunk points 4*t .. 4*t+3 at once.
hpcjobs_pack_ids="$HPCJOBS_SWEEP_DIR/chunks/0.ids"
hpcjobs_pack_task="${SLURM_ARRAY_TASK_ID:?not an array task}"

# Run one point ($1: its index in the chunk, $2: its slot in this task, $3: its id); record its exit status.
hpcjobs_pack_run() {
    local rc=0 dir="$HPCJOBS_SWEEP_DIR/points/$3"
    if [ "$(cat "$dir/hpcjobs-exit.$HPCJOBS_TOKEN" 2>/dev/null)" = 0 ]; then
        echo "hpcjobs: point $3 completed in an earlier run of this job (requeued): not run again" >&2
        return 0
    fi
    mkdir -p "$dir"
    export HPCJOBS_PACK_INDEX="$1" HPCJOBS_PACK_SLOT="$2" OMP_NUM_THREADS=4
    srun --exact --export=ALL --nodes=1 --ntasks=1 --cpus-per-task=4 --gres=gpu:1 --job-name="$3" bash -c hpcjobs_point &
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
