"""Per-point job shapes: a sweep may vary any key of the experiment, resources and partition included.

A sweep parameter whose first part names a key of the experiment (``resources.gpus_per_node``,
``partition``, ``resources.walltime``, ``launch.nproc_per_node``, ``command``...) sets that key for
its point; every other parameter (``lr``, ``model.depth``) only reaches the job as an environment
variable (experiment-key parameters do too: ``$resources_cpus_per_task``). Points are grouped by
the job they resolve to (the site's defaults applied and its limits checked, per point: the error
names the point), and each group is submitted as its own array (chunked as usual), all in the
same ledger, so ``status`` and ``resubmit`` see one sweep.

The experiment's ``name``, ``site``, ``sweep`` and ``template`` cannot vary per point (they define
the sweep and how all its scripts are rendered).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcjobs.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.config.yamlio import YamlDocument
    from hpcjobs.resolve import ResolvedJob
    from hpcjobs.sweep.points.point import Point

#: Experiment keys that define the sweep itself and cannot vary per point.
FIXED_KEYS = frozenset({"name", "site", "sweep", "template"})


@dataclass(frozen=True)
class JobShape:
    """One resolved job that a group of points runs as.

    Attributes:
        settings: The experiment keys these points set (dotted name → value); empty for the
            experiment as written. When several settings resolve to the same job, the first.
        experiment: The experiment with those keys set.
        job: The resolved job (site defaults applied, limits checked).
    """

    settings: Mapping[str, Any]
    experiment: Experiment
    job: ResolvedJob

    def describe(self) -> str:
        """``resources.cpus_per_task=2, partition=gpu`` (or ``as written``)."""
        return ", ".join(f"{k}={json.dumps(v)}" for k, v in self.settings.items()) or "as written"


def experiment_keys(param_names: Iterable[str]) -> list[str]:
    """The parameter names that set a key of the experiment (their first part is one of its fields).

    Raises:
        ConfigError: A parameter would vary ``name``, ``site``, ``sweep`` or ``template``.
    """
    from hpcjobs.config.experiment import Experiment

    fields = set(Experiment.model_fields)
    out = []
    for name in param_names:
        head = name.split(".", 1)[0]
        if head in FIXED_KEYS:
            raise ConfigError(ConfigProblem(
                f"sweep parameter {name!r} would change the experiment's {head!r} per point, which cannot vary "
                "within a sweep (start one sweep per value instead)", key="sweep"))
        if head in fields:
            out.append(name)
    return out


def _point_words(point: Point, keys: Sequence[str]) -> str:
    shown = ", ".join(f"{k}={json.dumps(point.params[k])}" for k in keys if k in point.params)
    return f"point {point.index} ({point.point_id}: {shown})"


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def _located(exc: ConfigError, point: Point, keys: Sequence[str]) -> ConfigError:
    """``exc``'s problems, each naming the point whose settings caused it."""
    words = _point_words(point, keys)
    problems = []
    for p in exc.problems:
        problems.append(ConfigProblem(f"{words}: {p.message}", file=p.file, line=p.line, column=p.column,
                                      key=p.key, expected=p.expected, choices=p.choices))
    return ConfigError(problems)


class OneShape(Mapping[str, int]):
    """Every point's shape index when there is one shape: 0 for any point id (and nothing stored per point)."""

    def __getitem__(self, point_id: str) -> int:
        return 0

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "OneShape()"


def job_shapes(experiment: Experiment, doc: YamlDocument, site: SiteConfig, site_file: str, base_job: ResolvedJob,
               points: Sequence[Point]) -> tuple[tuple[JobShape, ...], Mapping[str, int]]:
    """Group ``points`` by the job they resolve to.

    Args:
        experiment: The validated experiment (``--set`` applied).
        doc: Its document (``doc.data`` holds the overridden mapping), for located errors.
        site: The site config.
        site_file: The site config's path (for messages).
        base_job: ``experiment`` resolved on ``site`` (the shape of points that set no experiment key).
        points: The expanded points.

    Returns:
        The shapes, in order of first use, and each point's shape index. With no experiment-key
        parameter this is one shape holding ``base_job`` and :class:`OneShape` (nothing per point is built).

    Raises:
        ConfigError: A point's settings make an invalid experiment or break the site's limits (the
            point is named), or a parameter would vary a key of :data:`FIXED_KEYS`.
    """
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.config.validation import validate_document
    from hpcjobs.resolve import resolve

    names = getattr(points, "names", None)  # a streamed sweep knows its names without a pass over its points
    if names is None:
        names = list(dict.fromkeys(n for p in points for n in p.params))
    keys = experiment_keys(names)
    base = JobShape({}, experiment, base_job)
    if not keys:
        return (base,), OneShape()
    shapes: list[JobShape] = []
    by_settings: dict[str, int] = {}
    shape_of: dict[str, int] = {}
    for point in points:
        settings = {k: point.params[k] for k in keys if k in point.params}
        sig = json.dumps(settings, sort_keys=True, default=str)
        index = by_settings.get(sig)
        if index is None:
            if settings:
                data = copy.deepcopy(doc.data)
                for k, v in settings.items():
                    _set(data, k, v)
                try:
                    exp = validate_document(Experiment, doc, data)
                    job = resolve(exp, site, doc=doc, site_file=site_file)
                except ConfigError as exc:
                    raise _located(exc, point, keys) from None
                shape = JobShape(settings, exp, job)
            else:
                shape = base
            index = next((i for i, s in enumerate(shapes) if s.job == shape.job), None)
            if index is None:
                shapes.append(shape)
                index = len(shapes) - 1
            by_settings[sig] = index
        shape_of[point.point_id] = index
    return tuple(shapes), shape_of


def group_by_shape(point_ids: Sequence[str], shape_of: Mapping[str, int]) -> list[tuple[int, list[str]]]:
    """``point_ids`` split by shape, in order of first appearance, order kept within each group.

    Points missing from ``shape_of`` (none when the ledger matches the sweep) go with shape 0.
    """
    if not shape_of:  # one shape (OneShape, or no map): every point in one group, in order
        return [(0, list(point_ids))] if point_ids else []
    groups: dict[int, list[str]] = {}
    for pid in point_ids:
        groups.setdefault(shape_of.get(pid, 0), []).append(pid)
    return list(groups.items())



def chunk_job(shapes: Sequence[JobShape], shape_of: Mapping[str, int], point_ids: Sequence[str],
              default: ResolvedJob) -> ResolvedJob:
    """The job of a chunk: the shape of its points (a chunk holds points of one shape), else ``default``."""
    if not shapes or not point_ids:
        return default
    return shapes[shape_of.get(point_ids[0], 0)].job


__all__ = ["FIXED_KEYS", "JobShape", "OneShape", "chunk_job", "experiment_keys", "group_by_shape", "job_shapes"]
