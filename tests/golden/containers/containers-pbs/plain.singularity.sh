#!/bin/bash
#PBS -N ctr-plain
#PBS -q gpu
#PBS -l select=1:ncpus=8:mpiprocs=1:ompthreads=8:ngpus=1
#PBS -l walltime=01:00:00
#PBS -o hpcjobs-logs/ctr-plain.out
#PBS -e hpcjobs-logs/ctr-plain.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=8
export LR=0.01
export HPCJOBS_JOB_NAME=ctr-plain
export HPCJOBS_SITE=containers-pbs

# Container (singularity): the command below runs in the job's image.
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --nv --nvccli --bind /glade/work:/glade/work ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} docker://nvcr.io/nvidia/pytorch:24.05-py3 bash -c 'python train.py --lr "$LR" --out "$PWD/results"'
