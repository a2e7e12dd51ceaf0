#!/bin/bash
#SBATCH --job-name=mpi-solver
#SBATCH --partition=cpu_p1
#SBATCH --account=abc123
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err
#SBATCH --hint=nomultithread

# Rendered by hpcjobs 0.1.0 for site jean-zay (slurm).
set -eo pipefail

export OMP_NUM_THREADS=2
export HPCJOBS_JOB_NAME=mpi-solver
export HPCJOBS_SITE=jean-zay

cd "$HOME"/runs/solver
echo "running on $(hostname) with $OMP_NUM_THREADS threads per rank"
mpirun ./solver --input input.nml
