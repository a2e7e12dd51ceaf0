"""Per-point job shapes: a sweep over resources or partition gives one array per resolved job."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcjobs import process
from hpcjobs.errors import ConfigError
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend
from hpcjobs.sweep.api import run_sweep, sweep_status
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger
from tests.sweep.test_submitter import FakeSlurm

SITES = Path(__file__).resolve().parent.parent / "sites"
GPUSITE = str(SITES / "gpusite.yaml")


def _exp(tmp_path: Path, sweep: str, extra: str = "") -> Path:
    f = tmp_path / "exp.yaml"
    f.write_text(f"name: shapes\ncommand: echo $lr\n{extra}sweep:\n{sweep}")
    return f


def _scripts(folder: Path) -> dict[int, str]:
    return {int(p.name.split(".")[0]): p.read_text() for p in (folder / "scripts").glob("*.sh")}


def _ids(folder: Path, chunk: int) -> list[str]:
    return (folder / "chunks" / f"{chunk}.ids").read_text().split()


def test_a_grid_over_gpus_gives_one_array_per_gpu_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    exp = _exp(tmp_path, "  grid:\n    resources.gpus_per_node: [1, 4]\n    lr: [0.1, 0.01, 0.001]\n",
               "partition: gpu\n")
    prepared = prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")
    assert [s.job.gpus_per_node for s in prepared.shapes] == [1, 4]
    ledger = open_ledger(prepared)
    report = SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")),
                            retry=RetryPolicy(attempts=2, initial=0.01), sleep=lambda s: None).submit()
    assert report.chunks_submitted == 2 and report.points_submitted == 6
    scripts = _scripts(prepared.folder)
    by_id = {p.point_id: p.params for p in prepared.points}
    for chunk, text in scripts.items():
        gres = re.search(r"^#SBATCH --gres=gpu:(\d+)$", text, re.M)
        assert gres, text
        assert re.search(r"^#SBATCH --array=0-2$", text, re.M)
        ids = _ids(prepared.folder, chunk)
        assert {by_id[i]["resources.gpus_per_node"] for i in ids} == {int(gres.group(1))}
    assert sorted(int(re.search(r"gpu:(\d+)", t).group(1)) for t in scripts.values()) == [1, 4]
    # one ledger, one status for both arrays
    st = sweep_status(prepared.sweep_id, root=tmp_path / "sweeps")
    assert st.total == 6 and st.counts == {"COMPLETED": 6}


def test_points_that_resolve_to_the_same_job_share_an_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exp = _exp(tmp_path, "  grid:\n    resources.walltime: ['1:00:00', '60m', '2:00:00']\n    lr: [1, 2]\n")
    prepared = prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")
    assert [s.job.walltime for s in prepared.shapes] == [3600, 7200]
    assert [prepared.shape_of[p.point_id] for p in prepared.points] == [0, 0, 0, 0, 1, 1]


def test_a_sweep_of_plain_parameters_is_one_shape(tmp_path: Path) -> None:
    exp = _exp(tmp_path, "  grid:\n    lr: [1, 2]\n    model.depth: [2, 4]\n")
    prepared = prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")
    assert len(prepared.shapes) == 1 and prepared.shapes[0].job == prepared.job


def test_site_limits_are_checked_per_point_and_name_it(tmp_path: Path) -> None:
    exp = _exp(tmp_path, "  grid:\n    lr: [0.1]\n    resources.gpus_per_node: [2, 8]\n", "partition: gpu\n")
    with pytest.raises(ConfigError) as info:
        prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")
    text = str(info.value)
    assert "point 1 (" in text and "resources.gpus_per_node=8" in text and "gpus_per_node" in text
    assert "point 0" not in text
    exp = _exp(tmp_path, "  grid:\n    partition: [cpu, nosuch]\n")
    with pytest.raises(ConfigError, match=r"point 1 \(.*partition=\"nosuch\""):
        prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")
    exp = _exp(tmp_path, "  grid:\n    resources.cpus_per_task: [1, 0]\n")
    with pytest.raises(ConfigError, match=r"point 1 .*resources.cpus_per_task=0"):
        prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")


@pytest.mark.parametrize("key", ["name", "site", "template"])
def test_keys_that_define_the_sweep_cannot_vary(tmp_path: Path, key: str) -> None:
    exp = _exp(tmp_path, f"  grid:\n    {key}: [a, b]\n")
    with pytest.raises(ConfigError, match=f"'{key}' per point"):
        prepare_sweep(exp, site=GPUSITE, root=tmp_path / "sweeps")


def test_the_local_runner_runs_each_shape_with_its_own_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "exp.yaml"
    f.write_text("name: localshapes\nsite: local\n"
                 "command: 'echo \"$OMP_NUM_THREADS $lr\" > \"$HPCJOBS_RUN_DIR/threads.txt\"'\n"
                 "sweep:\n  grid:\n    resources.cpus_per_task: [1, 2]\n    lr: [1, 2]\n")
    prepared, report = run_sweep(f, root=tmp_path / "sweeps", workers=2)
    assert report.chunks_submitted == 2 and report.points_submitted == 4
    for p in prepared.points:
        threads, lr = (prepared.folder / "points" / p.point_id / "threads.txt").read_text().split()
        assert int(threads) == p.params["resources.cpus_per_task"] and int(lr) == p.params["lr"]
