#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=16
export HPCJOBS_JOB_NAME=pack-gpu
export HPCJOBS_SITE=local

python train.py --lr "$LR" --seed "$SEED" --out "$HPCJOBS_RUN_DIR"
