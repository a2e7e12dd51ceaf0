"""The answer of ``sbatch --test-only``, read from what Slurm 22.05 really wrote (tests/data/plan/)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpcjobs.schedulers.slurm.estimate import parse_will_run, will_run_argv

DATA = Path(__file__).resolve().parents[1] / "data" / "plan"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_idle_node_starts_now_on_the_node_and_partition_slurm_names() -> None:
    est = parse_will_run(_read("sbatch_test_only_idle_debug.txt"), 0)
    assert est.start == datetime(2026, 12, 4, 15, 8, 36, tzinfo=timezone.utc)
    assert (est.processors, est.nodes, est.partition, est.error) == (1, "vm", "debug", None)


@pytest.mark.parametrize(("name", "partition"), [("sbatch_test_only_busy_debug.txt", "debug"),
                                                  ("sbatch_test_only_busy_gpu.txt", "gpu")])
def test_full_node_gives_the_end_of_the_running_job(name: str, partition: str) -> None:
    # a 30-minute job of 8 CPUs started at 15:08:40 held the node: the estimate is its time limit's end
    est = parse_will_run(_read(name), 0)
    assert est.start == datetime(2026, 12, 4, 15, 38, 40, tzinfo=timezone.utc)
    assert est.partition == partition and est.nodes == "vm" and est.processors == 1


@pytest.mark.parametrize(("name", "error"), [
    ("sbatch_test_only_bad_node_config.txt", "Requested node configuration is not available"),
    ("sbatch_test_only_time_limit.txt", "Requested time limit is invalid (missing or exceeds some limit)"),
    ("sbatch_test_only_bad_qos.txt", "Invalid qos specification"),
    ("sbatch_test_only_too_many_cpus.txt", "More processors requested than permitted"),
    ("sbatch_test_only_bad_partition.txt", "Invalid partition name specified; invalid partition specified: nope"),
])
def test_refusals_carry_slurms_reason(name: str, error: str) -> None:
    est = parse_will_run(_read(name), 1)
    assert est.start is None and est.error == error


def test_unknown_text_is_quoted_not_guessed() -> None:
    est = parse_will_run("sbatch: something new\n", 1)
    assert est.start is None and est.error == "no estimate (exit 1): sbatch: something new"
    assert parse_will_run("", 0).error == "no estimate (exit 0): nothing on stderr"


def test_a_start_line_with_a_failure_exit_is_no_estimate() -> None:
    line = _read("sbatch_test_only_idle_debug.txt")
    assert parse_will_run(line, 1).start is None


def test_argv_overrides_partition_and_qos_of_the_script() -> None:
    assert will_run_argv("/tmp/x.sh", "gpu") == ["sbatch", "--test-only", "--partition=gpu", "/tmp/x.sh"]
    assert will_run_argv("x.sh", "gpu", "high") == ["sbatch", "--test-only", "--partition=gpu", "--qos=high", "x.sh"]
