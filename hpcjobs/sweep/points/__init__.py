"""A sweep's points: the ``sweep:`` spec turned into parameter sets, each with a stable id.

- :mod:`hpcjobs.sweep.points.expand`: :func:`~hpcjobs.sweep.points.expand.expand` (spec + Hydra-style
  overrides → a list of :class:`~hpcjobs.sweep.points.point.Point`), the point ids and a point's
  environment file.
- :mod:`hpcjobs.sweep.points.stream`: :class:`~hpcjobs.sweep.points.stream.SweepPoints`, the same
  points produced on demand, in order, never all held (what a million-point sweep uses).
- :mod:`hpcjobs.sweep.points.values`: small truths about sweep values (grid lists without repeats,
  numbers as the YAML wrote them).
- :mod:`hpcjobs.sweep.points.shapes`: per-point job shapes, for sweeps that vary resources or partition.

The spec itself (the pydantic models) is configuration: :mod:`hpcjobs.config.sweep`.
"""
