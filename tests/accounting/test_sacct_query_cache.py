"""query_sacct windows and the parquet window cache, with run_command faked and calls counted."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

import hpcjobs.process
from hpcjobs.accounting import cache as cache_mod
from hpcjobs.accounting.cache import WindowCache, default_cache_dir, window_key
from hpcjobs.accounting.sources import slurm as acct
from hpcjobs.process import CommandResult

UTC = timezone.utc
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _row(job: str, raw: str, start: str, end: str, state: str = "COMPLETED") -> str:
    values = {"jobid": job, "jobidraw": raw, "jobname": "j", "user": "alice", "state": state, "exitcode": "0:0",
              "submit": start, "eligible": start, "start": start, "end": end, "elapsedraw": "60",
              "timelimit": "01:00:00", "nnodes": "1", "alloccpus": "1", "reqmem": "1G"}
    return "|".join(values.get(f.lower(), "") for f in acct.SACCT_QUERY_FIELDS)


class FakeSacct:
    """Answers each window with the jobs active in it; records every argv."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str]] = []
        self.jobs = [
            ("1", "1", "2026-12-01T10:00:00", "2026-12-01T11:00:00"),
            ("2", "2", "2026-12-01T23:30:00", "2026-12-02T00:30:00"),  # spans midnight: in two windows
            ("3", "3", "2026-12-03T09:00:00", "2026-12-03T10:00:00"),
            ("4", "4", "2026-12-04T11:00:00", "Unknown"),  # running now
        ]

    def __call__(self, argv, *, timeout, env):
        self.calls.append(list(argv))
        self.envs.append(dict(env))
        opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        ws, we = datetime.fromisoformat(opts["starttime"]), datetime.fromisoformat(opts["endtime"])
        lines = []
        for job, raw, s, e in self.jobs:
            s_t = datetime.fromisoformat(s)
            e_t = datetime.fromisoformat(e) if e != "Unknown" else datetime.max
            if s_t < we and e_t >= ws:
                lines.append(_row(job, raw, s, e, "RUNNING" if e == "Unknown" else "COMPLETED"))
        return CommandResult(tuple(argv), 0, "\n".join(lines) + ("\n" if lines else ""), "", 0.01)


def test_windows_cached_only_when_finished(tmp_path: Path) -> None:
    fake = FakeSacct()
    store = WindowCache(tmp_path)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    df = acct.query_sacct(start, NOW, all_users=True, cache=store, now=NOW, runner=fake)
    assert len(fake.calls) == 4  # Dec 1, 2, 3, 4
    assert fake.envs[0] == {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    assert "--starttime=2026-12-01T00:00:00" in fake.calls[0] and "--endtime=2026-12-02T00:00:00" in fake.calls[0]
    assert sorted(df.job_id) == ["1", "2", "3", "4"]  # job 2 once, though two windows returned it
    assert df.set_index("job_id").loc["4", "state"] == "RUNNING"
    assert len(list(tmp_path.glob("*.parquet"))) == 3  # Dec 4 is not finished: not cached
    assert not list(tmp_path.glob("*.tmp"))

    fake2 = FakeSacct()
    df2 = acct.query_sacct(start, NOW, all_users=True, cache=store, now=NOW, runner=fake2)
    assert len(fake2.calls) == 1  # only the unfinished window is asked again
    assert "--starttime=2026-12-04T00:00:00" in fake2.calls[0]
    pd.testing.assert_frame_equal(df.sort_values("job_id").reset_index(drop=True),
                                  df2.sort_values("job_id").reset_index(drop=True))


def test_different_query_shape_is_a_different_key(tmp_path: Path) -> None:
    store = WindowCache(tmp_path)
    start, end = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    fake = FakeSacct()
    acct.query_sacct(start, end, all_users=True, cache=store, now=NOW, runner=fake)
    acct.query_sacct(start, end, users=["bob"], cache=store, now=NOW, runner=fake)
    acct.query_sacct(start, end, all_users=True, cache=store, now=NOW, runner=fake)
    assert len(fake.calls) == 2
    assert window_key(["a"], start, end) != window_key(["b"], start, end)
    assert window_key(["a"], start, end) == window_key(["a"], start, end)


def test_range_filter_and_no_cache(tmp_path: Path) -> None:
    fake = FakeSacct()
    df = acct.query_sacct(datetime(2026, 12, 3, 10, 30), datetime(2026, 12, 3, 12, 0), all_users=True,
                          cache=False, now=NOW, runner=fake)
    assert len(fake.calls) == 1  # the aligned Dec 3 window
    assert list(df.job_id) == []  # job 3 ended at 10:00, before the requested range
    assert not list(tmp_path.iterdir())


def test_monkeypatched_run_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSacct()
    monkeypatch.setattr(hpcjobs.process, "run_command", fake)  # the one seam, patched after the import
    monkeypatch.setenv("HPCJOBS_CACHE_DIR", str(tmp_path))
    start = datetime(2026, 12, 1, tzinfo=UTC)
    acct.query_sacct(start, start + timedelta(days=2), window=timedelta(hours=12), now=NOW)
    assert len(fake.calls) == 4
    assert len(list((tmp_path / "sacct").glob("*.parquet"))) == 4
    acct.query_sacct(start, start + timedelta(days=2), window=timedelta(hours=12), now=NOW)
    assert len(fake.calls) == 4


def test_cache_dir_and_corrupt_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HPCJOBS_CACHE_DIR", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("HPCJOBS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "hpcjobs"
    store = WindowCache(tmp_path / "c")
    store.directory.mkdir()
    store.path("k").write_bytes(b"not parquet")
    assert store.load("k") is None
    assert store.load("missing") is None


def test_atomic_store_leaves_no_temp_on_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = WindowCache(tmp_path)

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache_mod.os, "replace", boom)
    with pytest.raises(OSError):
        store.store("k", acct.read_sacct_parsable2(_row("1", "1", "2026-12-01T10:00:00", "Unknown") + "\n",
                                              acct.SACCT_QUERY_FIELDS))
    assert os.listdir(tmp_path) == []
