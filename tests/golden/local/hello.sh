#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=1
export GREETING='Hello from hpcjobs'
export HPCJOBS_JOB_NAME=hello
export HPCJOBS_SITE=local

echo "$GREETING on $(hostname)"
