"""Container runtimes as shell words: what a job script writes to run its program in ``container:``.

:mod:`hpcjobs.containers.runtimes` builds each runtime's argv (Apptainer/Singularity, Podman) and asks the
scheduler backend for the runtimes it starts itself (Slurm's Pyxis and OCI); :func:`render_container`
encodes every word through the one shell encoder (:mod:`hpcjobs.render.shellvalue`).
"""

from hpcjobs.containers.runtimes import ContainerLines, render_container

__all__ = ["ContainerLines", "render_container"]
