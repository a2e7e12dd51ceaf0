"""Helpers for the launch tests: render a job, pull out its launch helpers, run bash with fake tools."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]


def site(scheduler: str, **kw: object) -> SiteConfig:
    """A site with one partition ``q`` (4 GPUs, 64 cores), or the local site."""
    partitions = {} if scheduler == "local" else {"q": {"gpus_per_node": 4, "cpus_per_node": 64}}
    return SiteConfig.model_validate({"name": "s", "scheduler": scheduler, "partitions": partitions, **kw})


def render(scheduler: str, launch: dict, *, site_kw: dict | None = None, **exp: object) -> str:
    """Render an experiment with a ``launch`` section on a fresh site of ``scheduler``."""
    spec: dict = {"name": "job1", "resources": {"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 4,
                                                 "walltime": "1h"}}
    spec.update(exp)
    spec["launch"] = launch
    if launch.get("launcher", "none") == "none" and "command" not in spec and "script" not in spec:
        spec["command"] = "true"
    return render_job(resolve(Experiment.model_validate(spec), site(scheduler, **(site_kw or {})))).text


def helpers(text: str) -> str:
    """The self-contained launch helpers of a rendered script (between the >>> / <<< markers)."""
    start = text.index("# >>> hpcjobs launch helpers")
    end = text.index("# <<< hpcjobs launch helpers")
    return text[start:end]


def fake_tool(bindir: Path, name: str, body: str) -> None:
    """Write an executable bash script ``bindir/name``."""
    path = bindir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def fake_scontrol(bindir: Path, hosts: list[str]) -> None:
    """``scontrol show hostnames LIST`` printing ``hosts`` (whatever LIST is)."""
    fake_tool(bindir, "scontrol", '[ "$1 $2" = "show hostnames" ] || exit 2\nprintf "%s\\n" ' +
              " ".join(hosts) + "\n")


def run_bash(script: str, env: dict[str, str], bindir: Path | None = None, cwd: Path | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with bash in a clean environment (PATH: ``bindir`` then the system's)."""
    path = ((str(bindir) + os.pathsep) if bindir else "") + "/usr/local/bin:/usr/bin:/bin"
    full = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8", **env}
    return subprocess.run(["bash", "-c", script], env=full, capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)
