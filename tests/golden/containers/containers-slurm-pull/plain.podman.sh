#!/bin/bash
#SBATCH --job-name=ctr-plain
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:1
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=8
export LR=0.01
export HPCJOBS_JOB_NAME=ctr-plain
export HPCJOBS_SITE=containers-slurm-pull

# Secrets: read at run time (their values are not in this script)
hpcjobs_secret_file="$HOME"/.hf_token
if [ ! -f "$hpcjobs_secret_file" ] || [ ! -r "$hpcjobs_secret_file" ]; then
    echo "hpcjobs: secret HF_TOKEN: cannot read the file $hpcjobs_secret_file" >&2
    exit 2
fi
hpcjobs_secret_mode="$(stat -L -c %a -- "$hpcjobs_secret_file")"
if (( 8#$hpcjobs_secret_mode & 8#044 )); then
    echo "hpcjobs: secret HF_TOKEN: $hpcjobs_secret_file is readable by group or others (mode $hpcjobs_secret_mode); run: chmod 600 $hpcjobs_secret_file" >&2
    exit 2
fi
HF_TOKEN="$(cat -- "$hpcjobs_secret_file")"
export HF_TOKEN
unset hpcjobs_secret_file hpcjobs_secret_mode

# Container (podman): the command below runs in the job's image.
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar "$(hostname)" >&2
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
hpcjobs_podman_run "$(printf 'hpcjobs-%s-%s-%s-%s' "${SLURM_JOB_ID:-$$}" "${SLURM_ARRAY_TASK_ID:-0}" "${HPCJOBS_POINT_ID:-0}" "${HPCJOBS_TASK_RANK:-0}" | tr -c 'a-zA-Z0-9_.-' _)" --rm --init ${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"} --network=host --device nvidia.com/gpu=all --volume /scratch:/scratch --volume "$PWD":"$PWD" ${HPCJOBS_SWEEP_DIR:+"--volume=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --workdir "$PWD" --env OMP_NUM_THREADS --env LR --env HF_TOKEN --env HPCJOBS_JOB_NAME --env HPCJOBS_SITE --env CUDA_VISIBLE_DEVICES --env 'HPCJOBS_*' --quiet oci-archive:/scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-1ffc3b298d8b.tar bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
