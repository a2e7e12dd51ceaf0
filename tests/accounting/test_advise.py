"""Right-sizing advice (hpcjobs.accounting.reports.advise) on synthetic schema frames and on real sacct text."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcjobs.accounting.report_source import read_saved
from hpcjobs.accounting.reports import advise as advise_module
from hpcjobs.accounting.reports.advise import (
    AdviceSettings,
    PartitionLimits,
    advise,
    advise_groups,
    limits_from_site,
    round_memory,
    round_walltime,
)
from hpcjobs.accounting.reports.right_sizing import RIGHT_SIZING_COLUMNS, right_sizing_table
from hpcjobs.accounting.reports.tables import report_tables
from hpcjobs.accounting.schema import conform
from hpcjobs.cli import main
from hpcjobs.config.sites import load_site_file

DATA = Path(__file__).resolve().parent.parent / "data" / "slurm"
SITES = Path(__file__).resolve().parent.parent / "sites"
G = 1024**3
M = 1024**2
#: The --format of the testbed capture testbed-22.05_sacct-steps-parsable2.txt (tests/data/SOURCES.md).
TESTBED_FIELDS = ("JobID,JobIDRaw,JobName,Partition,State,ExitCode,Submit,Start,End,Elapsed,AllocCPUS,ReqMem,"
                  "MaxRSS,TotalCPU,AllocTRES,ReqTRES,Timelimit,NodeList")


_shown = advise_module._shown


def reference_right_sizing(df: pd.DataFrame, settings: AdviceSettings | None = None,
                           groups: int | None = None) -> pd.DataFrame:
    """The right_sizing table written the slow, plain way: advise() per group, the notes of its proposals and raises."""
    rows: list[dict] = []
    noted = 0
    for a in advise_groups(df, settings):
        if groups is not None and noted >= groups:
            break
        before = len(rows)
        base = {"user": a.group["user"], "sweep_or_job": a.group.get("sweep_id") or a.group["job_name"], "runs": a.runs}
        for r in a.resources:
            if r.proposed is not None and r.asked is not None and r.proposed <= r.asked * 0.75:
                rows.append({**base, "resource": r.resource, "asked": _shown(r.resource, r.asked, a.scheduler),
                             "used_max": _shown(r.resource, r.used_max, a.scheduler), "proposed": r.proposed_text,
                             "note": r.note})
        for lr in a.raises:
            rows.append({**base, "resource": lr.resource,
                         "asked": None if lr.asked is None else _shown(lr.resource, lr.asked, a.scheduler),
                         "used_max": None, "proposed": lr.proposed_text, "note": lr.note})
        noted += len(rows) > before
    out = pd.DataFrame(rows, columns=list(RIGHT_SIZING_COLUMNS))
    return out.astype({c: "Int64" if c == "runs" else "string" for c in RIGHT_SIZING_COLUMNS})


def td(seconds: float) -> pd.Timedelta:
    return pd.Timedelta(seconds=seconds)


def frame(n: int, *, rss: list[int] | None = None, elapsed: list[float] | None = None, state: list[str] | None = None,
          req_mem: int = 64 * G, limit: float = 4 * 3600, cpus: int = 16, cpu_time: list[float] | None = None,
          gpus: int = 0, util: list[float] | None = None, nodes: int = 1, sweep: str = "fit-1a2b3c4d",
          user: str = "ana", array: str = "100") -> pd.DataFrame:
    """``n`` job rows of one sweep in the accounting schema."""
    elapsed = elapsed or [1800.0] * n
    return conform(pd.DataFrame({
        "scheduler": ["slurm"] * n, "job_id": [f"{array}_{i}" for i in range(n)], "job_name": ["fit"] * n,
        "user": [user] * n, "partition": ["debug"] * n, "state": state or ["COMPLETED"] * n,
        "elapsed": [td(e) for e in elapsed], "time_limit": [td(limit)] * n, "nodes": [nodes] * n,
        "cpus": [cpus] * n, "gpus": [gpus] * n, "req_mem_bytes": [req_mem] * n,
        "max_rss_bytes": rss or [6 * G] * n, "mem_used_bytes": rss or [6 * G] * n,
        "cpu_time": [td(c) for c in (cpu_time or [e * 2 for e in elapsed])],
        "gpu_utilization": util or [None] * n, "sweep_id": [sweep] * n,
    }))


# ---------------------------------------------------------------------------- rounding


@pytest.mark.parametrize(("nbytes", "rounded"), [
    (1, 128 * M), (128 * M, 128 * M), (129 * M, 256 * M), (2 * G - 1, 2 * G), (2 * G + 1, 3 * G), (int(7.2 * G), 8 * G),
])
def test_round_memory(nbytes, rounded):
    assert round_memory(nbytes) == rounded


@pytest.mark.parametrize(("seconds", "rounded"), [(0.5, 60), (60, 60), (61, 120), (2160, 2160), (2161, 2220)])
def test_round_walltime(seconds, rounded):
    assert round_walltime(seconds) == rounded


@given(st.floats(min_value=1, max_value=2**50))
@settings(max_examples=200)
def test_rounding_never_goes_down(x):
    assert round_memory(x) >= x and round_walltime(x) >= x


# ---------------------------------------------------------------------------- proposals


def test_quantile_plus_margin_rounded():
    # 40 runs: 1 GiB ... 6 GiB peak; p95 of a linear ramp, + 20 %, rounded up to whole GiB
    rss = [int(G + i * (5 * G) / 39) for i in range(40)]
    a = advise(frame(40, rss=rss, elapsed=[600 + 30 * i for i in range(40)]))
    assert a.enough and a.runs == 40 and a.completed == 40
    mem = next(r for r in a.resources if r.resource == "memory")
    q95 = pd.Series(rss).quantile(0.95)
    assert mem.used_quantile == pytest.approx(q95)
    assert mem.proposed == round_memory(q95 * 1.2) == 7 * G
    assert mem.proposed_text == "7G"
    assert mem.note == "asked 64G, used at most 6G in 40 of 40 runs: ask 7G"
    wall = next(r for r in a.resources if r.resource == "walltime")
    assert wall.proposed == round_walltime(pd.Series([600 + 30 * i for i in range(40)]).quantile(0.95) * 1.2)
    assert wall.proposed_text == "00:35:00"  # p95 1711.5 s × 1.2 = 2053.8 s
    cpus = next(r for r in a.resources if r.resource == "cpus")
    assert cpus.used_max == pytest.approx(2.0) and cpus.proposed == 3  # 2 busy CPUs × 1.2 → 3 of 16
    assert not any(r.resource == "gpus" for r in a.resources)  # no GPU utilisation recorded


def test_quantile_and_margin_are_settings():
    rss = [G * (i + 1) for i in range(10)]  # 1..10 GiB
    a = advise(frame(10, rss=rss), AdviceSettings(quantile=0.5, margin=0.0))
    assert a.proposed("memory") == round_memory(pd.Series(rss).quantile(0.5)) == 6 * G
    b = advise(frame(10, rss=rss), AdviceSettings(quantile=1.0, margin=0.5))
    assert b.proposed("memory") == 15 * G


def test_never_more_than_asked_for_runs_that_completed():
    a = advise(frame(10, rss=[int(7.9 * G)] * 10, req_mem=8 * G, elapsed=[3500] * 10, limit=3600,
                     cpu_time=[3500 * 16] * 10))
    assert a.proposed("memory") == 8 * G and a.proposed("walltime") == 3600 and a.proposed("cpus") == 16


def test_clamped_to_partition_limits():
    limits = PartitionLimits("small", max_walltime=1800, memory_per_node=4 * G, cpus_per_node=2)
    a = advise(frame(10, rss=[6 * G] * 10, elapsed=[3000] * 10, cpu_time=[3000 * 4] * 10), limits=limits)
    mem = next(r for r in a.resources if r.resource == "memory")
    assert mem.proposed == 4 * G and mem.limited_by == "partition small memory_per_node"
    assert a.proposed("walltime") == 1800 and a.proposed("cpus") == 2
    assert "(partition small memory_per_node)" in mem.note


def test_memory_per_node_for_multi_node_jobs():
    a = advise(frame(10, rss=[8 * G] * 10, req_mem=64 * G, nodes=2))  # 8 GiB used over 2 nodes: 4 GiB each
    mem = next(r for r in a.resources if r.resource == "memory")
    assert mem.asked == 32 * G and mem.used_max == 4 * G and mem.proposed == 5 * G


def test_gpus_when_utilisation_is_known():
    a = advise(frame(10, gpus=4, util=[0.3] * 10))  # 1.2 GPUs busy, + 20 % → 2 of 4
    assert a.proposed("gpus") == 2
    assert a.savings["gpu_hours_asked"] == pytest.approx(10 * 4 * 4)
    assert a.savings["gpu_hours_proposed"] == pytest.approx(10 * 2 * 2160 / 3600)


def test_savings_core_hours_requested_vs_proposed():
    a = advise(frame(10, elapsed=[1800] * 10, cpu_time=[1800] * 10))  # 1 busy CPU of 16, 30 min of 4 h
    assert a.savings["core_hours_asked"] == pytest.approx(10 * 16 * 4)
    assert a.savings["core_hours_proposed"] == pytest.approx(10 * 2 * 2160 / 3600)
    assert a.savings["memory_asked_bytes"] == 64 * G and a.savings["memory_used_bytes"] == 6 * G


# ---------------------------------------------------------------------------- too few runs, limits hit


def test_too_few_runs_gives_no_proposal_and_says_how_many():
    a = advise(frame(3))
    assert not a.enough and a.completed == 3
    assert all(r.proposed is None for r in a.resources)
    assert a.message == "too few runs to advise: 3 completed of 3 finished, 5 needed"
    assert "5 needed" in a.resources[0].note
    assert advise(frame(3), AdviceSettings(min_runs=3)).enough


def test_only_completed_runs_are_the_basis():
    states = ["COMPLETED"] * 5 + ["FAILED"] * 3 + ["CANCELLED"] * 2
    a = advise(frame(10, state=states, rss=[G] * 5 + [50 * G] * 5))
    assert a.runs == 10 and a.completed == 5
    assert a.proposed("memory") == round_memory(1.2 * G)


def test_timeout_raise_is_request_times_factor_or_history():
    states = ["COMPLETED"] * 5 + ["TIMEOUT"] * 2
    a = advise(frame(7, state=states, elapsed=[600] * 5 + [3600] * 2, limit=3600))
    lr = a.raise_for("walltime")
    assert lr is not None and lr.jobs == ("100_5", "100_6") and lr.asked == 3600
    assert lr.proposed == 5400 and lr.proposed_text == "01:30:00" and not lr.blocked
    assert lr.note == "2 runs hit the wall-time limit (asked 01:00:00): ask 01:30:00"
    # the longest completed run + margin wins when it is longer
    b = advise(frame(7, state=states, elapsed=[3000] * 4 + [5000] + [1800] * 2, limit=1800))
    assert b.raise_for("walltime").proposed == round_walltime(5000 * 1.2)


def test_timeout_raise_within_and_blocked_by_the_limit():
    states = ["TIMEOUT"] * 2
    a = advise(frame(2, state=states, elapsed=[3600] * 2, limit=3600),
               limits=PartitionLimits("debug", max_walltime=4000))
    lr = a.raise_for("walltime")
    assert lr.proposed == 4000 and "partition debug max_walltime" in lr.note and not lr.blocked
    b = advise(frame(2, state=states, elapsed=[3600] * 2, limit=3600),
               limits=PartitionLimits("debug", max_walltime=3600))
    lr = b.raise_for("walltime")
    assert lr.blocked and lr.proposed is None and "blocks any raise" in lr.note
    assert not b.enough  # no completed run: no proposal, but the raise is given


def test_oom_raise():
    states = ["COMPLETED"] * 5 + ["OUT_OF_MEMORY"]
    a = advise(frame(6, state=states, rss=[3 * G] * 5 + [4 * G], req_mem=4 * G))
    lr = a.raise_for("memory")
    assert lr.state == "OUT_OF_MEMORY" and lr.proposed == 6 * G and lr.proposed_text == "6G"
    blocked = advise(frame(1, state=["OUT_OF_MEMORY"], req_mem=8 * G),
                     limits=PartitionLimits("p", memory_per_node=8 * G))
    assert blocked.raise_for("memory").blocked


def test_step_rows_do_not_count_as_runs():
    df = frame(5)
    steps = df.assign(step="batch", max_rss_bytes=9 * G)
    a = advise(pd.concat([df.assign(max_rss_bytes=pd.NA, mem_used_bytes=pd.NA), steps], ignore_index=True))
    assert a.runs == 5 and next(r for r in a.resources if r.resource == "memory").used_max == 9 * G


def test_settings_are_checked():
    for bad in ({"quantile": 0}, {"quantile": 1.5}, {"margin": -0.1}, {"min_runs": 0}, {"raise_factor": 0.5}):
        with pytest.raises(ValueError):
            AdviceSettings(**bad)


def test_as_dict_is_json():
    doc = json.loads(json.dumps(advise(frame(6, state=["COMPLETED"] * 5 + ["TIMEOUT"])).as_dict()))
    assert doc["enough"] and doc["raises"][0]["resource"] == "walltime"
    assert {r["resource"] for r in doc["resources"]} == {"memory", "walltime", "cpus"}


def test_limits_from_site():
    site = load_site_file(SITES / "hpctest.yaml")
    lim = limits_from_site(site, "gpu")
    assert (lim.max_walltime, lim.memory_per_node, lim.cpus_per_node, lim.gpus_per_node) == (3600, 8 * G, 8, 2)
    assert limits_from_site(site, None).partition == "debug"
    assert limits_from_site(site, "nope").max_walltime is None


# ---------------------------------------------------------------------------- groups and the report table


def test_groups_and_notes_per_user_and_sweep():
    df = pd.concat([frame(40, rss=[6 * G] * 40), frame(6, sweep="other-00000000", user="bo", req_mem=8 * G,
                                                      rss=[7 * G] * 6, array="200")], ignore_index=True)
    groups = advise_groups(df)
    assert [(a.group["user"], a.group["sweep_id"], a.runs) for a in groups] == [
        ("ana", "fit-1a2b3c4d", 40), ("bo", "other-00000000", 6)]
    notes = right_sizing_table(df)
    assert list(notes["note"]) == ["asked 64G, used at most 6G in 40 of 40 runs: ask 8G",
                                   "asked 04:00:00, ran at most 00:30:00 in 40 of 40 runs: ask 00:36:00",
                                   "asked 16 CPUs, kept at most 2 CPUs busy in 40 of 40 runs: ask 3",
                                   "asked 04:00:00, ran at most 00:30:00 in 6 of 6 runs: ask 00:36:00",
                                   "asked 16 CPUs, kept at most 2 CPUs busy in 6 of 6 runs: ask 3"]
    assert str(notes["runs"].dtype) == "Int64"


def test_report_has_the_right_sizing_table():
    tables = report_tables(frame(10), "efficiency")
    assert "right_sizing" in tables and len(tables["right_sizing"]) == 3
    assert "right_sizing" not in report_tables(frame(10), "wait")


# ---------------------------------------------------------------------------- real sacct text


@pytest.fixture(scope="module")
def testbed_capture() -> pd.DataFrame:
    return read_saved(DATA / "testbed-22.05_sacct-steps-parsable2.txt", sacct_fields=TESTBED_FIELDS.split(","))


def test_real_capture(testbed_capture):
    groups = {a.group["job_name"]: a for a in advise_groups(testbed_capture)}
    arr = groups["arr"]  # the 10-task array: 1G asked, MaxRSS of the batch steps 3.0-3.2 MiB
    assert arr.runs == arr.completed == 10 and arr.enough
    mem = next(r for r in arr.resources if r.resource == "memory")
    assert mem.asked == G and mem.used_max == 3317760 and mem.proposed == 128 * M
    assert groups["timeout"].raise_for("walltime").proposed == 120  # 1 min limit × 1.5, in whole minutes
    assert not groups["plain"].enough and "1 completed of 1 finished, 5 needed" in groups["plain"].message


def test_cli_advise_from_file():
    path = str(DATA / "testbed-22.05_sacct-steps-parsable2.txt")
    r = CliRunner().invoke(main, ["advise", "--from-file", path, "--sacct-fields", TESTBED_FIELDS, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["enough"] and doc["runs"] == 15 and doc["completed"] == 12
    assert {x["resource"]: x["proposed_text"] for x in doc["resources"]}["memory"] == "128M"
    assert doc["raises"][0]["proposed_text"] == "00:02:00"
    r = CliRunner().invoke(main, ["advise", "--from-file", path, "--sacct-fields", TESTBED_FIELDS, "--min-runs", "20",
                                  "--quantile", "p90", "--margin", "10%"])
    assert r.exit_code == 0, r.output
    assert "NO ADVICE" in r.output and "20 needed" in r.output and "p90 + 10 %" in r.output


@pytest.mark.parametrize("args", [[], ["--quantile", "2"], ["--margin", "lots"], ["x", "--name", "y"]])
def test_cli_advise_bad_input_is_exit_2(args, tmp_path):
    r = CliRunner().invoke(main, ["advise", *args, "--root", str(tmp_path)])
    assert r.exit_code == 2, r.output


def test_cli_report_right_sizing_csv(testbed_capture):
    path = str(DATA / "testbed-22.05_sacct-steps-parsable2.txt")
    r = CliRunner().invoke(main, ["report", "--from-file", path, "--sacct-fields", TESTBED_FIELDS, "--section",
                                  "efficiency", "--table", "right_sizing", "--csv"])
    assert r.exit_code == 0, r.output
    assert "asked 1G, used at most 3.2M in 10 of 10 runs: ask 128M" in r.output


def test_real_sweep_capture_with_a_timeout():
    """The testbed sweep of tests/integration/test_advise_slurm.py (see tests/data/SOURCES.md): 2G asked, 120M used."""
    df = read_saved(DATA / "testbed" / "sacct_rightsize_sweep.txt")
    (a,) = advise_groups(df, AdviceSettings(min_runs=4))
    assert a.group == {"user": "root", "sweep_id": "rightsize-83c04e2c"}
    assert (a.runs, a.completed, a.partition) == (6, 4, "debug")  # + the TIMEOUT and the cancelled retry
    mem = next(r for r in a.resources if r.resource == "memory")
    assert mem.asked == 2 * G and 120 * M < mem.used_max < 140 * M  # MaxRSS 134016K of the 120 MiB task
    assert mem.proposed == 256 * M and mem.proposed_text == "256M"
    lr = a.raise_for("walltime")
    assert lr.jobs == ("9594_4",) and lr.asked == 60 and lr.proposed_text == "00:02:00"
    site = load_site_file(SITES / "hpctest.yaml")  # 1 h at most on debug: the raise fits
    (b,) = advise_groups(df, AdviceSettings(min_runs=4), site=site)
    assert b.raise_for("walltime").proposed == 120
    notes = right_sizing_table(df)  # default 5 runs needed: only the raise is noted
    assert list(notes["resource"]) == ["walltime"] and notes["sweep_or_job"].iloc[0] == "rightsize-83c04e2c"


@pytest.mark.parametrize("source", ["synthetic", "testbed", "sweep"])
def test_the_grouped_table_equals_advise_per_group(source, testbed_capture):
    if source == "synthetic":
        df = pd.concat([frame(40, rss=[6 * G] * 40), frame(6, sweep="b-00000000", user="bo", array="200",
                                                          state=["COMPLETED"] * 4 + ["TIMEOUT", "OUT_OF_MEMORY"]),
                        frame(7, gpus=4, util=[0.2] * 7, array="300", sweep="g-00000000"),
                        frame(2, array="400", sweep="few-00000000")], ignore_index=True)
    elif source == "testbed":
        df = testbed_capture
    else:
        df = read_saved(DATA / "testbed" / "sacct_rightsize_sweep.txt")
    for s in (AdviceSettings(), AdviceSettings(min_runs=1, quantile=0.5, margin=0.0)):
        pd.testing.assert_frame_equal(right_sizing_table(df, s), reference_right_sizing(df, s))
        for n in (1, 2):
            pd.testing.assert_frame_equal(right_sizing_table(df, s, groups=n), reference_right_sizing(df, s, n))


def test_real_openpbs_accounting_log_in_pbs_units():
    """The real OpenPBS 23.06 log of tests/data/pbs/openpbs-real (see its README): PBS spelling of memory."""
    df = read_saved(DATA.parent / "pbs" / "openpbs-real" / "accounting-20261203.txt")
    a = advise(df, AdviceSettings(min_runs=2))
    assert a.scheduler == "pbspro" and a.enough
    mem = next(r for r in a.resources if r.resource == "memory")
    assert mem.asked == 100 * M and mem.proposed == 100 * M and mem.proposed_text == "100mb"  # never above the ask
    lr = a.raise_for("walltime")
    assert lr.asked == 10 and lr.proposed_text == "00:01:00"  # 10 s × 1.5, whole minutes
    assert a.savings["core_hours_proposed"] <= a.savings["core_hours_asked"]


def test_html_report_has_the_notes(tmp_path):
    path = DATA / "testbed" / "sacct_rightsize_sweep.txt"
    r = CliRunner().invoke(main, ["report", "--from-file", str(path), "--section", "efficiency", "--html",
                                  str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    data = json.loads(page.split('id="hpcjobs-data">', 1)[1].split("</script>", 1)[0])
    table = next(t for s in data["sections"] for t in s["tables"] if t["name"] == "right_sizing")
    assert table["heading"] == "Right sizing"
    assert any("1 run hit the wall-time limit (asked 00:01:00): ask 00:02:00" in (cell or "")
               for row in table["rows"] for cell in row)


def test_a_run_killed_at_its_memory_request_is_a_memory_hit():
    """Slurm's OverMemoryKill records FAILED 0:9, not OUT_OF_MEMORY: job 9 of the testbed capture (SOURCES.md)."""
    fields = ("JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,DerivedExitCode,Submit,Eligible,Start,"
              "End,Elapsed,ElapsedRaw,Timelimit,TimelimitRaw,NNodes,NCPUS,AllocCPUS,ReqCPUS,ReqMem,MaxRSS,AveRSS,"
              "TotalCPU,CPUTime,AllocTRES,ReqTRES,NodeList,Comment,Reason,WorkDir")  # its COMMANDS.txt line
    df = read_saved(DATA / "testbed" / "sacct.txt", sacct_fields=fields.split(","))
    groups = {a.group["job_name"]: a for a in advise_groups(df, AdviceSettings(min_runs=1))}
    lr = groups["cap-memhog"].raise_for("memory")  # --mem=100M, killed with MaxRSS 289192K
    assert lr.jobs == ("9",) and lr.asked == 100 * M and lr.proposed_text == "384M"  # 282 MiB × 1.2, 128M steps
    assert groups["cap-exit3"].raise_for("memory") is None  # FAILED far below its request: not a memory hit
    notes = right_sizing_table(df)
    assert "1 run hit the memory limit (asked 100M): ask 384M" in list(notes["note"])
