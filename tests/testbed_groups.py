"""One xdist group per real testbed, so `pytest -n 3 --dist loadgroup` keeps each scheduler's tests together.

Different schedulers' tests run side by side; each scheduler's own tests run one after another, in file
order, on one worker, as they share its queue (and some stop its accounting daemon for a while).

pytest-xdist reads the ``xdist_group`` marks in its own ``pytest_collection_modifyitems`` on each worker;
that plugin is registered after the conftest files, so pluggy would call it first (last registered, first
called) and it would see no mark at all: ``tryfirst`` puts the marks on before it looks (pytest-xdist's
documentation, "--dist loadgroup").
"""

from __future__ import annotations

import pytest

#: Real-testbed marks, in the order a test carrying several is grouped by.
TESTBED_GROUPS = ("slurm", "pbs", "swarm", "kubernetes")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in TESTBED_GROUPS:
            if item.get_closest_marker(mark) is not None:
                item.add_marker(pytest.mark.xdist_group(mark))
                break
