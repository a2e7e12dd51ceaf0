#!/bin/bash
#PBS -N train-resnet
#PBS -q main
#PBS -A abc123
#PBS -l select=1:ncpus=16:mpiprocs=1:ompthreads=16:ngpus=2:mem=64gb
#PBS -l walltime=02:00:00
#PBS -o hpcjobs-logs/train-resnet.out
#PBS -e hpcjobs-logs/train-resnet.err
#PBS -l job_priority=regular

# Rendered by hpcjobs 0.1.0 for site derecho (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"
export TMPDIR="${SCRATCH:-/glade/derecho/scratch/$USER}/temp"
mkdir -p "$TMPDIR"

module load cuda/12.2
export OMP_NUM_THREADS=16
export WANDB_MODE=offline
export DATA_DIR=/scratch/datasets/imagenet
export lr=0.1
export batch_size=256
export HPCJOBS_JOB_NAME=train-resnet
export HPCJOBS_SITE=derecho

source "$HOME/venvs/torch/bin/activate"
python train.py --lr "$lr" --batch-size "$batch_size" --data "$DATA_DIR"
