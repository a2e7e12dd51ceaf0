"""The backends, registered by name in a plain dict (``BACKENDS["slurm"]``).

Importing this module imports no heavy dependency: backends are command
builders and pure parsers; :mod:`hpcjobs.schedulers.client` runs them.
"""

from __future__ import annotations

from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.schedulers.base import SchedulerBackend
from hpcjobs.schedulers.kubernetes import KubernetesBackend
from hpcjobs.schedulers.pbs import PbsProBackend, TorqueBackend
from hpcjobs.schedulers.slurm import SlurmBackend
from hpcjobs.schedulers.swarm import SwarmBackend

#: Scheduler family → backend.
BACKENDS: dict[str, SchedulerBackend] = {
    "slurm": SlurmBackend(),
    "pbspro": PbsProBackend(),
    "torque": TorqueBackend(),
    "swarm": SwarmBackend(),
    "kubernetes": KubernetesBackend(),
}


def get_backend(name: str) -> SchedulerBackend:
    """The backend for a scheduler family.

    Raises:
        ConfigError: No backend of that name.
    """
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigError(ConfigProblem(f"no scheduler backend {name!r}", key="scheduler",
                                        choices=tuple(BACKENDS))) from None
