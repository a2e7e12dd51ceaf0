"""Scheduler backends: command builders and pure parsers behind a small Protocol (:mod:`.base`).

The registry of backends by name is :data:`hpcjobs.schedulers.registry.BACKENDS`; this package
imports nothing itself, so the pure parsers in each scheduler's folder (``<name>/formats.py``) can
use :mod:`.base` without import cycles.
"""
