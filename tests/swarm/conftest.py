"""Fixtures of the Swarm tests: the real one-node Docker Swarm testbed."""

from __future__ import annotations

import pytest

from swarm.real import require_swarm


@pytest.fixture(scope="session")
def swarm_session() -> None:
    require_swarm()


@pytest.fixture
def swarm(swarm_session: None) -> None:
    """The real Swarm testbed (skip on a laptop, failure under CI=true when it does not answer)."""
    return swarm_session
