#!/bin/bash
#SBATCH --job-name=evaluate
#SBATCH --partition=cpu_p1
#SBATCH --account=abc123
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --mail-user=researcher@example.org
#SBATCH --mail-type=BEGIN,END,FAIL
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err
#SBATCH --hint=nomultithread

# Rendered by hpcjobs 0.1.0 for site jean-zay (slurm).
set -eo pipefail

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=evaluate
export HPCJOBS_SITE=jean-zay

echo "evaluating the sweep's results"
