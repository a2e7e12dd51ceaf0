"""Reports on real accounting fixtures and constructed frames, values checked by hand; the `hpcjobs report` CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hpcjobs import accounting as r
from hpcjobs.accounting.report_source import ReportFilters, apply_filters, detect_format, parse_when
from hpcjobs.accounting.schema import conform
from hpcjobs.accounting.sources.pbs import read_pbs_accounting
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from hpcjobs.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
TESTBED = DATA / "slurm" / "testbed"
PBS_LOG = DATA / "pbs" / "constructed_accounting_20221014"
FIELDS = (TESTBED / "sacct_header_X.txt").read_text().splitlines()[0].split("|")
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def testbed() -> pd.DataFrame:
    """The real testbed capture with .batch/.extern steps (jobs 2-12, array 11 with 12 tasks)."""
    return read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)


@pytest.fixture(scope="module")
def pbs() -> pd.DataFrame:
    return read_pbs_accounting(PBS_LOG, tz="Europe/Berlin")


def row(df: pd.DataFrame, job_id: str) -> pd.Series:
    hit = df[df["job_id"] == job_id]
    assert len(hit) == 1, job_id
    return hit.iloc[0]


def td(s: float) -> pd.Timedelta:
    return pd.Timedelta(seconds=s)


# ---------------------------------------------------------------------------
# efficiency


def test_job_rows_are_one_per_job(testbed):
    jobs = r.job_rows(testbed)
    assert len(jobs) == 22 and jobs["step"].isna().all()
    assert jobs["job_id"].is_unique


def test_job_rows_take_peak_memory_from_steps():
    # sacct leaves MaxRSS blank on job rows; drop what the ingest filled in and let job_rows redo it
    raw = read_sacct_parsable2(TESTBED / "sacct.txt", FIELDS)
    blank = raw.assign(max_rss_bytes=raw["max_rss_bytes"].where(raw["step"].notna()))
    jobs = r.job_rows(blank)
    assert row(jobs, "9").max_rss_bytes == 289192 * 1024  # cap-memhog .batch MaxRSS 289192K
    assert row(jobs, "4").max_rss_bytes == 3203072  # .batch 3128K beats .extern 1684K
    assert pd.isna(row(jobs, "8").max_rss_bytes)  # cancelled while pending: no steps


def test_efficiency_testbed_values(testbed):
    eff = r.efficiency(testbed)
    assert list(eff.columns) == list(r.EFFICIENCY_COLUMNS)
    assert str(eff["cpu_efficiency"].dtype) == "Float64" and str(eff["core_hours"].dtype) == "Float64"
    j4 = row(eff, "4")  # cap-completed: 1 CPU, Elapsed 3 s, TotalCPU 00:00.006, ReqMem 256M, limit 2 min
    assert j4.cpu_efficiency == pytest.approx(0.006 / 3)
    assert j4.mem_efficiency == pytest.approx(3203072 / (256 * MiB))
    assert j4.time_efficiency == pytest.approx(3 / 120)
    assert j4.core_hours == pytest.approx(3 / 3600)
    assert j4.core_hours_wasted == pytest.approx((3 - 0.006) / 3600)
    assert j4.gpu_hours == 0
    j6 = row(eff, "6")  # cap-timeout: --time=0:01, killed after 85 s
    assert j6.time_efficiency == pytest.approx(85 / 60)
    j9 = row(eff, "9")  # cap-memhog: --mem=100M, peak 289192K before the kill
    assert j9.mem_efficiency == pytest.approx(289192 * 1024 / (100 * MiB))
    j8 = row(eff, "8")  # cancelled while held: nothing ran
    assert pd.isna(j8.cpu_efficiency) and pd.isna(j8.mem_efficiency) and j8.core_hours == 0
    j10 = row(eff, "10")  # cap-gpu: --gres=gpu:1, Elapsed 2 s
    assert j10.gpus == 1 and j10.gpu_hours == pytest.approx(2 / 3600)
    assert pd.isna(j10.gpu_utilization) and pd.isna(j10.gpu_hours_wasted)


def test_efficiency_joins_gpu_utilisation(testbed):
    gpu = pd.DataFrame({"job_id": ["10"], "gpu_util_mean": [25.0], "gpu_mem_max_bytes": [1000]})
    j10 = row(r.efficiency(testbed, gpu=gpu), "10")
    assert j10.gpu_utilization == pytest.approx(0.25)
    assert j10.gpu_hours_wasted == pytest.approx(2 / 3600 * 0.75)
    assert j10.gpu_mem_max_bytes == 1000


def test_efficiency_pbs_values(pbs):
    eff = r.efficiency(pbs)
    j = row(eff, "4202.pbs")  # 4 ncpus, walltime 01:00:05 of 01:00:00, cput 03:59:50, mem 7gb of 8gb
    elapsed = 3605
    assert j.cpu_efficiency == pytest.approx((3 * 3600 + 59 * 60 + 50) / (4 * elapsed))
    assert j.mem_efficiency == pytest.approx(7 / 8)
    assert j.time_efficiency == pytest.approx(elapsed / 3600)
    assert j.core_hours == pytest.approx(4 * elapsed / 3600)
    j0 = row(eff, "4200.pbs")  # 1 GPU for 00:29:57
    assert j0.gpu_hours == pytest.approx((29 * 60 + 57) / 3600)


def test_ratios_are_na_not_inf():
    df = conform(pd.DataFrame({
        "job_id": ["a", "b"], "cpus": [0, 2], "elapsed": [td(10), td(0)], "cpu_time": [td(5), td(0)],
        "req_mem_bytes": [0, None], "max_rss_bytes": [10, 10], "time_limit": [td(0), pd.NaT],
    }))
    eff = r.efficiency(df)
    assert eff[["cpu_efficiency", "mem_efficiency", "time_efficiency"]].isna().all().all()


def test_worst_offenders_and_waste_summary(testbed):
    worst = r.worst_offenders(testbed, 3)
    # 85 s; the 5 s task; then the first of the 4 s tasks with the least CPU time (0.006 s: 11_2, 11_3, ...)
    assert list(worst["job_id"]) == ["6", "11_5", "11_2"]
    low_cpu = r.worst_offenders(testbed, 1, by="cpu_efficiency")
    assert low_cpu.loc[0, "job_id"] == "6"  # 0.004 s of CPU in 85 s
    gpu_worst = r.worst_offenders(testbed, 5, by="gpu_hours")
    assert list(gpu_worst["job_id"]) == ["10"]
    with pytest.raises(KeyError):
        r.worst_offenders(testbed, 1, by="nonsense")
    w = r.waste_summary(testbed, "partition").set_index("partition")
    # debug: elapsed 0+0+3+3+85+2+0+1+2 (jobs 2-9, 12) + 11×4+5 (array 11) = 145 CPU-seconds on 1 CPU each
    assert w.loc["debug", "jobs"] == 21 and w.loc["gpu", "jobs"] == 1
    assert w.loc["debug", "core_hours"] == pytest.approx(145 / 3600)
    assert w.loc["gpu", "gpu_hours"] == pytest.approx(2 / 3600)
    assert list(w.index) == ["debug", "gpu"]  # most wasted first


# ---------------------------------------------------------------------------
# queue wait


def test_queue_wait_pbs_by_partition(pbs):
    q = r.queue_wait(pbs, "partition")
    # started: 4200 (5 s), 4202 (10 s), 4203[1] (11 s), 4203[2] (12 s); 4201 deleted and 4204 aborted while queued
    assert list(q["partition"]) == ["workq"] and q.loc[0, "jobs"] == 4
    assert q.loc[0, "median_wait"] == td(10.5)
    assert q.loc[0, "p90_wait"] == td(11.7)  # linear: 11 + 0.7 × (12 − 11)
    assert q.loc[0, "max_wait"] == td(12) and q.loc[0, "mean_wait"] == td(9.5)
    assert str(q["median_wait"].dtype) == "timedelta64[ns]"


def test_queue_wait_hour_and_weekday_in_a_zone(pbs):
    # etime 1665738000..1665738200 = Friday 2022-10-14 09:00-09:03 UTC = 11:00-11:03 in Berlin
    q = r.queue_wait(pbs, ["hour", "weekday"], tz="Europe/Berlin")
    assert q[["hour", "weekday", "jobs"]].astype(str).values.tolist() == [["11", "Friday", "4"]]
    assert r.queue_wait(pbs, "hour").loc[0, "hour"] == 9


def test_queue_wait_testbed_leaves_out_jobs_that_never_ran(testbed):
    by_gpu = r.queue_wait(testbed, "gpus").set_index("gpus")
    assert by_gpu.loc[0, "jobs"] == 20 and by_gpu.loc[1, "jobs"] == 1  # 22 jobs minus 8 (cancelled while held)
    assert by_gpu.loc[0, "max_wait"] == td(2)  # cap-comment waited 2 s for a CPU


def test_queue_wait_walltime_bins():
    t0 = pd.Timestamp("2026-01-05 10:00", tz="UTC")
    limits = [td(1800), td(7200), td(5 * 3600), pd.NaT, td(3 * 86400), td(3600)]
    waits = [60, 120, 600, 30, 7200, 0]
    df = conform(pd.DataFrame({
        "job_id": [str(i) for i in range(6)], "state": ["COMPLETED"] * 6, "time_limit": limits,
        "wait": [td(w) for w in waits], "submit_time": [t0] * 6, "eligible_time": [t0] * 6,
        "start_time": [t0 + td(w) for w in waits], "elapsed": [td(10)] * 6, "partition": ["p"] * 6,
    }))
    q = r.queue_wait(df, "walltime")
    got = {str(k): (int(n), w) for k, n, w in zip(q["walltime"], q["jobs"], q["median_wait"], strict=True)}
    assert got == {"<=1h": (2, td(30)), "1h-4h": (1, td(120)), "4h-12h": (1, td(600)), "2d-7d": (1, td(7200)),
                   "unlimited": (1, td(30))}
    assert list(r.queue_wait_report(df)) == [f"wait_by_{k}" for k in r.WAIT_KEYS]


# ---------------------------------------------------------------------------
# failures


def test_failures_testbed(testbed):
    by_state = r.failures_by_state(testbed)
    assert dict(zip(by_state["state"], by_state["jobs"], strict=True)) == {
        "COMPLETED": 17, "CANCELLED": 2, "FAILED": 2, "TIMEOUT": 1}
    assert by_state.loc[0, "fraction"] == pytest.approx(17 / 22)
    assert list(by_state.loc[by_state["failure"], "state"]) == ["CANCELLED", "FAILED", "TIMEOUT"]
    by_exit = r.failures_by_exit(testbed)
    got = {(s, int(c), int(g)): (m, int(n)) for s, c, g, m, n in by_exit.itertuples(index=False)}
    assert got == {
        ("CANCELLED", 0, 0): ("cancelled", 2),
        ("FAILED", 0, 9): ("killed by SIGKILL", 1),  # cap-memhog, ExitCode 0:9
        ("FAILED", 3, 0): ("exit 3", 1),  # cap-exit3
        ("TIMEOUT", 0, 0): ("time limit reached", 1),
    }


def test_failures_pbs_exit_meanings(pbs):
    by_exit = r.failures(pbs)["failures_by_exit"]
    meanings = set(by_exit["meaning"])
    assert "pbspro: walltime exceeded (-29)" in meanings  # 4202 Exit_status=-29
    assert "killed by SIGTERM" in meanings  # 4200 deleted while running: Exit_status=271 → signal 15
    assert "exit 3" in meanings  # 4203[2]


@pytest.mark.parametrize(("args", "text"), [
    (("pbspro", 271, 0), "top shell killed by SIGTERM"),
    (("torque", -11, pd.NA), "torque: walltime exceeded (-11)"),
    (("slurm", 137, 0), "exit 137 (a command killed by SIGKILL)"),
    (("slurm", 0, 0, "OUT_OF_MEMORY"), "out of memory"),
    (("slurm", 0, 125, "OUT_OF_MEMORY"), "out of memory"),  # sacct ExitCode 0:125 of an OOM kill
    (("slurm", 0, 9, "FAILED"), "killed by SIGKILL"),
    (("slurm", pd.NA, pd.NA), "unknown"),
])
def test_exit_meaning(args, text):
    assert r.exit_meaning(*args) == text


# ---------------------------------------------------------------------------
# sweeps


def _points() -> pd.DataFrame:
    return pd.DataFrame({
        "point_id": ["p0", "p1", "p2", "p3", "p4"], "index": [0, 1, 2, 3, 4],
        "params": [{"lr": 0.1, "opt": "sgd"}, {"lr": 0.01, "opt": "sgd"}, {"lr": 0.1, "opt": "adam"},
                   {"lr": 0.01, "opt": "adam"}, {"lr": 0.1, "opt": "adam"}],
        "job_id": [None, None, "5", "6", "999"], "array_job_id": ["11", "11", None, None, None],
        "array_index": [3, 11, None, None, None],
    })


def test_sweep_frame_joins_array_tasks_and_jobs(testbed):
    f = r.sweep_frame(_points(), testbed)
    assert list(f.columns[:4]) == ["point_id", "index", "lr", "opt"]
    assert list(f.columns[4:]) == list(r.SWEEP_FATE_COLUMNS)
    assert str(f["lr"].dtype) == "Float64" and str(f["opt"].dtype) == "string"
    assert str(f["point_id"].dtype) == "string" and str(f["wait"].dtype) == "timedelta64[ns]"
    assert list(f["job_id"].astype(object).where(f["job_id"].notna(), None)) == ["11_3", "11_11", "5", "6", None]
    assert list(f["state"].astype(object)[:4]) == ["COMPLETED", "COMPLETED", "FAILED", "TIMEOUT"]
    assert pd.isna(f.loc[4, "state"])  # job 999 is not in the accounting data
    assert f.loc[2, "exit_code"] == 3 and f.loc[3, "elapsed"] == td(85)
    assert f.loc[0, "cpu_efficiency"] == pytest.approx(0.006 / 4)  # 11_3: TotalCPU 00:00.006 in 4 s
    fp = r.failure_params(f)
    assert fp.astype(str).values.tolist() == [
        ["opt", "adam", "2", "2", "1.0"], ["lr", "0.01", "2", "1", "0.5"], ["lr", "0.1", "2", "1", "0.5"],
        ["opt", "sgd", "2", "0", "0.0"]]


def test_sweep_frame_pbs_arrays_and_tags(pbs):
    points = pd.DataFrame({
        "point_id": ["a", "b", "c"], "index": [0, 1, 2], "lr": [1e-3, 1e-2, 1e-1],
        "array_job_id": ["4203[].pbs", "4203", None], "array_index": [2, 1, None],
        "sweep_id": [None, None, "sw2"], "chunk": [None, None, 1],
    })
    f = r.sweep_frame(points, pbs)
    assert list(f["job_id"]) == ["4203[2].pbs", "4203[1].pbs", "4200.pbs"]  # the last by its hpcjobs tag
    assert list(f["state"].astype(str)) == ["FAILED", "COMPLETED", "CANCELLED"]
    only = r.sweep_frame(points.iloc[[2]].drop(columns=["sweep_id", "chunk"]).assign(chunk=[1]), pbs,
                         sweep_id="sw2")
    assert list(only["job_id"]) == ["4200.pbs"]


def test_sweep_frame_param_named_like_a_fate_column(testbed):
    pts = pd.DataFrame({"point_id": ["x"], "index": [0], "params": [{"state": "warm"}], "job_id": ["4"]})
    f = r.sweep_frame(pts, testbed)
    assert f.loc[0, "param_state"] == "warm" and f.loc[0, "state"] == "COMPLETED"


# ---------------------------------------------------------------------------
# report sources and filters


def test_detect_format_of_fixtures():
    assert detect_format((TESTBED / "sacct_header_X.txt").read_text()) == "sacct-parsable2"
    assert detect_format((TESTBED / "sacct.json").read_text()) == "sacct-json"
    assert detect_format((DATA / "pbs" / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json")
                         .read_text()) == "qstat-json"
    assert detect_format(PBS_LOG.read_text()) == "pbs-accounting"
    assert detect_format((DATA / "torque" / "constructed_accounting_20170405").read_text()) == "torque-accounting"
    assert detect_format((DATA / "torque" / "fyrd_torque-stanford_qstat-x.xml").read_text()) == "torque-xml"
    assert detect_format((DATA / "pbs" / "aiida_pbspro-epfl_qstat-f_6jobs_tab-continuation.txt")
                         .read_text()) == "qstat-text"


def test_parse_when():
    now = pd.Timestamp("2026-12-02 12:00", tz="UTC").to_pydatetime()
    assert parse_when("7d", now=now) == pd.Timestamp("2026-11-25 12:00", tz="UTC")
    assert parse_when("2026-11-30", now=now) == pd.Timestamp("2026-11-30", tz="UTC")
    assert parse_when("2026-11-30T08:00+01:00").isoformat() == "2026-11-30T08:00:00+01:00"


def test_apply_filters_keeps_steps_with_their_job(testbed, pbs):
    assert len(apply_filters(testbed, ReportFilters(partitions=("gpu",)))) == 3  # job 10 + .batch + .extern
    assert len(apply_filters(testbed, ReportFilters(users=("nobody",)))) == 0
    late = ReportFilters(since=parse_when("2026-12-02T18:29:00"))
    assert set(r.job_rows(apply_filters(testbed, late))["job_id"]) == {"6"}  # only cap-timeout ended after 18:29
    assert list(apply_filters(pbs, ReportFilters(sweep="sw2"))["job_id"]) == ["4200.pbs"]


# ---------------------------------------------------------------------------
# CLI


def invoke(*argv: str):
    return CliRunner().invoke(main, ["report", *argv], catch_exceptions=False)


def test_cli_csv_of_one_table():
    res = invoke("--from-file", str(TESTBED / "sacct_header_X.txt"), "--section", "failures",
                 "--table", "failures_by_state", "--csv")
    assert res.exit_code == 0, res.output
    table = pd.read_csv(io.StringIO(res.output))
    assert dict(zip(table["state"], table["jobs"], strict=True)) == {
        "COMPLETED": 17, "CANCELLED": 2, "FAILED": 2, "TIMEOUT": 1}


def test_cli_json_pbs_log_durations_in_seconds():
    res = invoke("--from-file", str(PBS_LOG), "--tz", "Europe/Berlin", "--section", "wait", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # the still-running job of the log is a warning on stderr
    assert "warning: 1 job had not ended when the accounting log was written" in res.stderr
    assert set(doc) == {f"wait_by_{k}" for k in r.WAIT_KEYS}
    assert doc["wait_by_partition"] == [{"partition": "workq", "jobs": 4, "median_wait": 10.5, "p90_wait": 11.7,
                                         "mean_wait": 9.5, "max_wait": 12.0}]


def test_cli_sacct_json_and_filters():
    res = invoke("--from-file", str(TESTBED / "sacct.json"), "--partition", "gpu", "--section", "efficiency",
                 "--table", "waste_by_partition", "--json")
    doc = json.loads(res.output)["waste_by_partition"]
    assert [d["partition"] for d in doc] == ["gpu"] and doc[0]["jobs"] == 1


def test_cli_several_tables_as_csv_and_people_output():
    res = invoke("--from-file", str(TESTBED / "sacct_header_X.txt"), "--section", "failures", "--csv")
    assert res.output.startswith("# failures_by_state\n") and "\n# failures_by_exit\n" in res.output
    res = invoke("--from-file", str(TESTBED / "sacct_header_X.txt"))
    assert res.exit_code == 0
    for title in ("waste by user", "worst cpu waste", "wait by partition", "failures by exit"):
        assert title in res.output
    assert "killed by SIGKILL" in res.output


def test_cli_headerless_sacct_needs_fields():
    res = invoke("--from-file", str(TESTBED / "sacct.txt"))
    assert res.exit_code == 2 and "--sacct-fields" in res.output
    res = invoke("--from-file", str(TESTBED / "sacct.txt"), "--sacct-fields", ",".join(FIELDS),
                 "--section", "failures", "--table", "failures_by_state", "--csv")
    assert res.exit_code == 0 and "COMPLETED,17," in res.output


def test_cli_errors():
    assert invoke("--scheduler", "pbspro").exit_code == 2  # no live PBS query
    res = invoke("--from-file", str(PBS_LOG), "--table", "nope")
    assert res.exit_code == 2 and "wait_by_partition" in res.output
    assert invoke("--from-file", str(PBS_LOG), "--since", "last tuesday").exit_code == 2


def test_cli_plot_and_html(tmp_path):
    res = invoke("--from-file", str(PBS_LOG), "--plot", str(tmp_path / "figs"), "--plot-format", "svg",
                 "--html", str(tmp_path / "r.html"))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == [
        "efficiency_histograms.svg", "efficiency_scatter.svg", "failures_by_state.svg", "wait_by_partition.svg"]
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_report_help_does_not_import_pandas():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom hpcjobs.cli import main\n"
            "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
            "res = CliRunner().invoke(main, ['report', '--help'])\nassert res.exit_code == 0, res.output\n"
            "print(sorted(m for m in ('pandas', 'matplotlib', 'numpy') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_cli_accounting_directory_and_empty_selection(tmp_path):
    (tmp_path / "acct").mkdir()
    (tmp_path / "acct" / "20221014").write_text(PBS_LOG.read_text())
    res = invoke("--from-file", str(tmp_path / "acct"), "--tz", "Europe/Berlin", "--section", "failures",
                 "--table", "failures_by_state", "--json")
    assert {d["state"]: d["jobs"] for d in json.loads(res.stdout)["failures_by_state"]} == {
        "CANCELLED": 2, "FAILED": 2, "COMPLETED": 1, "TIMEOUT": 1}
    res = invoke("--from-file", str(TESTBED / "sacct_header_X.txt"), "--user", "nobody", "--json",
                 "--html", str(tmp_path / "empty.html"))
    assert res.exit_code == 0 and all(v == [] for v in json.loads(res.stdout).values())
    assert "no rows" in (tmp_path / "empty.html").read_text()


def test_cli_live_query_arguments(monkeypatch, testbed):
    from hpcjobs.accounting.sources import slurm

    calls = []

    def fake_query_sacct(start, end=None, **kw):
        calls.append((start, end, kw))
        return testbed

    monkeypatch.setattr(slurm, "query_sacct", fake_query_sacct)
    res = invoke("--since", "2026-12-01", "--until", "2026-12-03", "--user", "root", "--account", "hpcjobs",
                 "--section", "failures", "--table", "failures_by_state", "--csv")
    assert res.exit_code == 0, res.output
    (start, end, kw), = calls
    assert start == pd.Timestamp("2026-12-01", tz="UTC") and end == pd.Timestamp("2026-12-03", tz="UTC")
    assert kw == {"users": ["root"], "accounts": ["hpcjobs"], "all_users": False}
    assert "COMPLETED,17," in res.output
    invoke("--all-users", "--section", "wait")
    start, end, kw = calls[-1]
    assert kw["all_users"] is True and end is None
    assert pd.Timestamp.now(tz="UTC") - pd.Timestamp(start) < pd.Timedelta(days=7, minutes=5)  # default: 7 days
