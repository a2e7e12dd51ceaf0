#!/bin/bash
#PBS -N hello
#PBS -q batch
#PBS -l nodes=1:ppn=1
#PBS -l mem=512mb
#PBS -l walltime=00:05:00
#PBS -o hpcjobs-logs/hello.out
#PBS -e hpcjobs-logs/hello.err

# Rendered by hpcjobs 0.1.0 for site carbon (torque).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=1
export GREETING='Hello from hpcjobs'
export HPCJOBS_JOB_NAME=hello
export HPCJOBS_SITE=carbon

echo "$GREETING on $(hostname)"
