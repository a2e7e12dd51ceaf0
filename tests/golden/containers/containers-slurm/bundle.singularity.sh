#!/bin/bash
#SBATCH --job-name=ctr-bundle
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm (slurm).
set -eo pipefail

export OMP_NUM_THREADS=4
export HPCJOBS_JOB_NAME=ctr-bundle
export HPCJOBS_SITE=containers-slurm

# Container (singularity): the command below runs in the job's image.
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --bind /scratch:/scratch ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} /scratch/bundles/python-3.12 bash -c 'python -c '"'"'import sys; print(sys.version)'"'"''
