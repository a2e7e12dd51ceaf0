"""Packed sweeps (``pack:``): the schema, the rendered script, the ledger's per-point states from exit files.

The real-Slurm test (12 points packed 4 per job, one job killed mid-way, resubmit) is
``tests/integration/test_pack_slurm.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcjobs import states
from hpcjobs.cli import main
from hpcjobs.config.pack import Pack, pack_share_problems
from hpcjobs.config.sweep import SweepSpec
from hpcjobs.errors import ConfigError
from hpcjobs.render.pack import exit_file_name
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.sweep.ledger.store import Ledger, SweepMeta, experiment_sha256
from hpcjobs.sweep.pack import point_outcome, read_exit, refine_packed, tasks_for
from hpcjobs.sweep.points.expand import expand
from hpcjobs.sweep.points.point import Point
from hpcjobs.sweep.prepare import chunk_script_text, prepare_sweep, render_packed, write_chunk_file

ROOT = Path(__file__).resolve().parents[2]
SITES = ROOT / "tests" / "sites"


def _experiment(folder: Path, pack: str, *, extra: str = "", n: int = 12, site: str = "hpctest") -> Path:
    f = folder / "exp.yaml"
    f.write_text(f"name: packed\nsite: {site}\n"
                 f"resources: {{cpus_per_task: 4, walltime: 10m{extra}}}\n"
                 'command: echo "x=$X"\n'
                 f"pack: {pack}\n"
                 f"sweep:\n  grid:\n    X: {list(range(n))}\n")
    return f


@pytest.fixture(autouse=True)
def _test_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCJOBS_SITE_PATH", str(SITES))


# ------------------------------------------------------------------------------------------ schema

def test_pack_model_modes() -> None:
    assert (Pack(per_node=4).mode, Pack(per_node=4).size) == ("per_node", 4)
    assert (Pack(sequential=3).mode, Pack(sequential=3).size) == ("sequential", 3)


@pytest.mark.parametrize(("pack", "message"), [
    ("{}", "give exactly one of 'per_node' or 'sequential'"),
    ("{per_node: 2, sequential: 2}", "give exactly one of 'per_node' or 'sequential'"),
    ("{per_node: 0}", "greater than 0"),
    ("{per_nodes: 4}", "per_nodes"),
    ("4", "pack"),
])
def test_bad_pack_is_a_located_error(tmp_path: Path, pack: str, message: str) -> None:
    exp = _experiment(tmp_path, pack)
    result = CliRunner().invoke(main, ["render", str(exp)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert f"{exp}:5" in result.output  # file:line of the pack key


def test_gpus_not_divisible_names_the_key_and_line(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "{per_node: 4}", extra=", gpus_per_node: 2", site="gpusite")
    result = CliRunner().invoke(main, ["render", str(exp)])
    assert result.exit_code == 2, result.output
    assert "2 GPU(s) per node cannot be split evenly among 4 points" in result.output
    assert "pack.per_node" in result.output and f"{exp}:5" in result.output


def test_cpus_not_divisible_refused(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "{per_node: 3}")
    with pytest.raises(ConfigError) as err:
        render_packed(exp, root=tmp_path / "sweeps")
    assert "4 CPU(s) cannot be split evenly among 3 points" in str(err.value)


def test_share_problems() -> None:
    problems = pack_share_problems(Pack(per_node=2), nodes=2, cpus=4, gpus=2, launcher=None)
    assert problems == [("pack.per_node", "per_node packs points on one node; resources.nodes is 2")]
    assert pack_share_problems(Pack(sequential=3), nodes=2, cpus=1, gpus=1, launcher=None) == []


def test_sequential_needs_no_split(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "{sequential: 5}")
    assert render_packed(exp, root=tmp_path / "sweeps") is not None


def test_pack_with_a_launcher_is_refused(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: packed\nsite: hpctest\nlaunch: {launcher: srun, program: ./a.out}\n"
                   "pack: {sequential: 2}\nsweep:\n  grid:\n    X: [1, 2]\n")
    result = CliRunner().invoke(main, ["render", str(exp)])
    assert result.exit_code == 2 and "pack cannot be combined with launch" in result.output


def test_unset_pack_keeps_sweep_ids(tmp_path: Path) -> None:
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.sweep.identity import make_sweep_id

    plain = Experiment.model_validate({"name": "a", "command": "true"})
    packed = Experiment.model_validate({"name": "a", "command": "true", "pack": {"per_node": 2}})
    assert make_sweep_id(plain, [], "s") == "a-" + make_sweep_id(plain, [], "s").split("-")[1]
    assert make_sweep_id(plain, [], "s") != make_sweep_id(packed, [], "s")


# ------------------------------------------------------------------------------------------ render

def test_render_shows_the_packed_slurm_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exp = _experiment(tmp_path, "{per_node: 4}", extra=", memory: 4G")
    result = CliRunner().invoke(main, ["render", str(exp)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "#SBATCH --array=0-2" in text  # 12 points packed 4 per task
    assert ("srun --exact --export=ALL --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=1024M "
            '--job-name="$3" bash -c hpcjobs_point &') in text
    assert "hpcjobs_point() (" in text and "export -f hpcjobs_point" in text
    assert 'echo "x=$X"' in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_render_of_an_unpacked_experiment_is_unchanged(tmp_path: Path) -> None:
    exp = tmp_path / "plain.yaml"
    exp.write_text("name: plain\nsite: hpctest\ncommand: 'true'\n")
    assert render_packed(exp) is None


def test_tasks_for() -> None:
    assert [tasks_for(n, 4) for n in (1, 4, 5, 12, 13)] == [1, 1, 2, 3, 4]


# ------------------------------------------------------------------------------------------ the script runs

def _run_task(tmp_path: Path, pack: str, command: str, task: int, n: int = 6) -> tuple[int, Path, list[str]]:
    """Prepare a PBS sweep of ``n`` points, write chunk 0's files, run array task ``task`` with bash here."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: packrun\nsite: pbstest\nresources: {{cpus_per_task: 2, walltime: 10m}}\n"
                   f"command: {command}\npack: {pack}\nsweep:\n  grid:\n    X: {list(range(n))}\n")
    prepared = prepare_sweep(exp, root=tmp_path / "sweeps", submit_dir=tmp_path)
    ids = [p.point_id for p in prepared.points]
    write_chunk_file(prepared, 0, ids)
    script = tmp_path / "task.sh"
    script.write_text(chunk_script_text(prepared, 0, n, None, "ab" * 8))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PBS_", "SLURM_", "CUDA_"))}
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env={**env, "PBS_ARRAY_INDEX": str(task)},
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, prepared.folder, ids


