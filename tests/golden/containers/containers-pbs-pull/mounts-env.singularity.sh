#!/bin/bash
#PBS -N ctr-mounts-env
#PBS -q gpu
#PBS -l select=1:ncpus=1:mpiprocs=1:ompthreads=1:ngpus=2
#PBS -l walltime=01:00:00
#PBS -o hpcjobs-logs/ctr-mounts-env.out
#PBS -e hpcjobs-logs/ctr-mounts-env.err

# Rendered by hpcjobs 0.1.0 for site containers-pbs-pull (pbspro).
set -eo pipefail
cd "${PBS_O_WORKDIR:-$PWD}"

export OMP_NUM_THREADS=1
export WANDB_PROJECT=demo
export HPCJOBS_JOB_NAME=ctr-mounts-env
export HPCJOBS_SITE=containers-pbs-pull

# Secrets: read at run time (their values are not in this script)
hpcjobs_secret_file="$HOME"/.wandb_key
if [ ! -f "$hpcjobs_secret_file" ] || [ ! -r "$hpcjobs_secret_file" ]; then
    echo "hpcjobs: secret WANDB_API_KEY: cannot read the file $hpcjobs_secret_file" >&2
    exit 2
fi
hpcjobs_secret_mode="$(stat -L -c %a -- "$hpcjobs_secret_file")"
if (( 8#$hpcjobs_secret_mode & 8#044 )); then
    echo "hpcjobs: secret WANDB_API_KEY: $hpcjobs_secret_file is readable by group or others (mode $hpcjobs_secret_mode); run: chmod 600 $hpcjobs_secret_file" >&2
    exit 2
fi
WANDB_API_KEY="$(cat -- "$hpcjobs_secret_file")"
export WANDB_API_KEY
unset hpcjobs_secret_file hpcjobs_secret_mode

# Container (singularity): the command below runs in the job's image.
for hpcjobs_name in OMP_NUM_THREADS WANDB_PROJECT WANDB_API_KEY HPCJOBS_JOB_NAME HPCJOBS_SITE WANDB_MODE HF_HOME CUDA_VISIBLE_DEVICES $(compgen -e -X '!HPCJOBS_*'); do
    if [ -n "${!hpcjobs_name+set}" ]; then export "SINGULARITYENV_$hpcjobs_name=${!hpcjobs_name}"; fi
done
# shellcheck disable=SC2016  # the command is expanded by the container's shell
singularity exec --cleanenv --nv --nvccli --bind /glade/work:/glade/work --bind /scratch/me:/scratch/me --bind "$HOME"/data:/data:ro ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --pwd /workspace "$HOME"/images/pytorch.sif bash -c $'nvidia-smi -L\npython train.py --data /data --out "$HPCJOBS_JOB_NAME.out"'
