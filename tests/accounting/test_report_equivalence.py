"""The report tables against straightforward reference code: identical values on real recorded inputs and
on generated frames with every awkward case (requeued duplicates, missing ids, orphan steps, negative or
missing durations, jobs that never ran).

The report computes the per-job frame once, fills step peaks and filters by integer codes, groups on
category codes and ranks top-n candidates; the references below are the direct pandas formulation (a
boolean copy of the job rows for each table, groupby on text, a full stable sort, Python tuples of ids),
as the tables were first written. ``efficiency`` itself is the library's, applied to the reference job rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from hpcjobs import accounting as r
from hpcjobs.accounting.report_source import ReportFilters, apply_filters, read_saved
from hpcjobs.accounting.reports.rows import _ratio, _started
from hpcjobs.accounting.reports.wait import _WEEKDAYS, _wait_keys
from hpcjobs.accounting.schema import conform
from hpcjobs.cli import main
from hpcjobs.errors import ConfigError
from hpcjobs.states import FAILURE_STATES
from tests.accounting.test_advise import reference_right_sizing

DATA = Path(__file__).resolve().parent.parent / "data"
TESTBED_FIELDS = (DATA / "slurm" / "testbed" / "sacct_header_X.txt").read_text().splitlines()[0].split("|")

#: Real recorded inputs (tests/data/SOURCES.md): path and read_saved keywords.
REAL: dict[str, tuple[Path, dict[str, object]]] = {
    "slurm-testbed-text": (DATA / "slurm" / "testbed" / "sacct.txt", {"sacct_fields": TESTBED_FIELDS}),
    "slurm-testbed-json": (DATA / "slurm" / "testbed" / "sacct.json", {}),
    "slurm-cedar-json": (DATA / "slurm" / "clockwork_cedar_slurm-21.08_sacct_1.json", {}),
    "openpbs-accounting": (DATA / "pbs" / "openpbs-real" / "accounting-20261203.txt", {"scheduler": "pbspro"}),
    "ncar-casper-accounting": (DATA / "pbs" / "ncar-qhist_casper_20250331_testdata", {"tz": "America/Denver"}),
    "openpbs-qstat-json": (DATA / "pbs" / "firecrest_openpbs-23.06.06_qstat-F-json-f-x_allusers.json", {}),
    "torque-accounting": (DATA / "torque" / "constructed_accounting_20170405", {"scheduler": "torque"}),
}


# ---------------------------------------------------------------------------
# reference code: the direct formulation


def ref_job_rows(df: pd.DataFrame) -> pd.DataFrame:
    is_job = df["step"].isna()
    jobs = df[is_job]
    steps = df[~is_job]
    if len(steps) and jobs["max_rss_bytes"].isna().any():
        peak = steps.groupby("job_id", observed=True, sort=False)["max_rss_bytes"].max()
        jobs = jobs.assign(max_rss_bytes=jobs["max_rss_bytes"].fillna(jobs["job_id"].map(peak).astype("Int64")))
    if jobs["job_id"].duplicated().any():
        jobs = jobs.sort_values("submit_time", kind="stable").drop_duplicates(
            ["job_id", "cluster"], keep="last").sort_index()
    return jobs.reset_index(drop=True)


def ref_input_warnings(df: pd.DataFrame) -> list[int]:
    jobs = df[df["step"].isna()]
    return [int((jobs[c].dt.total_seconds() < 0).sum()) for c in ("elapsed", "cpu_time")]


def ref_worst(eff: pd.DataFrame, n: int, by: str) -> pd.DataFrame:
    eff = eff[eff[by].notna()]
    if by in r.LOW_IS_BAD:
        eff = eff[eff["elapsed"] > pd.Timedelta(0)]
    if by.startswith("gpu_"):
        eff = eff[eff["gpu_hours"].fillna(0) > 0]
    return eff.sort_values(by, ascending=by in r.LOW_IS_BAD, kind="stable").head(n).reset_index(drop=True)


def ref_queue_wait(df: pd.DataFrame, keys: Sequence[str], tz: str | None = None) -> pd.DataFrame:
    jobs = ref_job_rows(df)
    jobs = jobs[_started(jobs) & jobs["wait"].notna()]
    cols = {}
    for k in keys:
        if k == "weekday":
            t = jobs["eligible_time"].fillna(jobs["submit_time"])
            t = t.dt.tz_convert(tz) if tz else t
            cols[k] = pd.Series(pd.Categorical(t.dt.day_name(), categories=_WEEKDAYS, ordered=True),
                                index=jobs.index)
        else:
            cols[k] = _wait_keys(jobs, k, tz, r.WALLTIME_BINS)
    frame = pd.DataFrame(cols)
    frame["_w"] = jobs["wait"].dt.total_seconds()
    g = frame.groupby(list(keys), observed=True, dropna=False, sort=True)["_w"]
    return pd.DataFrame({
        "jobs": g.size().astype("Int64"),
        "median_wait": pd.to_timedelta(g.median(), unit="s"),
        "p90_wait": pd.to_timedelta(g.quantile(0.9), unit="s"),
        "mean_wait": pd.to_timedelta(g.mean(), unit="s"),
        "max_wait": pd.to_timedelta(g.max(), unit="s"),
    }).reset_index()


def ref_failures_by_state(df: pd.DataFrame) -> pd.DataFrame:
    jobs = ref_job_rows(df)
    counts = jobs["state"].value_counts(sort=False)
    counts = counts[counts > 0]
    out = pd.DataFrame({"state": counts.index.astype(str), "jobs": counts.to_numpy()})
    out["jobs"] = out["jobs"].astype("Int64")
    out["fraction"] = _ratio(out["jobs"], pd.Series(len(jobs), index=out.index))
    out["failure"] = out["state"].isin(FAILURE_STATES)
    return out.sort_values(["jobs", "state"], ascending=[False, True], kind="stable").reset_index(drop=True)


def ref_failures_by_exit(df: pd.DataFrame) -> pd.DataFrame:
    jobs = ref_job_rows(df)
    jobs = jobs[jobs["state"].isin(FAILURE_STATES)]
    frame = pd.DataFrame({
        "scheduler": jobs["scheduler"].astype(str), "state": jobs["state"].astype(str),
        "exit_code": jobs["exit_code"], "exit_signal": jobs["exit_signal"].fillna(0).astype("Int64"),
    })
    out = frame.groupby(list(frame.columns), dropna=False, sort=True).size().rename("jobs").reset_index()
    out["meaning"] = [r.exit_meaning(s, c, g, st) for s, c, g, st in
                      zip(out["scheduler"], out["exit_code"], out["exit_signal"], out["state"], strict=True)]
    out["jobs"] = out["jobs"].astype("Int64")
    out["exit_code"] = out["exit_code"].astype("Int64")
    out = out[["state", "exit_code", "exit_signal", "meaning", "jobs"]]
    return out.sort_values(["jobs", "state"], ascending=[False, True], kind="stable").reset_index(drop=True)


def ref_tables(df: pd.DataFrame, top: int = 20, tz: str | None = None) -> dict[str, pd.DataFrame]:
    eff = r.efficiency(ref_job_rows(df))
    out = {f"waste_by_{k}": r.waste_summary(eff, k) for k in ("user", "account", "partition")}
    out["worst_cpu_waste"] = ref_worst(eff, top, "core_hours_wasted")[list(r.OFFENDER_COLUMNS)]
    if (eff["gpu_hours"].fillna(0) > 0).any():
        by = "gpu_hours_wasted" if eff["gpu_hours_wasted"].notna().any() else "gpu_hours"
        out["worst_gpu_waste"] = ref_worst(eff, top, by)[list(r.OFFENDER_COLUMNS)]
    out["right_sizing"] = reference_right_sizing(df, groups=top)  # advise() per group
    out.update({f"wait_by_{k}": ref_queue_wait(df, [k], tz) for k in r.WAIT_KEYS})
    out["failures_by_state"] = ref_failures_by_state(df)
    out["failures_by_exit"] = ref_failures_by_exit(df)
    return out


def ref_apply_filters(df: pd.DataFrame, f: ReportFilters) -> pd.DataFrame:
    jobs = df[df["step"].isna()]
    keep = pd.Series(True, index=jobs.index)
    if f.since is not None:
        keep &= jobs["end_time"].isna() | (jobs["end_time"] >= pd.Timestamp(f.since).tz_convert("UTC"))
    if f.until is not None:
        keep &= jobs["submit_time"].isna() | (jobs["submit_time"] < pd.Timestamp(f.until).tz_convert("UTC"))
    for col, wanted in (("user", f.users), ("account", f.accounts), ("partition", f.partitions)):
        if wanted:
            keep &= jobs[col].astype("string").isin(list(wanted)).fillna(False)
    if f.sweep is not None:
        keep &= (jobs["sweep_id"].astype("string") == f.sweep).fillna(False)
    ids = set(zip(jobs.loc[keep, "job_id"], jobs.loc[keep, "job_id_raw"].fillna(""), strict=True))
    pairs = pd.Series(list(zip(df["job_id"], df["job_id_raw"].fillna(""), strict=True)), index=df.index)
    return df[pairs.isin(ids)].reset_index(drop=True)


def assert_same_tables(got: dict[str, pd.DataFrame], want: dict[str, pd.DataFrame]) -> None:
    assert list(got) == list(want)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], obj=name)


# ---------------------------------------------------------------------------
# generated frames


def generated(seed: int, n_jobs: int = 300) -> pd.DataFrame:
    """Job and step rows in the schema with the awkward cases a report meets."""
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp("2026-11-01", tz="UTC")
    states = ["COMPLETED", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "PENDING", "RUNNING",
              "NODE_FAIL", "PREEMPTED"]
    rows: list[dict[str, object]] = []

    def maybe(value: object, p: float = 0.1) -> object:
        return None if rng.random() < p else value

    for _ in range(n_jobs):
        job = f"{int(rng.integers(100, 100 + n_jobs))}"  # collisions: requeued jobs listed twice
        if rng.random() < 0.3:
            job += f"_{int(rng.integers(0, 4))}"
        job_id = maybe(job, 0.01)
        raw = maybe(job.split("_")[0] + str(int(rng.integers(0, 3))), 0.05)
        submit = t0 + pd.Timedelta(seconds=int(rng.integers(0, 20 * 86400)))
        eligible = maybe(submit + pd.Timedelta(seconds=int(rng.integers(0, 60))), 0.2)
        state = states[int(rng.integers(len(states)))]
        ran = state not in ("PENDING",) and rng.random() > 0.1
        start = submit + pd.Timedelta(seconds=int(rng.exponential(900))) if ran else None
        elapsed = pd.Timedelta(seconds=int(rng.integers(-50, 7200))) if ran else pd.Timedelta(0)
        wait = (start - (eligible or submit)) if start is not None else None
        rows.append({
            "scheduler": ["slurm", "pbspro", "torque"][int(rng.integers(3))], "cluster": maybe("c1", 0.3),
            "job_id": job_id, "job_id_raw": raw, "step": None, "user": maybe(f"u{int(rng.integers(5))}"),
            "account": maybe(f"a{int(rng.integers(3))}"),
            "partition": maybe(["cpu", "gpu", "debug"][int(rng.integers(3))]),
            "state": state, "exit_code": maybe(int(rng.choice([0, 1, 2, 137, -29, 271])), 0.2),
            "exit_signal": maybe(int(rng.choice([0, 9, 15])), 0.3), "submit_time": maybe(submit, 0.05),
            "eligible_time": eligible,
            "start_time": start, "end_time": (start + elapsed) if start is not None else None, "wait": wait,
            "elapsed": maybe(elapsed, 0.05),
            "time_limit": maybe(pd.Timedelta(hours=float(rng.choice([0.5, 1, 5, 30, 200]))), 0.2),
            "nodes": maybe(int(rng.integers(1, 4))), "cpus": maybe(int(rng.choice([0, 1, 4, 32]))),
            "gpus": maybe(int(rng.choice([0, 0, 1, 4]))), "req_mem_bytes": maybe(int(rng.choice([0, 2**30, 2**34]))),
            "max_rss_bytes": maybe(int(rng.integers(0, 2**33)), 0.7),
            "cpu_time": maybe(pd.Timedelta(seconds=int(rng.integers(-10, 20000))), 0.1),
            "sweep_id": maybe("s1", 0.7), "chunk": maybe(int(rng.integers(0, 3)), 0.7),
        })
        for step in ("batch", "extern", "0")[: int(rng.integers(0, 4))]:
            orphan = rng.random() < 0.1  # a step whose job row is not there, or has another raw id
            rows.append({"scheduler": "slurm", "job_id": f"9{job}" if orphan and rng.random() < 0.5 else job_id,
                         "job_id_raw": raw if not orphan else "77", "step": step,
                         "max_rss_bytes": maybe(int(rng.integers(0, 2**33)), 0.3), "state": state})
    return conform(pd.DataFrame(rows))


@pytest.fixture(scope="module", params=list(REAL))
def real(request: pytest.FixtureRequest) -> pd.DataFrame:
    path, kwargs = REAL[request.param]
    return read_saved(path, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# tests


def test_report_tables_equal_the_reference_on_real_inputs(real):
    assert len(real)
    assert_same_tables(r.report_tables(real), ref_tables(real))
    pd.testing.assert_frame_equal(r.job_rows(real), ref_job_rows(real))


@pytest.mark.parametrize("seed", range(4))
def test_report_tables_equal_the_reference_on_generated_frames(seed):
    df = generated(seed)
    assert df["job_id"].duplicated().any() and df["step"].notna().any()
    assert_same_tables(r.report_tables(df, top=7, tz="Europe/Berlin"), ref_tables(df, top=7, tz="Europe/Berlin"))
    pd.testing.assert_frame_equal(r.job_rows(df), ref_job_rows(df))
    assert [int(m.split()[0]) for m in r.input_warnings(df)] == [n for n in ref_input_warnings(df) if n]


@pytest.mark.parametrize("seed", range(2))
def test_single_tables_and_measures_equal_the_reference(seed):
    df = generated(100 + seed)
    eff = r.efficiency(df)
    pd.testing.assert_frame_equal(eff, r.efficiency(ref_job_rows(df)))
    for by in r.EFFICIENCY_COLUMNS[19:]:
        for n in (0, 1, 3, 50, 10_000):
            pd.testing.assert_frame_equal(r.worst_offenders(eff, n, by), ref_worst(eff, n, by), obj=f"{by} top {n}")
    for keys in (["partition", "weekday"], ["hour"], ["walltime", "gpus"], ["user"]):
        pd.testing.assert_frame_equal(r.queue_wait(df, keys, tz="America/Denver"),
                                      ref_queue_wait(df, keys, tz="America/Denver"))
    pd.testing.assert_frame_equal(r.failures_by_exit(df), ref_failures_by_exit(df))
    pd.testing.assert_frame_equal(r.failures_by_state(df), ref_failures_by_state(df))


@pytest.mark.parametrize("filters", [
    ReportFilters(),
    ReportFilters(users=("u1", "u3"), partitions=("gpu",)),
    ReportFilters(since=pd.Timestamp("2026-11-08", tz="UTC"), until=pd.Timestamp("2026-11-15", tz="UTC")),
    ReportFilters(sweep="s1", accounts=("a0", "a2")),
], ids=["none", "user-partition", "period", "sweep-account"])
def test_filters_equal_the_reference(filters):
    for seed in range(3):
        df = generated(200 + seed)
        got = apply_filters(df, filters)
        pd.testing.assert_frame_equal(got, ref_apply_filters(df, filters))
        assert len(got) < len(df)  # orphan steps go, whatever the filters


def _large_sacct_text(tmp_path: Path, min_bytes: int = 1_300_000) -> tuple[Path, list[str]]:
    """The real testbed capture (header and rows), its rows repeated under new job ids past 1 MiB."""
    lines = (DATA / "slurm" / "testbed" / "sacct_header_X.txt").read_text().splitlines()
    out, k, size = [lines[0]], 0, 0
    while size < min_bytes:
        k += 1
        for line in lines[1:]:
            jid, raw, rest = line.split("|", 2)
            out.append(f"{k}{jid}|{k}{raw}|{rest}")
            size += len(out[-1]) + 1
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(out) + "\n")
    return path, out


def test_large_sacct_text_reads_the_same_as_its_text(tmp_path):
    path, lines = _large_sacct_text(tmp_path)
    assert path.stat().st_size > 1 << 20
    from hpcjobs.accounting.sources.slurm import read_sacct_parsable2

    got = read_saved(path)
    pd.testing.assert_frame_equal(got, read_sacct_parsable2("\n".join(lines[1:]) + "\n", TESTBED_FIELDS))
    assert len(got) == len(lines) - 1


def test_large_sacct_text_error_names_its_last_line(tmp_path):
    path, lines = _large_sacct_text(tmp_path)
    parts = lines[-1].split("|")
    parts[TESTBED_FIELDS.index("ElapsedRaw")] = "99999999999999999999"
    path.write_text("\n".join([*lines[:-1], "|".join(parts)]) + "\n")
    with pytest.raises(ConfigError) as err:
        read_saved(path)
    assert f"{path}:{len(lines)}:" in str(err.value) and "ElapsedRaw: " in str(err.value)  # named as sacct spells it


def test_cli_report_of_a_large_file_matches_the_reference(tmp_path):
    path, _ = _large_sacct_text(tmp_path, min_bytes=1_100_000)
    res = CliRunner().invoke(main, ["report", "--from-file", str(path), "--csv", "--table", "wait_by_hour"])
    assert res.exit_code == 0, res.output
    want = ref_queue_wait(read_saved(path), ["hour"])
    assert res.output.splitlines()[1:] == [
        f"{h},{n},{m.total_seconds()},{p.total_seconds()},{a.total_seconds()},{x.total_seconds()}"
        for h, n, m, p, a, x in want.itertuples(index=False)]


def test_sweep_frame_fate_equals_the_efficiency_of_its_jobs():
    path, kwargs = REAL["slurm-testbed-text"]
    df = read_saved(path, **kwargs)  # type: ignore[arg-type]
    eff = r.efficiency(df)
    points = pd.DataFrame({"point_id": [f"p{i}" for i in range(len(eff))], "index": range(len(eff)),
                           "job_id": eff["job_id"].astype(str), "params": [{"lr": i / 10} for i in range(len(eff))]})
    fate = r.sweep_frame(points, df)
    assert fate["job_id"].astype(str).tolist() == eff["job_id"].astype(str).tolist()
    for column in ("cpu_efficiency", "mem_efficiency", "time_efficiency", "gpu_utilization", "elapsed", "state"):
        pd.testing.assert_series_equal(fate[column], eff[column], check_names=False, check_categorical=False)
    pd.testing.assert_series_equal(fate["max_rss_bytes"], ref_job_rows(df)["max_rss_bytes"], check_names=False)