def test_packed_task_runs_its_points_with_their_own_folders_and_exit_files(tmp_path: Path) -> None:
    command = "'echo \"x=$X cpus=$OMP_NUM_THREADS\"; [ \"$X\" != 5 ]'"
    rc, folder, ids = _run_task(tmp_path, "{per_node: 2}", command, task=2)
    assert rc == 1  # point 5 failed
    for i, pid in enumerate(ids):
        run = folder / "points" / pid
        if i < 4:
            assert not run.exists()  # other tasks' points
            continue
        assert (run / "stdout.log").read_text() == f"x={i} cpus=1\n"
        assert read_exit(run, "ab" * 8) == (0 if i == 4 else 1)
    rc, folder, ids = _run_task(tmp_path, "{per_node: 2}", command, task=0)
    assert rc == 0
    assert [read_exit(folder / "points" / p, "ab" * 8) for p in ids[:2]] == [0, 0]


def test_sequential_task_runs_points_one_after_another(tmp_path: Path) -> None:
    log = '\"$HPCJOBS_SWEEP_DIR/order.log\"'
    command = f"'echo \"start $X\" >> {log}; sleep 0.2; echo \"end $X\" >> {log}'"
    rc, folder, ids = _run_task(tmp_path, "{sequential: 3}", command, task=1)
    assert rc == 0
    lines = [ln.split()[:2] for ln in (folder / "order.log").read_text().splitlines()]
    assert lines == [["start", "3"], ["end", "3"], ["start", "4"], ["end", "4"], ["start", "5"], ["end", "5"]]
    assert all(read_exit(folder / "points" / p, "ab" * 8) == 0 for p in ids[3:])


# ------------------------------------------------------------------------------------------ ledger mapping

