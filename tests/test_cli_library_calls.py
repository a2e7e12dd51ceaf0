"""``render`` and ``advise`` are one library call each, and the CLI's scheduler choices come from the registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from helpers import ROOT

from hpcjobs.cli import SchedulerChoice, main
from hpcjobs.plan.advise_run import AdviceRequest
from hpcjobs.render.api import RenderRequest, render_request
from hpcjobs.schedulers.registry import BACKENDS, scheduler_names
from hpcjobs.sweep.prepare import render_packed

ONE = "name: one\nresources: {cpus_per_task: 1, memory: 128M, walltime: 5m}\ncommand: echo hi\n"


def _option_type(path: list[str], option: str) -> Any:
    ctx = click.Context(main)
    command: click.Command | None = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.get_command(ctx, name)
    assert command is not None
    return next(p for p in command.params if p.name == option).type


def test_scheduler_choices_are_the_registry_s() -> None:
    names = scheduler_names()
    assert _option_type(["report"], "scheduler").choices == names
    assert _option_type(["site", "init"], "scheduler").choices == (
        "auto", *(n for n in names if BACKENDS[n].capabilities.discoverable))
    assert _option_type(["advise"], "scheduler").choices == tuple(
        n for n in names if BACKENDS[n].capabilities.usage_accounting)
    assert "local" not in SchedulerChoice().choices  # the local runner is no scheduler


def test_scheduler_choice_converts_and_refuses() -> None:
    choice = SchedulerChoice(lambda caps: caps.discoverable, first=("auto",))
    assert choice.convert("auto", None, None) == "auto"
    assert choice.convert("slurm", None, None) == "slurm"
    with pytest.raises(click.BadParameter, match="kubernetes"):
        choice.convert("kubernetes", None, None)


def test_top_level_help_does_not_import_the_registry() -> None:
    code = ("import sys\nfrom click.testing import CliRunner\nfrom hpcjobs.cli import main\n"
            "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
            "print('hpcjobs.schedulers.registry' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("wait", "from_file", "compares"), [
    ("auto", None, True), ("auto", "sacct.txt", False), ("always", "sacct.txt", True), ("never", None, False)])
def test_advice_request_says_when_queue_waits_are_compared(wait: str, from_file: str | None, compares: bool) -> None:
    assert AdviceRequest(from_file=from_file, wait=wait).compares_wait() is compares  # type: ignore[arg-type]


def test_render_request_prints_or_writes(tmp_path: Path) -> None:
    exp = tmp_path / "one.yaml"
    exp.write_text(ONE)
    printed = render_request(RenderRequest(exp, site="local"), packed=render_packed)
    assert not printed.manifest and printed.written == () and printed.text == printed.rendered.text
    out = tmp_path / "out"
    written = render_request(RenderRequest(exp, site="k8s-testbed", output_dir=out, cwd=tmp_path))
    assert written.manifest and written.text is None
    assert [p.name for p in written.written] == ["one.kubernetes.sh", "one.k8s.yaml"]
    assert (out / "one.kubernetes.sh").read_text() == written.rendered.text
    script = render_request(RenderRequest(exp, site="k8s-testbed", script_only=True, cwd=tmp_path))
    assert script.text == written.rendered.text
    manifest = render_request(RenderRequest(exp, site="k8s-testbed", cwd=tmp_path))
    assert manifest.text == (out / "one.k8s.yaml").read_text()
