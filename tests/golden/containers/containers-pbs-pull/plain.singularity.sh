#!/bin/bash
#PBS -N ctr-plain
#PBS -q gpu
#PBS -l select=1:ncpus=8:mpiprocs=1:ompthreads=8:ngpus=1
#PBS -l walltime=01:00:00
#PBS -o hpcjobs-logs/ctr-plain.out
#PBS -e hpcjobs-logs/ctr-plain.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs-pull (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=8
export LR=0.01
export HPCJOBS_JOB_NAME=ctr-plain
export HPCJOBS_SITE=containers-pbs-pull

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

# Container (singularity): the command below runs in the job's image.
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f "$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-f7485435507f.sif ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' "$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-f7485435507f.sif "$(hostname)" >&2
    exit 1
fi
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --nv --nvccli --bind /glade/work:/glade/work ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} "$HOME"/.cache/hpcjobs/images/nvcr.io-nvidia-pytorch-24.05-py3-f7485435507f.sif bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
