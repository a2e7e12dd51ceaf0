#!/bin/bash
#PBS -N mpi-solver
#PBS -q main
#PBS -A abc123
#PBS -l select=2:ncpus=8:mpiprocs=4:ompthreads=2:mem=8gb
#PBS -l walltime=00:30:00
#PBS -l place=scatter
#PBS -o hpcjobs-logs/mpi-solver.out
#PBS -e hpcjobs-logs/mpi-solver.err
#PBS -l job_priority=regular

# Rendered by hpcjobs 0.1.0 for site derecho (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"
export TMPDIR="${SCRATCH:-/glade/derecho/scratch/$USER}/temp"
mkdir -p "$TMPDIR"

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=mpi-solver
export HPCJOBS_SITE=derecho

cd "$HOME"/runs/solver
echo "running on $(hostname) with $OMP_NUM_THREADS threads per rank"
mpirun ./solver --input input.nml
