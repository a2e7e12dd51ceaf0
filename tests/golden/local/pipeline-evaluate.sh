#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=evaluate
export HPCJOBS_SITE=local

echo "evaluating the sweep's results"
