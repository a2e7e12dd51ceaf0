"""``qstat -Q -f -F json`` of OpenPBS 23.06: the testbed with a running and a queued job, and FirecREST's capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.pbs.queues import parse_queue_states, parse_state_count

DATA = Path(__file__).resolve().parents[1] / "data"


def test_testbed_queue_with_one_running_and_one_queued_job() -> None:
    states = parse_queue_states((DATA / "plan" / "openpbs-23.06_qstat-Q-f-F-json_busy.json").read_text())
    q = states["workq"]
    assert (q.queue_type, q.enabled, q.started, q.queued, q.running, q.held, q.total) == (
        "Execution", True, True, 1, 1, 0, 2)
    assert q.state == "enabled, started"


def test_firecrest_capture_of_an_idle_queue() -> None:
    states = parse_queue_states((DATA / "pbs" / "firecrest_openpbs-23.06.06_qstat-F-json-f-Q.json").read_text())
    assert list(states) == ["workq"] and states["workq"].queued == 0 and states["workq"].total == 0


def test_disabled_and_stopped_queue() -> None:
    # the attributes as qmgr's `set queue q enabled = False` / `started = False` leave them (same shape as above)
    text = ('{"Queue": {"q": {"queue_type": "Execution", "total_jobs": 3, "state_count": '
            '"Transit:0 Queued:3 Held:0 Waiting:0 Running:0 Exiting:0 Begun:0 ", "enabled": "False", '
            '"started": "False"}}}')
    q = parse_queue_states(text)["q"]
    assert (q.enabled, q.started, q.queued, q.state) == (False, False, 3, "disabled, stopped")


def test_state_count_items() -> None:
    assert parse_state_count("Transit:0 Queued:12 Held:1 bogus Running:x ") == {"Transit": 0, "Queued": 12, "Held": 1}


def test_not_an_object() -> None:
    with pytest.raises(SchedulerOutputError):
        parse_queue_states('{"Queue": [1, 2]}')
    assert parse_queue_states("") == {}
