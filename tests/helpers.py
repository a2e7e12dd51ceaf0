"""Helpers many test files share: run the CLI in-process or as a subprocess, and render a spec.

Import them by name (``from helpers import invoke``); ``tests/`` is on pytest's ``pythonpath``.
:class:`FakeSlurm` is a fake Slurm behind the process seam (sweeps, pipelines, dry runs against real runs).
A helper that a single file needs stays in that file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hpcjobs.errors import CommandError
from hpcjobs.process import CommandResult

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str, input: str | None = None) -> tuple[int, str]:
    """Run ``hpcjobs ARGS...`` in this process (click's runner): its exit code and output.

    A crash (an exception other than click's exits) fails the test at once, with the output: a
    command may fail, but only with a clear error and an exit code.
    """
    from hpcjobs.cli import main

    result = CliRunner().invoke(main, list(args), input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"hpcjobs {' '.join(args)} crashed: {result.exception!r}\n{result.output}")
    return result.exit_code, result.output


def run_hpcjobs(*args: str, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hpcjobs ARGS...`` as a subprocess of this checkout, as a person's shell would.

    Wide, colourless output (``COLUMNS=200``, ``NO_COLOR=1``); the caller's ``HPCJOBS_SWEEP_ROOT`` is
    dropped so sweeps land under ``cwd``; ``env`` adds to (or overrides) the rest of the environment.
    """
    full = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    full.pop("HPCJOBS_SWEEP_ROOT", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout, check=False)


def render_spec(spec: Mapping[str, Any], site: Any, *, name: str | None = None, **resolve_options: Any) -> Any:
    """Validate ``spec`` as an experiment (named ``name`` when given), resolve it on ``site`` and render it.

    ``site`` is a :class:`~hpcjobs.config.site.SiteConfig` or a path to a site file; the rendered job
    (:func:`hpcjobs.render.render_job`'s answer) is returned.
    """
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.config.sites import load_site_file
    from hpcjobs.render.script import render_job
    from hpcjobs.resolve import resolve

    site_config = site if isinstance(site, SiteConfig) else load_site_file(Path(site))
    experiment = Experiment.model_validate({**spec, **({"name": name} if name is not None else {})})
    return render_job(resolve(experiment, site_config, **resolve_options))


class FakeSlurm:
    """sbatch/sacct/squeue/scancel/scontrol of a fake Slurm whose task outcomes a test sets.

    ``outcome[job_id]`` is the state of every task of that job (default ``PENDING`` while it has a dependency,
    else ``COMPLETED``); ``failing[job_id]`` the task indices that end ``FAILED`` (exit 3). A job whose
    ``afterok`` upstream has a failed task is reported by squeue as ``PENDING`` with the reason
    ``DependencyNeverSatisfied``, as the testbed's real Slurm does.
    """

    def __init__(self, first_id: int = 100) -> None:
        self.jobs: dict[str, dict[str, object]] = {}
        self.next_id = first_id
        self.calls: list[list[str]] = []
        self.failing: dict[str, set[int]] = {}
        self.running: set[str] = set()
        self.cancelled: set[str] = set()

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        argv = list(argv)
        self.calls.append(argv)
        rc, out, err = 0, "", ""
        name = argv[0]
        if name == "sbatch":
            text = Path(argv[-1]).read_text()
            array = re.search(r"^#SBATCH --array=(\S+)", text, re.M)
            size = int(array.group(1).split("%")[0].split("-")[1]) + 1 if array else 1
            dep = next((a.split("=", 1)[1] for a in argv if a.startswith("--dependency=")), "")
            job_id = str(self.next_id)
            self.next_id += 1
            self.jobs[job_id] = {"comment": next(a.split("=", 1)[1] for a in argv if a.startswith("--comment=")),
                                 "name": re.search(r"^#SBATCH --job-name=(\S+)", text, re.M).group(1),
                                 "size": size, "dep": dep, "array": bool(array)}
            out = f"{job_id}\n"
        elif name == "scontrol":
            out = "ClusterName = fake\nMaxArraySize = 101\nMinJobAge = 300 sec\n"
        elif name == "squeue" and "--format=%F|%k" in argv:
            wanted = next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))
            out = "".join(f"{j}|{d['comment']}\n" for j, d in self.jobs.items() if d["name"] == wanted)
        elif name == "squeue":  # the status fallback: one line per task, with the pending reason
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            lines = []
            for j in ids:
                for i, (state, reason) in self._tasks(j):
                    task, index = (f"{j}_{i}", str(i)) if self.jobs[j]["array"] else (j, "N/A")
                    lines.append(f"{task}|{j}|{j}|{index}|{state}|{reason}|{self.jobs[j]['name']}|(null)")
            out = "".join(line + "\n" for line in lines)
        elif name == "sacct" and "--format=JobID,Comment" in argv:
            out = ""
        elif name == "sacct":
            ids = next(a.split("=", 1)[1] for a in argv if a.startswith("--jobs=")).split(",")
            lines = []
            for j in ids:
                for i, (state, _reason) in self._tasks(j):
                    code = "3:0" if state == "FAILED" else "0:0"
                    reason = "Dependency" if state == "PENDING" else "None"  # sacct keeps the first reason
                    task = f"{j}_{i}" if self.jobs[j]["array"] else j
                    lines.append(f"{task}|{j}|{state}|{code}|{reason}|{self.jobs[j]['name']}|")
            out = "".join(line + "\n" for line in lines)
        elif name == "scancel":
            self.cancelled.update(a for a in argv[1:] if a != "--")
        elif name == "sacctmgr":
            out = ""
        if check and rc:
            raise CommandError(argv, rc, out, err)
        return CommandResult(tuple(argv), rc, out, err, 0.0)

    def _failed(self, job_id: str) -> bool:
        return bool(self.failing.get(job_id))

    def _tasks(self, job_id: str) -> list[tuple[int, tuple[str, str]]]:
        d = self.jobs.get(job_id)
        if d is None:
            return []
        upstream = [u for u in re.findall(r"\d+", str(d["dep"]))]
        out = []
        for i in range(int(d["size"])):  # type: ignore[call-overload]
            if job_id in self.cancelled:
                state = ("CANCELLED by 0", "Dependency")
            elif upstream and any(self._failed(u) for u in upstream):
                state = ("PENDING", "DependencyNeverSatisfied")
            elif upstream and any(u in self.running for u in upstream):
                state = ("PENDING", "Dependency")
            elif job_id in self.running:
                state = ("RUNNING", "None")
            else:
                state = ("FAILED" if i in self.failing.get(job_id, set()) else "COMPLETED", "None")
            out.append((i, state))
        return out

    def sbatch(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] == "sbatch"]
