"""Helpers for tests against the real one-node Kubernetes testbed (``tests/kubernetes/testbed.sh``).

Tests that need it are marked ``@pytest.mark.kubernetes`` and take the ``kubernetes`` fixture, which
points ``KUBECONFIG`` at the testbed's. When the API server does not answer, the fixture skips with
the command that starts it on a laptop and *fails* under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcjobs.errors import HpcJobsError
from hpcjobs.process import CommandResult, run_command

ROOT = Path(__file__).resolve().parent.parent.parent
KUBECONFIG = Path(os.environ.get("HPCJOBS_TEST_KUBECONFIG", "/var/lib/hpcjobs-testbed/kubernetes/kubeconfig"))
START_HINT = "no Kubernetes testbed: run `sudo bash tests/kubernetes/testbed.sh start`"
SITE = "k8s-testbed"


def kubectl(argv: Sequence[str], *, timeout: float = 60.0, check: bool = True) -> CommandResult:
    """Run ``kubectl ARGV...`` on the testbed through the subprocess seam."""
    return run_command(["kubectl", *argv], timeout=timeout, check=check,
                       env={**os.environ, "KUBECONFIG": str(KUBECONFIG)})


def cluster_problem() -> str | None:
    """Why the testbed cannot be used, or ``None`` when the API server answers and the node is Ready."""
    if not KUBECONFIG.exists():
        return f"{KUBECONFIG} does not exist"
    try:
        ready = kubectl(["get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"],
                        timeout=15, check=False)
    except HpcJobsError as exc:
        return str(exc)
    if ready.returncode != 0:
        return f"kubectl get nodes exited {ready.returncode}: {ready.stderr.strip()[:300]}"
    if "True" not in ready.stdout.split():
        return f"no Ready node ({ready.stdout.strip()})"
    return None


def require_cluster() -> None:
    """The testbed, or a skip (laptop) / failure (``CI=true``) with the reason."""
    problem = cluster_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Kubernetes testbed does not answer ({problem}); {START_HINT}")
        pytest.skip(f"{START_HINT} ({problem})")


def objects_of(chunk: str) -> list[dict[str, Any]]:
    """The chunk's Jobs and pods (``kubectl get jobs,pods -l hpcjobs/chunk=<chunk> -o json`` items)."""
    return list(json.loads(kubectl(["get", "jobs,pods", "-l", f"hpcjobs/chunk={chunk}", "-o", "json"]).stdout)["items"])


def delete_chunks(chunks: Sequence[str]) -> None:
    """Delete the chunks' Jobs and their pods."""
    for chunk in chunks:
        kubectl(["delete", "jobs", "-l", f"hpcjobs/chunk={chunk}", "--wait=false"], check=False)


def wait_for(what: str, check: Any, timeout: float = 120.0, every: float = 0.5) -> Any:
    """Call ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(every)
