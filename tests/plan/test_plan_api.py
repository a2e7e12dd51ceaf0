"""``hpcjobs plan`` end to end against the hpctest site, with the scheduler seam answering recorded real output."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import hpcjobs.plan.api
import hpcjobs.process
from hpcjobs.cli import main
from hpcjobs.errors import ConfigError
from hpcjobs.plan.api import plan_experiment, with_partition
from hpcjobs.process import CommandResult

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "plan"
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")
PBS_SITE = str(ROOT / "tests" / "sites" / "openpbs-testbed.yaml")
HELLO = str(ROOT / "examples" / "hello.yaml")
NOW = datetime(2026, 12, 4, 15, 8, 30, tzinfo=timezone.utc)  # the captures were made at 15:08


class FakeScheduler:
    """Answers ``sbatch --test-only`` per partition and ``qstat -Q`` with recorded files; records every argv."""

    def __init__(self, answers: dict[str, tuple[str, int]], qstat: str | None = None) -> None:
        self.answers, self.qstat, self.calls = answers, qstat, []  # type: ignore[var-annotated]

    def __call__(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        argv = [os.fspath(a) for a in argv]
        self.calls.append(argv)
        if argv[0] == "sbatch":
            assert "--test-only" in argv and kwargs.get("env", {}).get("TZ") == "UTC"  # type: ignore[union-attr]
            script = Path(argv[-1]).read_text()
            part = next(a.split("=", 1)[1] for a in argv if a.startswith("--partition="))
            assert f"#SBATCH --partition={part}" in script  # the script rendered for that partition
            name, rc = self.answers[part]
            return CommandResult(tuple(argv), rc, "", (DATA / name).read_text(), 0.1)
        if argv[0] == "sacct":  # no history
            return CommandResult(tuple(argv), 0, "", "", 0.1)
        if argv[0].endswith("qstat") and self.qstat is not None:
            return CommandResult(tuple(argv), 0, self.qstat, "", 0.1)
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeScheduler:
    f = FakeScheduler({"debug": ("sbatch_test_only_busy_debug.txt", 0), "gpu": ("sbatch_test_only_idle_gpu.txt", 0)})
    monkeypatch.setattr(hpcjobs.process, "run_command", f)
    return f


def test_each_partition_gets_slurms_estimate_and_the_earliest_is_recommended(fake: FakeScheduler) -> None:
    plan = plan_experiment(HELLO, site=SITE, days=0, now=NOW)
    debug, gpu = plan.rows
    assert (debug.partition, debug.fits, debug.start) == ("debug", True, datetime(2026, 12, 4, 15, 38, 40,
                                                                                  tzinfo=timezone.utc))
    assert (gpu.partition, gpu.fits, gpu.start, gpu.start_nodes) == ("gpu", True, datetime(2026, 12, 4, 15, 8, 36,
                                                                                            tzinfo=timezone.utc), "vm")
    assert plan.recommended is gpu
    assert plan.reason == "expected to start now (sbatch --test-only), the earliest of 2 partitions where it fits"
    # 1 CPU for the 5 minutes of examples/hello.yaml; no TRESBillingWeights: billed as its CPUs
    assert (debug.core_hours, debug.gpu_hours, debug.billing_hours, debug.billing_known) == (
        pytest.approx(1 / 12), 0, pytest.approx(1 / 12), False)
    assert len(fake.calls) == 2


def test_a_partition_whose_limits_refuse_the_request_is_not_asked(fake: FakeScheduler) -> None:
    plan = plan_experiment(HELLO, site=SITE, overrides=("resources.gpus_per_node=1",), days=0, now=NOW)
    debug, gpu = plan.rows
    assert not debug.fits and debug.why_not == ("1 GPUs per node requested, the limit is 0",)
    assert gpu.fits and plan.recommended is gpu
    assert [c for c in fake.calls if "--partition=debug" in c] == []


def test_slurms_refusal_means_it_does_not_fit(fake: FakeScheduler) -> None:
    fake.answers["gpu"] = ("sbatch_test_only_bad_node_config.txt", 1)
    plan = plan_experiment(HELLO, site=SITE, days=0, now=NOW)
    assert plan.rows[1].fits is False
    assert plan.rows[1].why_not == ("Slurm: Requested node configuration is not available",)
    assert plan.recommended is plan.rows[0]


def test_nothing_fits_is_an_error_for_auto_and_a_plan_without_recommendation(fake: FakeScheduler) -> None:
    plan = plan_experiment(HELLO, site=SITE, overrides=("resources.walltime=3h",), days=0, now=NOW)
    assert plan.recommended is None and not any(r.fits for r in plan.rows)
    assert "wall time 03:00:00 requested, the limit is 01:00:00" in plan.reason
    with pytest.raises(ConfigError, match="--partition auto: the request fits no partition"):
        with_partition(HELLO, "auto", site=SITE, overrides=("resources.walltime=3h",))


def test_partition_option_becomes_an_override(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(Path(os.environ["XDG_CONFIG_HOME"]) / "c"))
    assert with_partition(HELLO, None, site=SITE, overrides=("a=1",)) == (("a=1",), None)
    assert with_partition(HELLO, "debug", site=SITE) == (("partition=debug",), None)
    import hpcjobs.plan.api as api

    monkeypatch.setattr(api, "DEFAULT_DAYS", 0)
    monkeypatch.setattr(api, "choose_partition", lambda *a, **k: ("gpu", None, "expected to start now"))
    overrides, line = with_partition(HELLO, "auto", site=SITE, overrides=("x=1",))
    assert overrides == ("x=1", "partition=gpu") and line == "--partition auto: gpu: expected to start now"


def test_qos_rows_when_the_site_lists_qos_limits(fake: FakeScheduler, tmp_path: Path) -> None:
    site = tmp_path / "qsite.yaml"
    text = Path(SITE).read_text() + ("qos_limits:\n  normal: {max_walltime: '01:00:00'}\n"
                                     "  short: {max_walltime: '00:02:00'}\n")
    site.write_text(text.replace("name: hpctest", "name: qsite"))
    plan = plan_experiment(HELLO, site=str(site), days=0, now=NOW)
    assert [r.label for r in plan.rows] == ["debug/normal", "debug/short", "gpu/normal", "gpu/short"]
    short = plan.rows[1]
    assert not short.fits and "QOS 'short' of site 'qsite' allows at most 00:02:00" in short.why_not[0]
    assert any("--qos=normal" in c for c in fake.calls) and not any("--qos=short" in c for c in fake.calls)
    assert plan.recommended is not None and plan.recommended.label == "gpu/normal"


def test_billing_weights_of_the_site_file(fake: FakeScheduler, tmp_path: Path) -> None:
    site = tmp_path / "bsite.yaml"
    text = Path(SITE).read_text().replace("    gpus_per_node: 2\n", "    gpus_per_node: 2\n"
                                          "    tres_billing_weights: CPU=2.0,Mem=1G,GRES/gpu=10\n")
    site.write_text(text.replace("name: hpctest", "name: bsite"))
    plan = plan_experiment(HELLO, site=str(site), days=0, now=NOW)
    gpu = plan.rows[1]
    # 1 CPU x 2 + 0.5 GB x 1 per hour, for 5 minutes
    assert gpu.billing_known and gpu.billing_hours == pytest.approx(2.5 / 12)


def test_history_wait_fills_the_rows(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pandas as pd

    import hpcjobs.plan.history as h

    hist = pd.DataFrame({"partition": pd.Categorical(["debug"] * 4 + ["gpu"]), "gpus": [0] * 5, "nodes": [1] * 5,
                         "limit_s": [300.0] * 5, "wait_s": [10.0, 20.0, 30.0, 40.0, 600.0]})
    monkeypatch.setattr(h, "load_history", lambda days, fetch, **kw: hist)
    fake.answers["debug"] = ("sbatch_test_only_idle_debug.txt", 0)
    plan = plan_experiment(HELLO, site=SITE, days=7, now=NOW, cache_dir=tmp_path)
    debug, gpu = plan.rows
    assert (debug.wait_jobs, debug.wait_p50_s, gpu.wait_jobs, gpu.wait_p50_s) == (4, 25.0, 1, 600.0)
    assert plan.recommended is debug and plan.history_jobs == 5
    assert plan.reason.endswith("(tied with gpu); median wait of 4 similar jobs 25s (next best 10m)")


@pytest.mark.usefixtures("pbs_clients_stubbed")
def test_pbs_rows_show_the_queue_state(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = (DATA / "openpbs-23.06_qstat-Q-f-F-json_busy.json").read_text()
    f = FakeScheduler({}, qstat=busy)
    monkeypatch.setattr(hpcjobs.process, "run_command", f)
    plan = plan_experiment(HELLO, site=PBS_SITE, days=0, now=NOW)
    (row,) = plan.rows
    assert (row.partition, row.fits, row.queue_state, row.queued, row.running) == ("workq", True, "enabled, started",
                                                                                    1, 1)
    assert plan.recommended is row
    f.qstat = busy.replace('"enabled":\t"True"', '"enabled":\t"False"')
    plan = plan_experiment(HELLO, site=PBS_SITE, days=0, now=NOW)
    assert plan.recommended is None and plan.rows[0].why_not == ("queue workq is disabled, started",)


class _AtCaptureTime(datetime):
    """``datetime`` whose ``now`` is the time the recorded answers were captured (the CLI reads the clock)."""

    @classmethod
    def now(cls, tz: Any = None) -> _AtCaptureTime:  # type: ignore[override]
        return cls.fromtimestamp(NOW.timestamp(), tz)


def test_cli_json_and_table(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hpcjobs.plan.api, "datetime", _AtCaptureTime)
    runner = CliRunner()
    result = runner.invoke(main, ["plan", HELLO, "--site", SITE, "--days", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output[result.output.index("{"):])
    assert doc["recommended"] == {"partition": "gpu", "qos": None}
    assert [r["partition"] for r in doc["rows"]] == ["debug", "gpu"]
    assert doc["rows"][0]["expected_start"].startswith("2026-12-04T15:38:40")
    result = runner.invoke(main, ["plan", HELLO, "--site", SITE, "--days", "0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "recommended: gpu" in result.output and "2026-12-04 15:38:40 on vm" in result.output


def test_bad_input_exits_2(fake: FakeScheduler, tmp_path: Path) -> None:
    local = tmp_path / "x.yaml"
    local.write_text("name: x\ncommand: 'true'\n")
    result = CliRunner().invoke(main, ["plan", str(local), "--site", "local", "--days", "0"])
    assert result.exit_code == 2 and "no partitions or queues" in result.output


def test_sweep_partition_option_reaches_the_script(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sweep", HELLO, "x=1,2", "--site", SITE, "--root", str(tmp_path), "--dry-run",
                                       "--show-script", "--partition", "gpu"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --partition=gpu" in result.output


def test_plan_without_history_imports_no_pandas_and_runs_sbatch_from_path(tmp_path: Path) -> None:
    """The command in a fresh interpreter, with a stand-in ``sbatch`` on PATH printing a recorded answer."""
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text(f"#!/bin/sh\ncat {DATA / 'sbatch_test_only_busy_gpu.txt'} >&2\n")
    fake.chmod(0o755)
    code = ("import sys\nfrom hpcjobs.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
            "print('PANDAS', 'pandas' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-c", code, "plan", HELLO, "--site", SITE, "--days", "0", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("PANDAS False"), proc.stdout
    doc = json.loads(proc.stdout[:proc.stdout.rindex("PANDAS")])
    assert [r["expected_start"] for r in doc["rows"]] == ["2026-12-04T15:38:40+00:00"] * 2
