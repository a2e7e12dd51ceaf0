"""The in-job GPU sampler reader on real nvidia-smi CSV samples (tests/data/gpu, see SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hpcjobs import accounting as reports
from hpcjobs.accounting.sources.gpu import (
    SAMPLER_FIELDS,
    find_gpu_files,
    gpu_job_summary,
    gpu_summary,
    job_id_from_name,
    read_gpu_samples,
)
from hpcjobs.accounting.sources.slurm import read_sacct_parsable2
from hpcjobs.errors import SchedulerOutputError

GPU = Path(__file__).resolve().parent.parent / "data" / "gpu"
TWO_GPUS = GPU / "tkjunsei-OpenAD_gpu_usage_2gpu_units.csv"
REPEATED = GPU / "AkshayRoyal-gpu-usage_gpu_usage_repeated-header.csv"
MINIMAL = GPU / "shougangu-balance-budget_gpu_usage_15s.csv"
NOUNITS = GPU / "constructed_sampler_nounits_na.csv"
MiB = 1024 * 1024


def test_units_in_header_and_values_two_gpus():
    s = read_gpu_samples(TWO_GPUS)
    assert len(s) == 10
    assert list(s.columns) == ["timestamp", "gpu_index", "name", "utilization_gpu", "utilization_memory",
                               "memory_total_bytes", "memory_used_bytes", "memory_free_bytes"]
    assert str(s["timestamp"].dtype) == "datetime64[ns]" and str(s["gpu_index"].dtype) == "Int64"
    assert str(s["utilization_gpu"].dtype) == "Float64" and str(s["memory_used_bytes"].dtype) == "Int64"
    first = s.iloc[0]
    assert first.timestamp == pd.Timestamp("2024-11-23 12:23:29.950")
    assert first.gpu_index == 0 and first["name"] == "NVIDIA RTX A6000"
    assert first.utilization_gpu == 92 and first.memory_used_bytes == 25073 * MiB
    summary = gpu_summary(s).set_index("gpu_index")
    # GPU 0: 92, 95, 86, 100, 97 %; memory 73, 80, 37, 100, 82 %; GPU 1 idle with 15 MiB used
    assert summary.loc[0, "samples"] == 5
    assert summary.loc[0, "gpu_util_mean"] == pytest.approx(94.0) and summary.loc[0, "gpu_util_max"] == 100
    assert summary.loc[0, "mem_util_mean"] == pytest.approx(74.4)
    assert summary.loc[0, "mem_used_max_bytes"] == 25073 * MiB and summary.loc[0, "mem_total_bytes"] == 49140 * MiB
    assert summary.loc[1, "gpu_util_mean"] == 0 and summary.loc[1, "mem_used_max_bytes"] == 15 * MiB
    assert summary.loc[0, "first"] == pd.Timestamp("2024-11-23 12:23:29.950")
    assert summary.loc[0, "last"] == pd.Timestamp("2024-11-23 12:23:33.978")
    assert pd.isna(summary.loc[0, "power_mean_w"])  # not asked for


def test_header_repeated_every_sample():
    s = read_gpu_samples(REPEATED)
    assert len(s) == 5  # 5 headers skipped
    assert list(s["utilization_gpu"]) == [22, 24, 29, 28, 20]
    assert s["pci_bus_id"].iloc[0] == "00000000:01:00.0" and str(s["pci_bus_id"].dtype) == "string"
    one = gpu_summary(s).iloc[0]
    assert one.gpu_util_mean == pytest.approx(24.6) and one.mem_used_max_bytes == 869 * MiB


def test_no_index_column_gives_one_gpu():
    s = read_gpu_samples(MINIMAL)
    summary = gpu_summary(s)
    assert len(summary) == 1 and summary.loc[0, "samples"] == 6
    assert summary.loc[0, "gpu_util_mean"] == pytest.approx((0 + 0 + 0 + 49 + 38 + 51) / 6)
    assert summary.loc[0, "mem_used_max_bytes"] == 21440 * MiB


def test_nounits_placeholders_and_truncated_last_line():
    s = read_gpu_samples(NOUNITS)
    assert len(s) == 6  # the half-written 7th line is dropped
    assert s["uuid"].iloc[0] == "GPU-4b9a2c1e-0f3d-4e5a-9b7c-1d2e3f405162"
    assert s["power_draw_w"].iloc[0] == pytest.approx(210.55)
    assert s["power_draw_w"].iloc[1] is pd.NA  # [N/A]
    assert s["utilization_gpu"].iloc[3] is pd.NA  # [Not Supported]
    summary = gpu_summary(s).set_index("gpu_index")
    assert summary.loc[1, "gpu_util_mean"] == pytest.approx(15.0)  # (0 + 30) / 2, the NA left out
    assert pd.isna(summary.loc[1, "power_mean_w"])
    assert summary.loc[0, "power_mean_w"] == pytest.approx((210.55 + 250.45 + 230.0) / 3)
    assert summary.loc[0, "mem_used_max_bytes"] == 30000 * MiB


def test_headerless_file_uses_the_sampler_fields():
    lines = NOUNITS.read_text().splitlines()[1:7]
    s = read_gpu_samples("\n".join(lines) + "\n")
    assert list(s.columns) == ["timestamp", "gpu_index", "uuid", "utilization_gpu", "utilization_memory",
                               "memory_used_bytes", "memory_total_bytes", "power_draw_w"]
    assert len(SAMPLER_FIELDS) == 8 and s["utilization_gpu"].iloc[2] == 96
    with pytest.raises(SchedulerOutputError, match="no header"):
        read_gpu_samples("2024/11/23 12:23:29.950, 0, 92\n")


def test_timezone_and_empty():
    s = read_gpu_samples(TWO_GPUS, tz="Europe/Berlin")
    assert s["timestamp"].iloc[0] == pd.Timestamp("2024-11-23 11:23:29.950", tz="UTC")
    assert len(read_gpu_samples("")) == 0
    assert len(gpu_summary(read_gpu_samples(""))) == 0


def test_job_id_from_name():
    # the templates write <output_dir>/<job name>-<job id>.gpu.csv, job id = $SLURM_JOB_ID or $PBS_JOBID
    assert job_id_from_name("train-1234.gpu.csv") == "1234"
    assert job_id_from_name("/logs/lr0.1-run-4711_3.gpu.csv") == "4711_3"
    assert job_id_from_name("arr-4203[2].pbs.gpu.csv") == "4203[2].pbs"
    assert job_id_from_name("x-4215033.casper-pbs.gpu.csv") == "4215033.casper-pbs"
    assert job_id_from_name("notes.gpu.csv") is None


def test_job_summary_and_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "train-10.gpu.csv").write_text(NOUNITS.read_text())
    (tmp_path / "a" / "train-13.gpu.csv").write_text(TWO_GPUS.read_text())
    (tmp_path / "train-13.gpu.csv").write_text(REPEATED.read_text())  # same job, another directory
    (tmp_path / "notes.gpu.csv").write_text("")
    files = find_gpu_files(tmp_path)
    assert {k: [p.name for p in v] for k, v in files.items()} == {
        "10": ["train-10.gpu.csv"], "13": ["train-13.gpu.csv", "train-13.gpu.csv"]}
    summary = gpu_job_summary(files).set_index("job_id")
    # job 10: 92, 96, 86 on GPU 0 and 0, [Not Supported], 30 on GPU 1 → (92+96+86+0+30)/5
    assert summary.loc["10", "gpu_util_mean"] == pytest.approx(60.8)
    assert summary.loc["10", "gpus_seen"] == 2 and summary.loc["10", "samples"] == 6
    assert summary.loc["10", "gpu_mem_max_bytes"] == 30000 * MiB
    # job 13 from two files: 2 GPUs in one, 1 in the other (no uuid: told apart by file)
    assert summary.loc["13", "gpus_seen"] == 3 and summary.loc["13", "samples"] == 15
    assert summary.loc["13", "gpu_util_mean"] == pytest.approx((470 + 0 + 123) / 15)
    assert gpu_job_summary([tmp_path / "a" / "train-10.gpu.csv"]).loc[0, "job_id"] == "10"


def test_gpu_utilisation_reaches_the_efficiency_report():
    testbed = Path(__file__).resolve().parent.parent / "data" / "slurm" / "testbed"
    fields = (testbed / "sacct_header_X.txt").read_text().splitlines()[0].split("|")
    df = read_sacct_parsable2(testbed / "sacct.txt", fields)
    # cap-gpu is job 10; the array task 11_0 ran as JobIDRaw 13, which is its $SLURM_JOB_ID
    gpu = gpu_job_summary({"10": NOUNITS, "13": MINIMAL})
    eff = reports.efficiency(df, gpu=gpu).set_index("job_id")
    assert eff.loc["11_0", "gpu_utilization"] == pytest.approx(0.23)
    assert eff["gpu_utilization"].notna().sum() == 2
    j10 = eff.loc["10"]
    assert j10.gpu_utilization == pytest.approx(0.608)
    assert j10.gpu_hours_wasted == pytest.approx(2 / 3600 * (1 - 0.608))
    assert j10.gpu_mem_max_bytes == 30000 * MiB


def test_pbs_array_subjob_joins_without_server_suffix():
    from hpcjobs.accounting.sources.pbs import read_pbs_accounting

    log = Path(__file__).resolve().parent.parent / "data" / "pbs" / "constructed_accounting_20221014"
    pbs = read_pbs_accounting(log, tz="Europe/Berlin")
    gpu = gpu_job_summary({"4203[2]": MINIMAL, "4200.pbs": TWO_GPUS})
    eff = reports.efficiency(pbs, gpu=gpu).set_index("job_id")
    assert eff.loc["4203[2].pbs", "gpu_utilization"] == pytest.approx(0.23)
    assert eff.loc["4200.pbs", "gpu_utilization"] == pytest.approx(0.47)  # (470 + 0) / 10 samples
    assert eff["gpu_utilization"].notna().sum() == 2
