"""hpcjobs: from an experiment YAML to jobs on Slurm and PBS clusters, and back to answers."""

__version__ = "0.1.0"
