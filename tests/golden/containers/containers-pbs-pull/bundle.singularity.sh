#!/bin/bash
#PBS -N ctr-bundle
#PBS -q gpu
#PBS -l select=1:ncpus=4:mpiprocs=1:ompthreads=4
#PBS -l walltime=01:00:00
#PBS -o hpcjobs-logs/ctr-bundle.out
#PBS -e hpcjobs-logs/ctr-bundle.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs-pull (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=4
export HPCJOBS_JOB_NAME=ctr-bundle
export HPCJOBS_SITE=containers-pbs-pull

# Container (singularity): the command below runs in the job's image.
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --bind /glade/work:/glade/work ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} /scratch/bundles/python-3.12 bash -c 'python -c '"'"'import sys; print(sys.version)'"'"''
