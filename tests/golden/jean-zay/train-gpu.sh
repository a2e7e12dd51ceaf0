#!/bin/bash
#SBATCH --job-name=train-resnet
#SBATCH --partition=gpu_p13
#SBATCH --account=abc123
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gres=gpu:2
#SBATCH --time=02:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err
#SBATCH --hint=nomultithread

# Rendered by hpcjobs 0.1.0 for site jean-zay (slurm).
set -eo pipefail

module load cuda/12.2
export OMP_NUM_THREADS=16
export WANDB_MODE=offline
export DATA_DIR=/scratch/datasets/imagenet
export lr=0.1
export batch_size=256
export HPCJOBS_JOB_NAME=train-resnet
export HPCJOBS_SITE=jean-zay

source "$HOME/venvs/torch/bin/activate"
python train.py --lr "$lr" --batch-size "$batch_size" --data "$DATA_DIR"
