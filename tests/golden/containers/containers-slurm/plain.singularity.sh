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

# Rendered by hpcjobs 0.1.0 for site containers-slurm (slurm).
set -eo pipefail

export OMP_NUM_THREADS=8
export LR=0.01
export HPCJOBS_JOB_NAME=ctr-plain
export HPCJOBS_SITE=containers-slurm

# Container (singularity): the command below runs in the job's image.
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --nv --bind /scratch:/scratch ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} docker://nvcr.io/nvidia/pytorch:24.05-py3 bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
