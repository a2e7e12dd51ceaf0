#!/bin/bash
#PBS -N evaluate
#PBS -q batch
#PBS -l nodes=1:ppn=1
#PBS -l mem=512mb
#PBS -l walltime=00:10:00
#PBS -o hpcjobs-logs/evaluate.out
#PBS -e hpcjobs-logs/evaluate.err
#PBS -M researcher@example.org
#PBS -m bea

# Rendered by hpcjobs 0.1.0 for site carbon (torque).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=1
export HPCJOBS_JOB_NAME=evaluate
export HPCJOBS_SITE=carbon

echo "evaluating the sweep's results"
