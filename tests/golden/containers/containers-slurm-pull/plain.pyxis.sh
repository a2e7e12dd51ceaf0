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

# Container (pyxis): the command below runs in the job's image.
# The image was fetched at submission from docker://nvcr.io/nvidia/pytorch:24.05-py3 (containers.pull: submit).
if [ ! -f /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh ]; then
    printf 'hpcjobs: the image file %s is not on %s (the image_cache of the site must be a folder the nodes see)\n' /scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh "$(hostname)" >&2
    exit 1
fi
# shellcheck disable=SC2016  # the command is expanded by the container's shell
srun --nodes=1 --ntasks=1 --container-image=/scratch/containers/cache/nvcr.io-nvidia-pytorch-24.05-py3-8a86fd81dcbb.sqsh --container-mounts=/scratch:/scratch,"$PWD":"$PWD""${HPCJOBS_SWEEP_DIR:+,$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR}" --container-workdir="$PWD" bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
