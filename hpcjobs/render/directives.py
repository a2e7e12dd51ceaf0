"""The directive lines of a resolved job's script: its backend's, less what the site forbids, plus extras.

Each backend generates its own (:meth:`hpcjobs.schedulers.base.BaseBackend.directives`, in its
folder: ``schedulers/slurm/directives.py``, ``schedulers/pbs/directives.py``...) as ``(name, text)``
pairs (:data:`Directive`): ``text`` is what follows the directive prefix (``#SBATCH``/``#PBS``),
``name`` is the option or resource a site may forbid (``forbidden_directives``); forbidden ones are
dropped. Values reaching directives are validated names and paths (no spaces, quotes or shell
characters), so no quoting is needed inside directive lines.
"""

from __future__ import annotations

import re

from hpcjobs.config.policy import forbidden_in
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.resolve import ResolvedJob
from hpcjobs.schedulers.base import Directive
from hpcjobs.schedulers.registry import directives_of

__all__ = ["Directive", "build_directives", "check_directive_text"]


_CACHE: dict[tuple[object, ...], tuple[object, list[str]]] = {}
_CACHE_MAX = 256


def _directive_key(job: ResolvedJob) -> tuple[object, ...]:
    """Everything directives depend on (not the environment, setup or parameters of a sweep point)."""
    return (id(job.site), job.name, job.partition, job.account, job.qos, job.nodes, job.tasks_per_node,
            job.cpus_per_task, job.gpus_per_node, job.gpu_type, job.memory_per_node, job.walltime, job.exclusive,
            job.output_dir, job.extra_directives, job.array, job.notify)


def build_directives(job: ResolvedJob) -> list[str]:
    """All directive texts for ``job``: generated ones the site allows, then site/partition/user extras.

    Memoised on the fields directives depend on, so rendering many points of one sweep builds
    them once (the cached entry keeps its site object, so a reused ``id`` never matches).
    """
    key = _directive_key(job)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is job.site:
        return list(hit[1])
    result = _build_directives(job)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = (job.site, result)
    return list(result)


#: What may never appear in a directive line: control characters (a line feed ends the line, and
#: sbatch stops reading directives at the first line that is not one) and Unicode line separators.
_LINE_BREAK_RE = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def check_directive_text(text: str) -> None:
    """Refuse a directive that would not stay one line of the script.

    Raises:
        ConfigError: ``text`` holds a line break, NUL or another control character.
    """
    bad = _LINE_BREAK_RE.search(text)
    if bad:
        raise ConfigError(ConfigProblem(
            f"directive {text!r} contains the control character {bad.group()!r}: a directive must stay on one "
            "line (the scheduler would ignore everything after the break)", key="directives"))


def _build_directives(job: ResolvedJob) -> list[str]:
    forbidden = set(job.site.forbidden_directives)
    generated = [text for name, text in directives_of(job) if name not in forbidden]
    extras = [d for d in job.extra_directives if not forbidden_in(d, forbidden, job.scheduler)]
    result = generated + extras
    for text in result:
        check_directive_text(text)
    return result
