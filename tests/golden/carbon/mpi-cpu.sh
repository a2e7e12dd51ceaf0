#!/bin/bash
#PBS -N mpi-solver
#PBS -q batch
#PBS -l nodes=2:ppn=8
#PBS -l mem=16gb
#PBS -l walltime=00:30:00
#PBS -o hpcjobs-logs/mpi-solver.out
#PBS -e hpcjobs-logs/mpi-solver.err

# Rendered by hpcjobs 0.1.0 for site carbon (torque).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=mpi-solver
export HPCJOBS_SITE=carbon

cd "$HOME"/runs/solver
echo "running on $(hostname) with $OMP_NUM_THREADS threads per rank"
mpirun ./solver --input input.nml
