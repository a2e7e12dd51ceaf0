#!/bin/bash
#PBS -N hello
#PBS -q main
#PBS -A abc123
#PBS -l select=1:ncpus=1:mpiprocs=1:ompthreads=1:mem=512mb
#PBS -l walltime=00:05:00
#PBS -o hpcjobs-logs/hello.out
#PBS -e hpcjobs-logs/hello.err
#PBS -l job_priority=regular

# Rendered by hpcjobs 0.1.0 for site derecho (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"
export TMPDIR="${SCRATCH:-/glade/derecho/scratch/$USER}/temp"
mkdir -p "$TMPDIR"

export OMP_NUM_THREADS=1
export GREETING='Hello from hpcjobs'
export HPCJOBS_JOB_NAME=hello
export HPCJOBS_SITE=derecho

echo "$GREETING on $(hostname)"
