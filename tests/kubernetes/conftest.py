"""Fixtures of the Kubernetes tests: the real one-node testbed."""

from __future__ import annotations

import pytest
from k8s_real import KUBECONFIG, require_cluster


@pytest.fixture(scope="session")
def kubernetes_session() -> None:
    require_cluster()


@pytest.fixture
def kubernetes(kubernetes_session: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Kubernetes testbed, with KUBECONFIG pointing at it (skip on a laptop, failure under CI=true)."""
    monkeypatch.setenv("KUBECONFIG", str(KUBECONFIG))
