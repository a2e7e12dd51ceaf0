"""hpcjobs: from an experiment YAML to jobs on Slurm and PBS clusters, and back to answers.

``import hpcjobs`` is light; :func:`load_sweep` (pandas) loads on first use. It also plugs the
scheduler backends' registry into the layers below it that must ask it without importing it
(dependency inversion): the site schema (:mod:`hpcjobs.config.scheduler_names`: which schedulers
there are, what their site files hold) and resolving a job (:mod:`hpcjobs.config.scheduler_facts`:
whether the scheduler mails, signals, launches, passes secrets). The registry itself is imported on
the first question.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hpcjobs.config import scheduler_facts as _facts_slot
from hpcjobs.config import scheduler_names as _scheduler_names

if TYPE_CHECKING:
    from hpcjobs.config.scheduler_facts import SchedulerFacts
    from hpcjobs.config.scheduler_names import SiteRules

__version__ = "0.1.0"

__all__ = ["__version__", "load_sweep"]


def __getattr__(name: str) -> Any:
    if name == "load_sweep":
        from hpcjobs.analysis import load_sweep

        return load_sweep
    raise AttributeError(f"module 'hpcjobs' has no attribute {name!r}")


def _site_catalog(everything: bool) -> Mapping[str, SiteRules]:
    """The registered backends' site facts (the registry is imported on the first site file read)."""
    from hpcjobs.schedulers.registry import site_catalog

    return site_catalog(everything)


_scheduler_names.set_catalog(_site_catalog)


def _scheduler_facts(name: str) -> SchedulerFacts:
    """What resolving a job on ``name`` must know, from its backend (the registry is imported on the first job)."""
    from hpcjobs.schedulers.registry import scheduler_facts_of

    return scheduler_facts_of(name)


_facts_slot.set_facts_provider(_scheduler_facts)
