"""Helpers for tests against the real one-node Docker Swarm testbed (``tests/swarm/testbed.sh``).

Tests that need it are marked ``@pytest.mark.swarm`` and take the ``swarm`` fixture. When the swarm
does not answer, the fixture skips with the command that starts it on a laptop and *fails* under
``CI=true``. Every docker call goes through :func:`hpcjobs.process.run_command`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from real_testbed import Testbed, client, wait_for

from hpcjobs.process import CommandResult
from hpcjobs.states import parse_job_tag

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE = "hpcjobs-testbed/hostfs:1"
SITE = "swarm-testbed"


def docker(argv: Sequence[str], *, timeout: float = 60.0, check: bool = True) -> CommandResult:
    """Run ``docker ARGV...`` through the subprocess seam."""
    return client(["docker", *argv], timeout=timeout, check=check)


def swarm_problem() -> str | None:
    """Why the testbed cannot be used, or ``None`` when this node is an active swarm manager with the image."""
    info = docker(["info", "--format", "{{.Swarm.LocalNodeState}}/{{.Swarm.ControlAvailable}}"], timeout=15,
                  check=False)
    image = docker(["image", "inspect", IMAGE, "--format", "{{.Id}}"], timeout=15, check=False)
    if info.returncode != 0:
        return f"docker info exited {info.returncode}: {info.stderr.strip()[:300]}"
    if info.stdout.strip() != "active/true":
        return f"this node is not an active swarm manager ({info.stdout.strip()})"
    if image.returncode != 0:
        return f"no image {IMAGE}"
    return None


#: The Swarm testbed as the shared real-testbed helper sees it.
SWARM_TESTBED = Testbed("Docker Swarm", "sudo bash tests/swarm/testbed.sh start", swarm_problem)
START_HINT = SWARM_TESTBED.start_hint


def require_swarm() -> None:
    """The testbed, or a skip (laptop) / failure (``CI=true``) with the reason."""
    SWARM_TESTBED.require()


def services_of(sweep_id: str) -> dict[str, dict[str, Any]]:
    """This sweep's services (by their hpcjobs.tag label): name → ``docker service inspect`` of it."""
    names = docker(["service", "ls", "--filter", "label=hpcjobs.tag", "--format", "{{.Name}}"]).stdout.split()
    if not names:
        return {}
    out = {}
    for svc in json.loads(docker(["service", "inspect", *names]).stdout):
        tag = parse_job_tag(svc["Spec"].get("Labels", {}).get("hpcjobs.tag"))
        if tag is not None and tag.sweep_id == sweep_id:
            out[svc["Spec"]["Name"]] = svc
    return out


def tasks_of(service: str) -> list[dict[str, Any]]:
    """Every task of ``service``, as ``docker service ps --format '{{json .}}'`` prints them."""
    res = docker(["service", "ps", "--no-trunc", "--format", "{{json .}}", service])
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def remove_services(sweep_id: str) -> None:
    """Stop and remove the sweep's services (Swarm keeps finished jobs until they are removed).

    Scaled to 0 first, until none of their tasks runs: ``docker service rm`` alone leaves a job's
    running tasks running (https://github.com/moby/moby/issues/42789).
    """
    names = list(services_of(sweep_id))
    if not names:
        return
    docker(["service", "scale", "--detach", *(f"{n}=0" for n in names)], check=False)

    def stopped() -> bool:
        res = docker(["service", "ps", "--format", "{{.CurrentState}}", *names], check=False)
        return not any(line.startswith(("Running", "Starting", "Preparing")) for line in res.stdout.splitlines())
    wait_for("the sweep's tasks to stop", stopped, timeout=60)
    docker(["service", "rm", *names], check=False)

