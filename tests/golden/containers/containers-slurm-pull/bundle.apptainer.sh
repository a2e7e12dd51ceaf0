#!/bin/bash
#SBATCH --job-name=ctr-bundle
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=4
export HPCJOBS_JOB_NAME=ctr-bundle
export HPCJOBS_SITE=containers-slurm-pull

# Container (apptainer): the command below runs in the job's image.
module load apptainer/1.3
# shellcheck disable=SC2016  # the command is expanded by the container's shell
apptainer exec --bind /scratch:/scratch ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} /scratch/bundles/python-3.12 bash -c 'python -c '"'"'import sys; print(sys.version)'"'"''
