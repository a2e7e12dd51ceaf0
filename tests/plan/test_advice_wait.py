"""Queue wait of the request ``advise`` proposes vs the one the runs made: synthetic history in the accounting
schema, and ``hpcjobs advise`` with the history faked at the process seam and at ``load_history``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import hpcjobs.process
from hpcjobs.accounting.schema import conform
from hpcjobs.cli import main
from hpcjobs.plan.advice_wait import (
    MIN_SIMILAR_JOBS,
    WALLTIME_CLASSES,
    advice_wait,
    compare_wait,
    duration_text,
    walltime_class,
)
from hpcjobs.plan.history import compact_history
from hpcjobs.process import CommandResult

T0 = pd.Timestamp("2026-12-01T10:00:00Z")
CAPTURE = str(Path(__file__).resolve().parents[1] / "data" / "slurm" / "testbed" / "sacct_rightsize_sweep.txt")


def jobs(spec: Sequence[tuple[str, int, int, float, float, int]]) -> pd.DataFrame:
    """Job rows in the accounting schema from (partition, gpus, nodes, limit minutes, wait minutes, how many)."""
    rows: dict[str, list[object]] = {k: [] for k in ("job_id", "partition", "gpus", "nodes", "time_limit", "wait",
                                             "start_time", "state")}
    for partition, gpus, nodes, limit, wait, count in spec:
        for _ in range(count):
            rows["job_id"].append(str(len(rows["job_id"])))
            rows["partition"].append(partition)
            rows["gpus"].append(gpus)
            rows["nodes"].append(nodes)
            rows["time_limit"].append(pd.Timedelta(minutes=limit))
            rows["wait"].append(pd.Timedelta(minutes=wait))
            rows["start_time"].append(T0)
            rows["state"].append("COMPLETED")
    df = pd.DataFrame(rows)
    df["start_time"] = pd.to_datetime(df["start_time"], utc=True)
    return conform(df)


def history(spec: Sequence[tuple[str, int, int, float, float, int]]) -> pd.DataFrame:
    return compact_history(jobs(spec))


def test_walltime_classes() -> None:
    assert walltime_class(None) is None and walltime_class(0) is None
    assert [walltime_class(s) for s in (60, 900, 901, 3600, 4 * 3600, 5 * 3600, 86400, 2 * 86400, 7 * 86400)] == [
        "<=15m", "<=15m", "15m-1h", "15m-1h", "1h-4h", "4h-12h", "12h-1d", "1d-3d", ">3d"]
    assert [label for _bound, label in WALLTIME_CLASSES][-1] == ">3d"
    assert (duration_text(None), duration_text(25), duration_text(-720), duration_text(3900),
            duration_text(2 * 86400 + 3 * 3600)) == ("-", "25s", "-12m", "1h05m", "2d03h")


def test_enough_similar_jobs_gives_median_p90_and_the_difference() -> None:
    hist = history([("gpu", 4, 1, 240, 120, 10),    # 4 h jobs: 2 h wait
                    ("gpu", 4, 1, 60, 10, 10),      # 1 h jobs: 10 min wait
                    ("gpu", 8, 1, 60, 999, 5),      # other GPU count
                    ("gpu", 4, 2, 60, 999, 5),      # other node count
                    ("cpu", 4, 1, 60, 999, 5)])     # other partition
    c = compare_wait(hist, partition="gpu", nodes=1, asked_walltime_s=4 * 3600, asked_gpus=4,
                     proposed_walltime_s=3600, days=14)
    assert c.asked is not None and c.proposed is not None
    assert (c.asked.similar.jobs, c.asked.similar.p50_s, c.asked.similar.p90_s) == (10, 7200.0, 7200.0)
    assert (c.proposed.similar.jobs, c.proposed.similar.p50_s) == (10, 600.0)
    assert c.difference() == -6600.0 and c.difference("similar", "p90_s") == -6600.0
    assert c.note == ("median wait of similar jobs on gpu in the last 14 days: 2h00m asked, 10m proposed "
                      "(1h50m less; 10 and 10 jobs)")
    d = c.as_dict()
    assert (d["wait_asked_p50_s"], d["wait_proposed_p50_s"], d["wait_diff_p50_s"], d["wait_asked_jobs"],
            d["wait_proposed_jobs"]) == (7200.0, 600.0, -6600.0, 10, 10)
    assert (d["class_asked"], d["class_proposed"], d["gpus_asked"], d["nodes_proposed"]) == ("1h-4h", "15m-1h", 4, 1)
    json.dumps(d)


def test_too_few_similar_jobs_gives_the_count_and_no_figure() -> None:
    hist = history([("gpu", 1, 1, 240, 120, 10), ("gpu", 1, 1, 60, 10, MIN_SIMILAR_JOBS - 2)])
    c = compare_wait(hist, partition="gpu", nodes=1, asked_walltime_s=4 * 3600, asked_gpus=1,
                     proposed_walltime_s=3600, days=7)
    assert c.asked is not None and c.proposed is not None
    assert c.asked.similar.p50_s == 7200.0
    assert (c.proposed.similar.jobs, c.proposed.similar.p50_s, c.proposed.similar.p90_s) == (3, None, None)
    assert c.difference() is None and c.as_dict()["wait_proposed_p50_s"] is None
    assert c.note.startswith("too few similar jobs on gpu in the last 7 days to estimate the wait of the proposed "
                             "request (asked 10, proposed 3 found, 5 needed)")
    # none at all on the partition: no figure on either side
    empty = compare_wait(hist, partition="other", nodes=1, asked_walltime_s=3600, asked_gpus=1,
                         proposed_walltime_s=1800)
    assert empty.asked is not None and empty.asked.similar.jobs == 0 and empty.asked.similar.p50_s is None
    assert "asked and proposed request" in empty.note
    # an empty history (nothing started in the window)
    none = compare_wait(compact_history(jobs([])), partition="gpu", nodes=1, asked_walltime_s=3600, asked_gpus=0,
                        proposed_walltime_s=600)
    assert none.asked is not None and none.asked.in_class.jobs == 0 and none.difference("in_class") is None


def test_a_shorter_walltime_class_waits_less() -> None:
    # backfill: the shorter the limit, the shorter the wait; classes take all jobs of that class
    hist = history([("p", 0, 1, 20, 1, 6), ("p", 0, 1, 50, 3, 6),          # 15m-1h: 1-3 min
                    ("p", 0, 1, 180, 30, 6), ("p", 0, 1, 100, 50, 6)])     # 1h-4h: 30-50 min
    c = compare_wait(hist, partition="p", nodes=1, asked_walltime_s=3 * 3600, asked_gpus=0,
                     proposed_walltime_s=40 * 60)
    assert c.asked is not None and c.proposed is not None
    assert (c.asked.walltime_class, c.asked.in_class.jobs) == ("1h-4h", 12)
    assert (c.proposed.walltime_class, c.proposed.in_class.jobs) == ("15m-1h", 12)
    assert c.proposed.in_class.p50_s == 120.0 and c.asked.in_class.p50_s == 40 * 60.0
    diff = c.difference("in_class")
    assert diff is not None and diff < 0
    assert c.as_dict()["class_diff_p50_s"] == diff


def test_no_proposal_and_unknown_partition() -> None:
    hist = history([("p", 0, 1, 60, 5, 6)])
    c = compare_wait(hist, partition="p", nodes=1, asked_walltime_s=3600, asked_gpus=0, proposed_walltime_s=None)
    assert c.proposed is None and c.note == "no proposal; median wait of 6 similar jobs on p: 5m"
    assert compare_wait(hist, partition=None, nodes=1, asked_walltime_s=3600, asked_gpus=0,
                        proposed_walltime_s=60).asked is None


def test_advice_wait_reads_the_history_of_the_runs_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    import hpcjobs.plan.history as h
    from hpcjobs.accounting.report_source import read_saved
    from hpcjobs.accounting.reports.advise import AdviceSettings, advise

    runs = read_saved(CAPTURE)
    advice = advise(runs, AdviceSettings(min_runs=4))
    seen: list[int] = []

    def load(days: int, fetch: object, **kw: object) -> pd.DataFrame:
        seen.append(days)
        return history([("debug", 0, 1, 4, 10, 10), ("debug", 0, 1, 0.5, 0.2, 10)])

    monkeypatch.setattr(h, "load_history", load)
    c = advice_wait(advice, runs, days=3, now=datetime(2026, 12, 4, 16, tzinfo=timezone.utc))
    assert seen == [3] and c.partition == "debug" and c.error is None
    assert c.asked is not None and c.proposed is not None
    assert (c.asked.walltime_s, c.proposed.walltime_s, c.asked.gpus, c.asked.nodes) == (120, 60, 0, 1)
    assert (c.asked.similar.p50_s, c.proposed.similar.p50_s) == (600.0, 12.0)
    # a scheduler with no live history: said, not raised
    torque = advice_wait(replace(advice, scheduler="torque"), runs, days=3)
    assert torque.asked is None and torque.error and "torque" in torque.note


class FakeSacct:
    """The process seam: ``sacct`` answers no rows (a quiet cluster); anything else fails the test."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        argv = [os.fspath(a) for a in argv]
        self.calls.append(argv)
        assert argv[0] == "sacct", argv
        return CommandResult(tuple(argv), 0, "", "", 0.1)