@pytest.mark.parametrize(("task", "code", "exit_file", "expected"), [
    (states.CANCELLED, None, 0, (states.COMPLETED, 0)),
    (states.TIMEOUT, None, 0, (states.COMPLETED, 0)),
    (states.CANCELLED, None, None, (states.CANCELLED, None)),
    (states.TIMEOUT, None, None, (states.TIMEOUT, None)),
    (states.CANCELLED, None, 143, (states.CANCELLED, 143)),   # killed by the job's end
    (states.FAILED, 1, 3, (states.FAILED, 3)),
    (states.COMPLETED, 0, 2, (states.FAILED, 2)),
    (states.COMPLETED, 0, None, (states.FAILED, 0)),           # the packed script always writes one
    (states.RUNNING, None, None, (states.RUNNING, None)),
    (states.RUNNING, None, 0, (states.COMPLETED, 0)),
])
def test_point_outcome(task: str, code: int | None, exit_file: int | None, expected: tuple[str, int | None]) -> None:
    state, _raw, got = point_outcome(task, task, code, exit_file)
    assert (state, got) == expected


def _points(n: int) -> list[Point]:
    return expand(SweepSpec.model_validate({"grid": {"i": list(range(n))}}))


def test_killed_task_keeps_finished_points_and_resubmit_takes_the_rest(tmp_path: Path) -> None:
    meta = SweepMeta("pk-1", "exp.yaml", experiment_sha256("x"), "s", "slurm", {"pack": {"per_node": 4}})
    folder = tmp_path / "pk-1"
    with Ledger.create(folder, meta, _points(12)) as ledger:
        ids = [p.point_id for p in ledger.points()]
        token = ledger.plan_chunk(ids, 0, pack=4)
        ledger.mark_submitted(token, "77")
        assert [p.array_index for p in ledger.points()] == [0] * 4 + [1] * 4 + [2] * 4
        # task 0 done, task 1 cancelled after two of its points ended, task 2 still running one point done
        for i in (0, 1, 2, 3, 4, 5, 8):
            run = folder / "points" / ids[i]
            run.mkdir(parents=True)
            (run / exit_file_name(token)).write_text("0\n")
        records = [JobStatus("77_0", states.COMPLETED, "COMPLETED", "77", 0, exit_code=0),
                   JobStatus("77_1", states.CANCELLED, "CANCELLED by 0", "77", 1),
                   JobStatus("77_2", states.RUNNING, "RUNNING", "77", 2)]
        ledger.record_status(records)
        assert refine_packed(ledger, folder, [token]) == 4 + 2 + 1  # exit-0 points marked, 77_2's first done
        got = {p.point_id: p.state for p in ledger.points()}
        assert [got[i] for i in ids] == ([states.COMPLETED] * 6 + [states.CANCELLED] * 2
                                         + [states.COMPLETED] + [states.RUNNING] * 3)
        assert ledger.check_invariants() == []
        assert ledger.summary() == {states.COMPLETED: 7, states.CANCELLED: 2, states.RUNNING: 3}
        # the same poll again: the task's state is written over its points, the exit files win again
        ledger.record_status(records)
        refine_packed(ledger, folder, [token])
        assert ledger.summary() == {states.COMPLETED: 7, states.CANCELLED: 2, states.RUNNING: 3}
        # an exit file of an earlier attempt (another token) is not this attempt's
        assert read_exit(folder / "points" / ids[6], token) is None


def test_a_requeued_task_does_not_run_its_completed_points_again(tmp_path: Path) -> None:
    command = "'echo ran >> \"$HPCJOBS_RUN_DIR/count\"; [ ! -e \"$HPCJOBS_SWEEP_DIR/fail-$X\" ]'"
    (tmp_path / "sweeps").mkdir()
    rc, folder, ids = _run_task(tmp_path, "{per_node: 2}", command, task=0)
    assert rc == 0
    (folder / "fail-1").touch()
    (folder / "points" / ids[1] / exit_file_name("ab" * 8)).write_text("1\n")  # as if point 1 had failed
    rc, folder, ids = _run_task(tmp_path, "{per_node: 2}", command, task=0)  # the same job, requeued
    assert rc == 1
    assert (folder / "points" / ids[0] / "count").read_text() == "ran\n"  # completed: not run again
    assert (folder / "points" / ids[1] / "count").read_text() == "ran\nran\n"
    assert read_exit(folder / "points" / ids[1], "ab" * 8) == 1
