#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

module load cuda/12.2
export OMP_NUM_THREADS=16
export WANDB_MODE=offline
export DATA_DIR=/scratch/datasets/imagenet
export lr=0.1
export batch_size=256
export HPCJOBS_JOB_NAME=train-resnet
export HPCJOBS_SITE=local

source "$HOME/venvs/torch/bin/activate"
python train.py --lr "$lr" --batch-size "$batch_size" --data "$DATA_DIR"
