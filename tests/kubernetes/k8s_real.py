"""Helpers for tests against the real one-node Kubernetes testbed (``tests/kubernetes/testbed.sh``).

Tests that need it are marked ``@pytest.mark.kubernetes`` and take the ``kubernetes`` fixture, which
points ``KUBECONFIG`` at the testbed's. When the API server does not answer, the fixture skips with
the command that starts it on a laptop and *fails* under ``CI=true``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from real_testbed import Testbed, client

from hpcjobs.process import CommandResult

ROOT = Path(__file__).resolve().parent.parent.parent
KUBECONFIG = Path(os.environ.get("HPCJOBS_TEST_KUBECONFIG", "/var/lib/hpcjobs-testbed/kubernetes/kubeconfig"))
SITE = "k8s-testbed"


def kubectl(argv: Sequence[str], *, timeout: float = 60.0, check: bool = True) -> CommandResult:
    """Run ``kubectl ARGV...`` on the testbed through the subprocess seam."""
    return client(["kubectl", *argv], timeout=timeout, check=check, env={**os.environ, "KUBECONFIG": str(KUBECONFIG)})


def cluster_problem() -> str | None:
    """Why the testbed cannot be used, or ``None`` when the API server answers and the node is Ready."""
    if not KUBECONFIG.exists():
        return f"{KUBECONFIG} does not exist"
    ready = kubectl(["get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"],
                    timeout=15, check=False)
    if ready.returncode != 0:
        return f"kubectl get nodes exited {ready.returncode}: {ready.stderr.strip()[:300]}"
    if "True" not in ready.stdout.split():
        return f"no Ready node ({ready.stdout.strip()})"
    return None


#: The Kubernetes testbed as the shared real-testbed helper sees it.
KUBERNETES_TESTBED = Testbed("Kubernetes", "sudo bash tests/kubernetes/testbed.sh start", cluster_problem)
START_HINT = KUBERNETES_TESTBED.start_hint


def require_cluster() -> None:
    """The testbed, or a skip (laptop) / failure (``CI=true``) with the reason."""
    KUBERNETES_TESTBED.require()


def objects_of(chunk: str) -> list[dict[str, Any]]:
    """The chunk's Jobs and pods (``kubectl get jobs,pods -l hpcjobs/chunk=<chunk> -o json`` items)."""
    return list(json.loads(kubectl(["get", "jobs,pods", "-l", f"hpcjobs/chunk={chunk}", "-o", "json"]).stdout)["items"])


def delete_chunks(chunks: Sequence[str]) -> None:
    """Delete the chunks' Jobs and their pods."""
    for chunk in chunks:
        kubectl(["delete", "jobs", "-l", f"hpcjobs/chunk={chunk}", "--wait=false"], check=False)

