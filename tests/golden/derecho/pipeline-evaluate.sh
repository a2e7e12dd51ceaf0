#!/bin/bash
#PBS -N evaluate
#PBS -q main
#PBS -A abc123
#PBS -l select=1:ncpus=1:mpiprocs=1:ompthreads=1:mem=512mb
#PBS -l walltime=00:10:00
#PBS -o hpcjobs-logs/evaluate.out
#PBS -e hpcjobs-logs/evaluate.err
#PBS -M researcher@example.org
#PBS -m bea
#PBS -l job_priority=regular

# Rendered by hpcjobs 0.1.0 for site derecho (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"
export TMPDIR="${SCRATCH:-/glade/derecho/scratch/$USER}/temp"
mkdir -p "$TMPDIR"

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=evaluate
export HPCJOBS_SITE=derecho

echo "evaluating the sweep's results"
