"""Scheduler limits are asked once per TTL per user and cluster, with a short timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import CommandTimeout
from hpcjobs.process import CommandResult
from hpcjobs.schedulers import limits_cache
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend

DATA = Path(__file__).resolve().parent.parent / "data" / "slurm" / "testbed"


@pytest.fixture
def seam(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, float]]:
    """A fake scheduler answering scontrol/sacctmgr; records (command, timeout) of each call."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hpctest\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    calls: list[tuple[str, float]] = []
    config = (DATA / "scontrol_show_config.txt").read_text()

    def fake(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        calls.append((argv[0], timeout))
        out = config if argv[0] == "scontrol" else "hpctest|hpcjobs||77|\n"
        return CommandResult(tuple(argv), 0, out, "", 0.01)

    monkeypatch.setattr(process, "run_command", fake)
    return calls


def test_second_query_comes_from_the_cache(seam) -> None:
    first = SchedulerClient(get_backend("slurm")).limits(user="alice")
    second = SchedulerClient(get_backend("slurm")).limits(user="alice")
    assert first == second and first.max_array_size == 101 and first.max_submit_jobs == 77
    assert [c for c, _ in seam] == ["scontrol", "sacctmgr", "sacctmgr"]  # associations and QOS, asked once
    assert all(t == limits_cache.DEFAULT_QUERY_TIMEOUT_S for _, t in seam)
    SchedulerClient(get_backend("slurm")).limits(user="bob")  # another user: asked again
    assert [c for c, _ in seam].count("scontrol") == 2


def test_ttl_zero_turns_the_cache_off_and_stale_entries_expire(seam, monkeypatch) -> None:
    monkeypatch.setenv("HPCJOBS_LIMITS_TTL_S", "0")
    SchedulerClient(get_backend("slurm")).limits(user="alice")
    SchedulerClient(get_backend("slurm")).limits(user="alice")
    assert [c for c, _ in seam].count("scontrol") == 2
    monkeypatch.setenv("HPCJOBS_LIMITS_TTL_S", "3600")
    SchedulerClient(get_backend("slurm")).limits(user="alice")
    (entry,) = limits_cache.cache_dir().iterdir()
    assert entry.stat().st_mode & 0o077 == 0  # the user's own
    entry.write_text(entry.read_text().replace('"fetched_at": ', '"fetched_at": -7200 + '))  # corrupt JSON
    SchedulerClient(get_backend("slurm")).limits(user="alice")  # unreadable entry: asked again
    assert [c for c, _ in seam].count("scontrol") == 4


def test_unknown_cluster_is_not_cached(seam, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))
    SchedulerClient(get_backend("slurm")).limits(user="alice")
    SchedulerClient(get_backend("slurm")).limits(user="alice")
    assert [c for c, _ in seam].count("scontrol") == 2


def test_timeout_is_configurable_and_raised(monkeypatch) -> None:
    monkeypatch.setenv("HPCJOBS_SCHEDULER_TIMEOUT_S", "2.5")
    seen = []

    def hanging(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        seen.append(timeout)
        raise CommandTimeout(argv, None, "", "", reason=f"timed out after {timeout:g} s")

    monkeypatch.setattr(process, "run_command", hanging)
    with pytest.raises(CommandTimeout):
        SchedulerClient(get_backend("slurm")).limits(user="alice")
    assert seen == [2.5]
