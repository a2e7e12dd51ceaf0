#!/bin/bash

# Rendered by hpcjobs 0.1.0 for site local (local).
set -eo pipefail

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=mpi-solver
export HPCJOBS_SITE=local

cd "$HOME"/runs/solver
echo "running on $(hostname) with $OMP_NUM_THREADS threads per rank"
mpirun ./solver --input input.nml
