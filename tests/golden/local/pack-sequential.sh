#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=pack-sequential
export HPCJOBS_SITE=local

./simulate --size "$SIZE" --out "$HPCJOBS_RUN_DIR/result.json"
