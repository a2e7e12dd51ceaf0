"""Jobs of several nodes on Docker Swarm, offline: the rendered script (golden), the service's name,
what is refused, and the status of captured ``docker service ps`` output (``tests/data/swarm/``, see
SOURCES.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpcjobs import states as st
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.swarm import formats as fmt
from hpcjobs.schedulers.swarm.backend import SwarmBackend
from hpcjobs.states import JobTag

TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data" / "swarm"
SITE = str(TESTS / "sites" / "swarm-dist.yaml")
GOLDEN = TESTS / "golden" / "distributed" / "swarm-dist"
TORCHRUN = ("name: ddp\nresources: {nodes: 2, tasks_per_node: 2, cpus_per_task: 1, memory: 1G, walltime: 10m}\n"
            "launch: {launcher: torchrun, program: allreduce.py, args: [--steps, '3']}\n")
TF = "name: tfw\nresources: {nodes: 2, cpus_per_task: 1, walltime: 10m}\nlaunch: {launcher: tf, program: train.py}\n"
PLAIN = "name: plain\nresources: {nodes: 2, cpus_per_task: 1}\ncommand: python train.py\n"


def _render(tmp_path: Path, text: str, site: str = SITE) -> str:
    exp = tmp_path / "e.yaml"
    exp.write_text(text)
    return render_experiment(exp, site=site).text


@pytest.mark.parametrize(("name", "text"), [("ddp-torchrun", TORCHRUN), ("tf-workers", TF), ("plain", PLAIN)])
def test_golden_scripts(name: str, text: str, tmp_path: Path, update_golden: bool) -> None:
    script = _render(tmp_path, text)
    golden = GOLDEN / f"{name}.sh"
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
        return
    assert golden.exists(), f"no golden script {golden}; run pytest {__file__} --update-golden"
    assert script == golden.read_text(), f"{golden} differs; if intended, regenerate with --update-golden"
    assert subprocess.run(["bash", "-n", str(golden)], check=False).returncode == 0
    if shutil.which("shellcheck"):
        res = subprocess.run(["shellcheck", "-S", "warning", str(golden)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stdout


def test_two_tasks_of_one_point_on_the_network(tmp_path: Path) -> None:
    script = _render(tmp_path, TORCHRUN)
    assert "#SWARM --replicas=2\n" in script and "#SWARM --network=hpcjobs-testbed-net\n" in script
    assert "#SWARM --label=hpcjobs.nodes=2\n" in script
    assert "--reserve-cpu" not in script and "#SWARM --limit-cpu=2\n" in script  # see swarm_directives
    assert '--local-addr="$HPCJOBS_LOCAL_ADDR"' in script
    path = tmp_path / "s" / "scripts" / "ddp.0123456789abcdef.sh"
    path.parent.mkdir(parents=True)
    path.write_text(script)
    argv = SwarmBackend().submit_argv_in(path, SubmitOptions(comment="hpcjobs:ddp:0:0123456789abcdef"), tmp_path)
    name = argv[argv.index("--name") + 1]
    assert name == "ddp-x-0-2n-0123456789abcdef"
    assert fmt.nodes_in_name(name) == 2 and fmt.tasks_in_name(name) == 1
    parsed = fmt.parse_service_name(name, "ddp")
    assert parsed is not None and parsed.tasks == 1 and parsed.tag == JobTag("ddp", 0, "0123456789abcdef")


def test_single_node_names_are_unchanged() -> None:
    assert fmt.service_name(JobTag("e-1a2b3c4d", 2, "0123456789abcdef"), 6) == "e-1a2b3c4d-2-6-0123456789abcdef"
    assert fmt.nodes_in_name("e-1a2b3c4d-2-6-0123456789abcdef") == 1


@pytest.mark.parametrize(("text", "match"), [
    ("name: a\nresources: {nodes: 2}\ncommand: 'true'\nsweep: {grid: {x: [1, 2]}}\n", "single job"),
    ("name: a\nresources: {nodes: 2}\nlaunch: {launcher: deepspeed, program: t.py}\n", "ssh or an MPI"),
    ("name: a\nresources: {nodes: 2}\nlaunch: {launcher: mpi, program: t.py}\n", "ssh or an MPI"),
])
def test_what_is_refused(text: str, match: str, tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text(text)
    if "sweep:" in text:
        from hpcjobs.render.script import render_job
        from hpcjobs.sweep.prepare import array_job_for_chunk, prepare_sweep

        prepared = prepare_sweep(exp, site=SITE, root=tmp_path / "sw", submit_dir=tmp_path)
        with pytest.raises(ConfigError, match=match):
            render_job(array_job_for_chunk(prepared, 0, 2, None))
        return
    with pytest.raises(ConfigError, match=match):
        render_experiment(exp, site=SITE)


def test_several_nodes_need_a_network(tmp_path: Path) -> None:
    site = tmp_path / "nonet.yaml"
    site.write_text(Path(SITE).read_text().replace("  networks: [hpcjobs-testbed-net]\n", ""))
    with pytest.raises(ConfigError, match="overlay network"):
        _render(tmp_path, PLAIN, site=str(site))


def test_one_node_launcher_runs_in_one_task(tmp_path: Path) -> None:
    script = _render(tmp_path, "name: one\nresources: {tasks_per_node: 2, cpus_per_task: 1}\n"
                                "launch: {launcher: torchrun, program: t.py}\n", site="swarm-testbed")
    assert "#SWARM --replicas=1\n" in script and "container rendezvous" not in script


# ---------------------------------------------------------------- status of captured output

JOB = "dok-97477b03-0-2n-7483b34884848a26"
FAILED_JOB = "dfail-fa5476df-0-2n-cffc8c38aa93d8d5"


@pytest.mark.parametrize(("name", "state", "raw", "code"), [
    ("ps-2-node-starting.jsonl", st.PENDING, "0 of 2 ranks started", None),
    ("ps-2-node-running.jsonl", st.RUNNING, "2 of 2 ranks running, 0 completed", None),
    ("ps-2-node-complete.jsonl", st.COMPLETED, "all 2 ranks completed", 0),
])
def test_a_distributed_job_is_one_record(name: str, state: str, raw: str, code: int | None) -> None:
    [rec] = fmt.parse_service_ps((DATA / name).read_text())
    assert (rec.job_id, rec.state, rec.state_raw, rec.exit_code) == (JOB, state, raw, code)
    assert rec.array_job_id is None and rec.array_task_id is None


def test_a_failed_rank_fails_the_job_although_swarm_started_its_slot_again() -> None:
    # slot 1 failed with exit 5; Swarm's new task in slot 1 found the claim and exited 0
    [rec] = fmt.parse_service_ps((DATA / "ps-2-node-rank1-failed.jsonl").read_text())
    assert (rec.job_id, rec.state, rec.exit_code) == (FAILED_JOB, st.FAILED, 5)
    assert rec.state_raw == "rank 1 of 2: Failed"


# ---------------------------------------------------------------- the rendezvous, run in bash


def _rendezvous(tmp_path: Path) -> Path:
    """The rendered rendezvous block of the 2-node golden script, as a script that prints what it exported."""
    text = (GOLDEN / "plain.sh").read_text()
    block = text[text.index("# >>> hpcjobs container rendezvous"):text.index("# <<< hpcjobs container rendezvous")]
    path = tmp_path / "job.sh"
    path.write_text("set -eo pipefail\n" + block +
                    'echo "$RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT|$HPCJOBS_HOST_LIST|$HPCJOBS_LOCAL_ADDR"\n')
    return path


def test_two_ranks_find_each_other(tmp_path: Path) -> None:
    script = _rendezvous(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HPCJOBS_JOB_ID": "svc", "HPCJOBS_RDZV_TIMEOUT": "20"}
    procs = [subprocess.Popen(["bash", str(script)], env={**env, "HPCJOBS_TASK_INDEX": str(rank),
                                                          "HPCJOBS_POD_IP": f"10.9.0.{rank + 5}"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (1, 0)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == "1 2 10.9.0.5 29500|10.9.0.5 10.9.0.6|10.9.0.6\n"
    assert outs[1][0] == "0 2 10.9.0.5 29500|10.9.0.5 10.9.0.6|10.9.0.5\n"
    assert sorted(p.name for p in (tmp_path / "job.sh.rdzv-svc").iterdir()) == ["host-0", "host-1"]


def test_a_rank_alone_stops_after_the_bounded_wait(tmp_path: Path) -> None:
    script = _rendezvous(tmp_path)
    res = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False,
                         env={"PATH": "/usr/bin:/bin", "HPCJOBS_JOB_ID": "svc", "HPCJOBS_RDZV_TIMEOUT": "1",
                              "HPCJOBS_TASK_INDEX": "1", "HPCJOBS_POD_IP": "10.9.0.6"})
    assert res.returncode == 3
    assert "rank 1: only 1 of 2 ranks wrote their address" in res.stderr and "within 1 s" in res.stderr


def test_every_task_runs_at_once_whatever_max_parallel_says(tmp_path: Path) -> None:
    site = tmp_path / "one-at-a-time.yaml"
    site.write_text(Path(SITE).read_text().replace("max_parallel: 4", "max_parallel: 1"))
    script = _render(tmp_path, PLAIN, site=str(site))
    assert "#SWARM --replicas=2\n" in script and "#SWARM --max-concurrent=2\n" in script


def test_only_multi_node_jobs_reserve_no_cpus(tmp_path: Path) -> None:
    one = "name: one\nresources: {cpus_per_task: 1}\ncommand: 'true'\n"
    assert "#SWARM --reserve-cpu=1\n" in _render(tmp_path, one)
    two = _render(tmp_path, PLAIN)
    assert "--reserve-cpu" not in two and "#SWARM --limit-cpu=1\n" in two