def test_cli_advise_shows_the_wait_and_json_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    import hpcjobs.plan.history as h

    monkeypatch.setattr(h, "load_history", lambda days, fetch, **kw: history(
        [("debug", 0, 1, 4, 10, 10), ("debug", 0, 1, 0.5, 0.2, 10)]))
    base = ["advise", "--from-file", CAPTURE, "--min-runs", "4", "--days", "7"]
    r = CliRunner().invoke(main, [*base, "--json"])
    assert r.exit_code == 0, r.output
    w = json.loads(r.output)["queue_wait"]
    assert (w["partition"], w["days"], w["wait_asked_jobs"], w["wait_asked_p50_s"], w["wait_proposed_p50_s"],
            w["wait_diff_p50_s"]) == ("debug", 7, 10, 600.0, 12.0, -588.0)
    text = CliRunner().invoke(main, base)
    assert text.exit_code == 0, text.output
    assert "queue wait on debug" in text.output and "change" in text.output
    assert "10m asked, 12s proposed (9m less; 10 and 10 jobs)" in text.output


def test_cli_advise_history_through_the_process_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSacct()
    monkeypatch.setattr(hpcjobs.process, "run_command", fake)
    r = CliRunner().invoke(main, ["advise", "--from-file", CAPTURE, "--min-runs", "4", "--days", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert 1 <= len(fake.calls) <= 2 and all("--allusers" in c for c in fake.calls)  # one window per day
    w = json.loads(r.output)["queue_wait"]
    assert w["error"] is None and w["wait_asked_jobs"] == 0 and w["wait_asked_p50_s"] is None
    assert w["note"].startswith("too few similar jobs on debug in the last 2 days")


def test_cli_no_history_and_from_file_alone_query_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSacct()
    monkeypatch.setattr(hpcjobs.process, "run_command", fake)
    r = CliRunner().invoke(main, ["advise", "--from-file", CAPTURE, "--min-runs", "4", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["queue_wait"] is None
    r = CliRunner().invoke(main, ["advise", "--from-file", CAPTURE, "--days", "3", "--no-history"])
    assert r.exit_code == 0 and "queue wait" not in r.output
    assert fake.calls == []


@pytest.mark.usefixtures("pbs_clients_stubbed")
def test_pbs_history_from_recorded_qstat_x(monkeypatch: pytest.MonkeyPatch) -> None:
    """PBS Pro: ``qstat -x -f -F json`` through the process seam; real OpenPBS 23.06 output (eth-cscs/firecrest-v2,
    BSD-3-Clause, see tests/data/SOURCES.md): three 5-minute jobs on ``workq`` that started at once."""
    qstat = (Path(__file__).resolve().parents[1] / "data" / "pbs"
             / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json").read_text()
    calls: list[list[str]] = []

    def run(argv: Sequence[str], **kwargs: object) -> CommandResult:
        calls.append([os.fspath(a) for a in argv])
        assert calls[-1][0].endswith("qstat") and "-x" in calls[-1], calls[-1]
        return CommandResult(tuple(calls[-1]), 0, qstat, "", 0.1)

    monkeypatch.setattr(hpcjobs.process, "run_command", run)
    from hpcjobs.plan.advice_wait import load_wait_history

    hist = load_wait_history("pbspro", 7, now=datetime(2025, 6, 20, tzinfo=timezone.utc))
    assert len(calls) == 1 and len(hist) == 3
    few = compare_wait(hist, partition="workq", nodes=1, asked_walltime_s=600, asked_gpus=0, proposed_walltime_s=300)
    assert few.proposed is not None and (few.proposed.similar.jobs, few.proposed.similar.p50_s) == (3, None)
    three = compare_wait(hist, partition="workq", nodes=1, asked_walltime_s=600, asked_gpus=0,
                         proposed_walltime_s=300, min_jobs=3)
    assert three.proposed is not None and three.proposed.similar.p50_s == 0.0 and three.difference() == 0.0
