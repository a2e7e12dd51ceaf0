#!/bin/bash
#SBATCH --job-name=ctr-mounts-env
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --gres=gpu:2
#SBATCH --time=01:00:00
#SBATCH --output=hpcjobs-logs/%x-%j.out
#SBATCH --error=hpcjobs-logs/%x-%j.err

# Rendered by hpcjobs 0.1.0 for site containers-slurm-pull (slurm).
set -eo pipefail

export OMP_NUM_THREADS=1
export WANDB_PROJECT=demo
export HPCJOBS_JOB_NAME=ctr-mounts-env
export HPCJOBS_SITE=containers-slurm-pull

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

# Container (apptainer): the command below runs in the job's image.
module load apptainer/1.3
for hpcjobs_name in OMP_NUM_THREADS WANDB_PROJECT WANDB_API_KEY HPCJOBS_JOB_NAME HPCJOBS_SITE WANDB_MODE HF_HOME CUDA_VISIBLE_DEVICES $(compgen -e -X '!HPCJOBS_*'); do
    if [ -n "${!hpcjobs_name+set}" ]; then export "APPTAINERENV_$hpcjobs_name=${!hpcjobs_name}"; fi
done
# shellcheck disable=SC2016  # the command is expanded by the container's shell
apptainer exec --cleanenv --nv --bind /scratch:/scratch --bind /scratch/me:/scratch/me --bind "$HOME"/data:/data:ro ${HPCJOBS_SWEEP_DIR:+"--bind=$HPCJOBS_SWEEP_DIR:$HPCJOBS_SWEEP_DIR"} --pwd /workspace "$HOME"/images/pytorch.sif bash -c $'nvidia-smi -L\npython train.py --data /data --out "$HPCJOBS_JOB_NAME.out"'
