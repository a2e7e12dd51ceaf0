"""Expand a sweep into its points, each with a stable id (the list form of :mod:`hpcjobs.sweep.points.stream`).

:func:`expand` is deterministic: the same spec and overrides give the same points, in the same
order, with the same ids, on any machine (random parts draw from ``random.Random(seed)``). That
is what lets a killed ``hpcjobs sweep`` be re-run and find its ledger still matching.

Order: the parts of a sweep combine like nested for-loops (the first part is the outermost loop),
then the command-line overrides (innermost). A value listed twice in one grid list is an error
(:mod:`hpcjobs.sweep.points.values`); points that still come out identical (same parameters, same types,
e.g. from two ``union`` items) are kept once, at their first position; ``Point.index`` numbers the
survivors 0..N-1.

A point, its id and its environment file are :mod:`hpcjobs.sweep.points.point`; the command-line
overrides are read by :mod:`hpcjobs.sweep.points.overrides`; random draws are
:mod:`hpcjobs.sweep.points.sampling`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hpcjobs.config.sweep import SweepSpec
from hpcjobs.sweep.points.point import Point
from hpcjobs.sweep.points.stream import sweep_points

if TYPE_CHECKING:
    from hpcjobs.config.yamlio import YamlDocument


def expand(spec: SweepSpec | None, overrides: Sequence[str] | Mapping[str, Sequence[Any]] = (), *,
           doc: YamlDocument | None = None, source_text: str | None = None) -> list[Point]:
    """Expand a sweep (and command-line overrides) into its points, in a deterministic order.

    The number of points of the product is computed from the spec first and checked against the
    limit (see :mod:`hpcjobs.config.sweep_size`): nothing is built for a sweep over it.

    Args:
        spec: The validated ``sweep:`` section; ``None`` or empty gives one point without parameters.
        overrides: Hydra-style ``KEY=V1,V2`` strings (see
            :func:`hpcjobs.sweep.points.overrides.parse_overrides`) or an already parsed grid. They
            combine with the sweep as a product (innermost loop); a name the sweep also defines takes
            the override's values instead. The top-level ``exclude`` and ``filter`` apply after the
            overrides.
        doc: The experiment document the spec came from: problems found while expanding name its
            file and the line of the ``sweep:`` key concerned (else they have no location).
        source_text: The text ``doc`` was parsed from: floats keep their spelling in the job's
            environment (:func:`hpcjobs.sweep.points.values.source_spellings`).

    Returns:
        The points, duplicates dropped (first occurrence kept), indexed 0..N-1.

    Raises:
        ConfigError: Bad overrides, a value listed twice in a grid list (located), a product over
            the points limit, ``exclude``/``filter`` naming an
            unknown parameter, a filter that fails on a point, or parameter names that collide as
            environment variables.
    """
    return list(sweep_points(spec, overrides, doc=doc, source_text=source_text))
