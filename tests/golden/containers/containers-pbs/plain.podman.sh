#!/bin/bash
#PBS -N ctr-plain
#PBS -q gpu
#PBS -l select=1:ncpus=8:mpiprocs=1:ompthreads=8:ngpus=1
#PBS -l walltime=01:00:00
#PBS -o hpcjobs-logs/ctr-plain.out
#PBS -e hpcjobs-logs/ctr-plain.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=8
export LR=0.01
export HPCJOBS_JOB_NAME=ctr-plain
export HPCJOBS_SITE=containers-pbs

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
# keep-id maps the job's user into the container; rootful Podman refuses it
if [[ $(id -u) -ne 0 ]]; then HPCJOBS_PODMAN_USERNS=keep-id; else HPCJOBS_PODMAN_USERNS=; fi
export HPCJOBS_PODMAN_USERNS
# shellcheck disable=SC2016  # the command is expanded by the container's shell
podman run --rm --init --name "$(printf 'hpcjobs-%s-%s-%s-%s' "${PBS_JOBID:-$$}" "${PBS_ARRAY_INDEX:-0}" "${HPCJOBS_POINT_ID:-0}" "${HPCJOBS_TASK_RANK:-0}" | tr -c 'a-zA-Z0-9_.-' _)" ${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"} --network=host --device nvidia.com/gpu=all --security-opt=label=disable --volume /glade/work:/glade/work --volume "$PWD":"$PWD" ${HPCJOBS_SWEEP_DIR:+"--volume=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --workdir "$PWD" --env OMP_NUM_THREADS --env LR --env HF_TOKEN --env HPCJOBS_JOB_NAME --env HPCJOBS_SITE --env CUDA_VISIBLE_DEVICES --env 'HPCJOBS_*' nvcr.io/nvidia/pytorch:24.05-py3 bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
