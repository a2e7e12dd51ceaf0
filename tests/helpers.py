"""Helpers many test files share: run the CLI in-process or as a subprocess, and render a spec.

Import them by name (``from helpers import invoke``); ``tests/`` is on pytest's ``pythonpath``.
A helper that a single file needs stays in that file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner

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
