"""PBS Pro / OpenPBS queue state from ``qstat -Q -f -F json`` (pure: text in, values out).

``qstat -Q -f -F json`` prints ``{"Queue": {name: {attributes}}}`` (qstat(1B), PBS Professional
Reference Guide "Queue Attributes"): ``enabled`` and ``started`` as ``"True"``/``"False"``,
``queue_type`` (``Execution`` or ``Route``), ``total_jobs``, ``state_count`` as
``"Transit:0 Queued:1 Held:0 Waiting:0 Running:1 Exiting:0 Begun:0 "`` and ``resources_max``
(e.g. ``walltime``, ``ncpus``). Real outputs of OpenPBS 23.06 are in ``tests/data/plan/`` and
``tests/data/pbs/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.estimates import QueueState
from hpcjobs.schedulers.pbs.formats import parse_qstat_json
from hpcjobs.units import is_ascii_digits

#: The command that lists the queues with their state.
QUEUE_STATE_ARGV: tuple[str, ...] = ("qstat", "-Q", "-f", "-F", "json")


def parse_state_count(text: str) -> dict[str, int]:
    """``"Transit:0 Queued:1 Held:0 ..."`` → ``{"Transit": 0, "Queued": 1, "Held": 0, ...}`` (bad items skipped)."""
    out: dict[str, int] = {}
    for item in text.split():
        name, _, count = item.partition(":")
        if name and is_ascii_digits(count):
            out[name] = int(count)
    return out


def _bool(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "t", "y", "yes")


def parse_queue_states(text: str) -> dict[str, QueueState]:
    """Every queue of ``qstat -Q -f -F json`` output, by name.

    Raises:
        SchedulerOutputError: Not JSON, or ``Queue`` is not an object.
    """
    doc = parse_qstat_json(text)
    queues = doc.get("Queue") or {}
    if not isinstance(queues, Mapping):
        raise SchedulerOutputError("qstat -Q JSON 'Queue' is not an object")
    out: dict[str, QueueState] = {}
    for name, attrs in queues.items():
        if not isinstance(attrs, Mapping):
            continue
        counts = parse_state_count(str(attrs.get("state_count") or ""))
        total = attrs.get("total_jobs")
        out[str(name)] = QueueState(
            name=str(name), queue_type=str(attrs.get("queue_type") or ""),
            enabled=_bool(attrs.get("enabled")), started=_bool(attrs.get("started")),
            queued=counts.get("Queued", 0), running=counts.get("Running", 0), held=counts.get("Held", 0),
            total=int(str(total)) if is_ascii_digits(str(total)) else sum(counts.values()),
        )
    return out
