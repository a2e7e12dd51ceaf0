"""A sweep "from a laptop": every command over SSH to the Slurm testbed's login user, nothing run here.

The laptop is this machine with its scheduler commands shadowed by ones that fail (:func:`laptop_path`);
the login node is the SSH testbed's user ``hpcssh``, whose jobs the real Slurm testbed runs. The ledger
stays in the laptop's folder; the run folders come back with ``hpcjobs results``, ``logs`` and
``load_sweep``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_testbed import slurm_staging
from ssh.real_ssh import (
    LOGIN_USER,
    ROOT,
    SLURM_OVER_SSH,
    SSH_CONFIG,
    cut_connection_trials,
    hpcjobs_cli,
    laptop_path,
    remote,
    remote_site,
)

pytestmark = pytest.mark.ssh

BASE_SITE = ROOT / "tests" / "sites" / "hpctest.yaml"
HOSTILE = "$(touch /tmp/hpcjobs-ssh-hostile-ran)`touch /tmp/hpcjobs-ssh-hostile-ran`'\"; touch x"

EXPERIMENT = """\
name: {name}
resources: {{cpus_per_task: 1, memory: 100M, walltime: 5m}}
command: |
  printf '{{"acc": %s, "tag": "%s"}}\\n' "$acc" "$tag" > "$HPCJOBS_RUN_DIR/metrics.json"
  echo "acc=$acc on $(hostname) as $(id -un)"
results:
  - {{file: metrics.json}}
sweep:
  zip: {{acc: [0.5, 0.75, 0.25], tag: [plain, {hostile}, "caf\\u00e9"]}}
"""


@pytest.fixture
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on the "laptop", with no scheduler command on PATH (in this process and the CLI's).

    Held with the Slurm testbed whole: a test of the Slurm suite (another pytest process) that stages an
    accounting outage waits for it, and it for that test (:func:`real_testbed.slurm_staging`).
    """
    with slurm_staging(exclusive=False):
        SLURM_OVER_SSH.require()
        yield _laptop(tmp_path, monkeypatch)


def _laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "laptop"
    folder.mkdir()
    monkeypatch.setenv("PATH", laptop_path(tmp_path))
    monkeypatch.chdir(folder)
    return folder


def wait_finished(sweep: str, cwd: Path, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        out = hpcjobs_cli(["status", sweep, "--json"], cwd=cwd, env={})
        assert out.returncode == 0, out.stderr
        status = json.loads(out.stdout)
        if status["total"] and status["finished"] == status["total"]:
            return status
        assert time.monotonic() < deadline, f"sweep {sweep} not finished after {timeout} s: {status['counts']}"
        time.sleep(2)


def test_a_sweep_from_the_laptop_runs_there_and_its_results_come_back(laptop: Path) -> None:
    site, workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-slurm")
    (laptop / "exp.yaml").write_text(EXPERIMENT.format(name="from-laptop", hostile=json.dumps(HOSTILE)))
    remote(["rm", "-f", "/tmp/hpcjobs-ssh-hostile-ran"], check=False)

    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    report = json.loads(sub.stdout)
    sweep = report["sweep_id"]
    assert report["points_submitted"] == 3, report
    again = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert again.returncode == 0 and json.loads(again.stdout)["points_submitted"] == 0, again.stderr

    status = wait_finished(sweep, laptop)
    assert status["counts"] == {"COMPLETED": 3}, status

    # the ledger is here; the run folders are there until asked for
    ledger_folder = laptop / "hpcjobs-sweeps" / sweep
    assert (ledger_folder / "ledger.sqlite").is_file()
    assert not (ledger_folder / "points").exists()
    listing = remote(["find", workdir, "-name", "metrics.json"]).stdout.split()
    assert len(listing) == 3, listing

    res = hpcjobs_cli(["results", sweep, "--json", "--sort", "acc"], cwd=laptop, env={})
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["acc"] for r in rows] == [0.25, 0.5, 0.75]
    assert {r["tag"] for r in rows} == {"plain", HOSTILE, "caf\u00e9"}
    assert all(r["state"] == "COMPLETED" for r in rows)

    logs = hpcjobs_cli(["logs", sweep, "--index", "0"], cwd=laptop, env={})
    assert logs.returncode == 0, logs.stderr
    assert f"as {LOGIN_USER}" in logs.stdout

    from hpcjobs.analysis import load_sweep

    frame = load_sweep(sweep)
    assert sorted(frame["acc"].tolist()) == [0.25, 0.5, 0.75]
    assert str(frame["acc"].dtype) == "Float64"
    # the hostile value stayed data on the login node too
    assert remote(["test", "-e", "/tmp/hpcjobs-ssh-hostile-ran"], check=False).returncode == 1
    assert remote(["test", "-e", f"{workdir}/x"], check=False).returncode == 1


def test_a_changed_host_key_stops_before_anything_is_sent(laptop: Path) -> None:
    client = laptop.parent / "client"
    shutil.copytree(SSH_CONFIG.parent, client)
    config = (client / "ssh_config").read_text().replace(str(SSH_CONFIG.parent), str(client))
    (client / "ssh_config").write_text(config)
    known = (client / "known_hosts").read_text().split()
    other = laptop.parent / "other_key"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    known_line = f"{known[0]} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n"
    (client / "known_hosts").write_text(known_line)
    site, workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-badkey")
    text = site.read_text().replace(str(SSH_CONFIG), str(client / "ssh_config"))
    site.write_text(text)
    (laptop / "exp.yaml").write_text(EXPERIMENT.format(name="bad-key", hostile='"x"'))

    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site)], cwd=laptop, env={})
    assert sub.returncode == 1, sub.stdout + sub.stderr
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in sub.stderr or "Host key verification failed" in sub.stderr
    assert not (laptop / "hpcjobs-sweeps").exists() or not any((laptop / "hpcjobs-sweeps").rglob("ledger.sqlite"))
    assert remote(["test", "-e", workdir], check=False).returncode == 1


#: Jobs that wait two hours to start: every task stays in the queue to be counted.
HELD = {"directives": ["--begin=now+2hours"]}


def tagged_tasks(sweep: str) -> dict[str, int]:
    """Array tasks per submission token in the queue for ``sweep``: the scheduler's own count (``squeue -r``)."""
    out = remote(["squeue", "--noheader", "-r", "-u", LOGIN_USER, "--format=%i|%k"]).stdout
    tasks: dict[str, int] = {}
    for line in out.splitlines():
        _job, _, comment = line.partition("|")
        parts = comment.strip().split(":")
        if len(parts) == 4 and parts[0] == "hpcjobs" and parts[1] == sweep:
            tasks[parts[3]] = tasks.get(parts[3], 0) + 1
    return tasks


def test_a_connection_killed_during_submission_never_duplicates_or_loses_a_point(laptop: Path) -> None:
    """20 trials: the master killed before, during or after a session, or the sshd serving it."""
    cut_connection_trials(laptop, BASE_SITE, trials=20, held=HELD, tasks_of=tagged_tasks, name="cut")


def test_a_packed_sweep_from_the_laptop_takes_each_points_exit_status_there(laptop: Path) -> None:
    """Packed points (several a task) end by the exit files they write on the login node, read in one session."""
    site, _workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-packed")
    (laptop / "exp.yaml").write_text("name: packed-laptop\nresources: {walltime: 5m}\n"
                                     "command: test \"$x\" != 3\npack: {sequential: 3}\n"
                                     "sweep:\n  grid: {x: [1, 2, 3, 4, 5, 6]}\n")
    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    status = wait_finished(json.loads(sub.stdout)["sweep_id"], laptop)
    assert status["counts"] == {"COMPLETED": 5, "FAILED": 1}, status


def test_the_remote_option_names_the_login_node(laptop: Path) -> None:
    """``--remote HOST`` over a site whose remote: names another host: the option's host is the one reached."""
    site, _workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-option")
    site.write_text(site.read_text().replace("host: hpcjobs-ssh-testbed", "host: login.invalid"))
    (laptop / "exp.yaml").write_text(EXPERIMENT.format(name="option", hostile='"x"'))
    dry = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--dry-run", "--show-script"], cwd=laptop,
                      env={"HPCJOBS_REMOTE": "hpcjobs-ssh-testbed"})
    assert dry.returncode == 0, dry.stderr
    assert f"HPCJOBS_SWEEP_DIR=/home/{LOGIN_USER}/hpcjobs-tests/" in dry.stdout
    bad = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--dry-run", "--remote", "-oProxyCommand=x"],
                      cwd=laptop, env={})
    assert bad.returncode == 2 and "host" in bad.stderr


def test_ls_polls_a_laptops_sweep_on_its_login_node(laptop: Path) -> None:
    site, _workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-ls")
    (laptop / "exp.yaml").write_text(EXPERIMENT.format(name="ls-laptop", hostile='"x"'))
    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    listing = hpcjobs_cli(["ls", "--json"], cwd=laptop, env={})
    assert listing.returncode == 0 and "ran on the laptop" not in listing.stdout + listing.stderr, listing.stderr
    summary = json.loads(listing.stdout)
    assert "could not ask" not in listing.stderr, listing.stderr
    assert summary, listing.stdout


def test_a_single_job_from_the_laptop(laptop: Path) -> None:
    """``hpcjobs submit``: the script sent, submitted there once, its state and logs from the laptop."""
    site, workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-submit")
    (laptop / "job.yaml").write_text("name: one-job\nresources: {walltime: 5m}\n"
                                     "command: echo \"hello from $(id -un)\"\n")
    sub = hpcjobs_cli(["submit", "job.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    job = json.loads(sub.stdout)
    again = hpcjobs_cli(["submit", "job.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert again.returncode == 0 and json.loads(again.stdout)["job_id"] == job["job_id"], again.stderr
    deadline = time.monotonic() + 120
    while True:
        status = hpcjobs_cli(["status", job["job_id"], "--json"], cwd=laptop, env={})
        assert status.returncode == 0, status.stderr
        if json.loads(status.stdout)["finished"]:
            break
        assert time.monotonic() < deadline, status.stdout
        time.sleep(2)
    assert json.loads(status.stdout)["counts"] == {"COMPLETED": 1}, status.stdout
    logs = hpcjobs_cli(["logs", job["job_id"]], cwd=laptop, env={})
    assert logs.returncode == 0 and f"hello from {LOGIN_USER}" in logs.stdout, logs.stdout + logs.stderr
    assert remote(["ls", f"{workdir}/hpcjobs-logs/scripts"]).stdout.strip()


def test_the_sites_sync_list_sends_the_code_the_jobs_run(laptop: Path) -> None:
    """``remote.sync``: the laptop's ``train.py`` and ``src/`` reach the login node's workdir before the first job.

    The jobs import ``src/model.py`` and run ``train.py`` there; what ``sync_exclude`` names (``__pycache__``,
    a checkpoint pattern) and what the list leaves out (``notes.txt``) stay on the laptop. A second run with a
    changed ``src/model.py`` sends the new version, and its jobs see it.
    """
    site, workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-sync", extra={})
    doc = site.read_text().replace(f"  workdir: {workdir}\n", f"  workdir: {workdir}\n  sync: [train.py, src/]\n"
                                   "  sync_exclude: [__pycache__, '*.ckpt']\n")
    site.write_text(doc)
    (laptop / "src" / "__pycache__").mkdir(parents=True)
    (laptop / "src" / "model.py").write_text("VERSION = 1\n")
    (laptop / "src" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (laptop / "src" / "big.ckpt").write_bytes(b"\0" * 1024)
    (laptop / "notes.txt").write_text("stays here\n")
    (laptop / "train.py").write_text(
        "import json, os, sys\nsys.path.insert(0, 'src')\nimport model\n"
        "json.dump({'version': model.VERSION, 'x': int(os.environ['x'])},\n"
        "          open(os.path.join(os.environ['HPCJOBS_RUN_DIR'], 'metrics.json'), 'w'))\n")
    # no __pycache__ of the jobs' own there: the one looked for is the laptop's, which must not be sent
    exp = ("name: {name}\nresources: {{cpus_per_task: 1, memory: 100M, walltime: 5m}}\ncommand: python3 train.py\n"
           "environment: {{PYTHONDONTWRITEBYTECODE: '1'}}\n"
           "results:\n  - {{file: metrics.json}}\nsweep:\n  grid: {{x: [1, 2]}}\n")
    (laptop / "exp.yaml").write_text(exp.format(name="synced"))
    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    sweep = json.loads(sub.stdout)["sweep_id"]
    there = set(remote(["find", workdir, "-maxdepth", "2", "-not", "-path", "*/hpcjobs-sweeps*"]).stdout.split())
    assert {f"{workdir}/train.py", f"{workdir}/src/model.py"} <= there, there
    assert not {f"{workdir}/notes.txt", f"{workdir}/src/big.ckpt", f"{workdir}/src/__pycache__"} & there, there
    assert wait_finished(sweep, laptop)["counts"] == {"COMPLETED": 2}
    rows = json.loads(hpcjobs_cli(["results", sweep, "--json"], cwd=laptop, env={}).stdout)
    assert sorted((r["x"], r["version"]) for r in rows) == [(1, 1), (2, 1)], rows

    (laptop / "src" / "model.py").write_text("VERSION = 2\n")
    (laptop / "exp.yaml").write_text(exp.format(name="synced-again"))
    sub = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site), "--json"], cwd=laptop, env={})
    assert sub.returncode == 0, sub.stderr
    sweep = json.loads(sub.stdout)["sweep_id"]
    assert wait_finished(sweep, laptop)["counts"] == {"COMPLETED": 2}
    rows = json.loads(hpcjobs_cli(["results", sweep, "--json"], cwd=laptop, env={}).stdout)
    assert {r["version"] for r in rows} == {2}, rows

    # an entry missing from the submit folder stops the sweep before anything is written or sent
    site.write_text(doc.replace("sync: [train.py, src/]", "sync: [train.py, missing.py]"))
    (laptop / "exp.yaml").write_text(exp.format(name="synced-missing"))
    bad = hpcjobs_cli(["sweep", "exp.yaml", "--site", str(site)], cwd=laptop, env={})
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "remote.sync" in bad.stderr and "missing.py: no such file or folder" in bad.stderr, bad.stderr
    assert not list((laptop / "hpcjobs-sweeps").glob("synced-missing*"))


def test_site_init_plan_and_report_ask_the_login_nodes_scheduler(laptop: Path) -> None:
    """``site init --remote``, ``plan`` and ``report`` from the laptop: every scheduler command goes over SSH.

    ``site init`` writes a site with a ``remote:`` block from the login node's Slurm; ``plan`` on that site
    gets Slurm's start estimate (``sbatch --test-only`` of a script sent on its standard input) and the
    history of ``sacct``; ``report --site`` and ``report --sweep`` (a sweep submitted from the laptop) read
    the login node's accounting, cached in that login node's own folder.
    """
    cache = laptop / "cache"
    env = {"HPCJOBS_CACHE_DIR": str(cache)}
    init = hpcjobs_cli(["site", "init", "--remote", "hpcjobs-ssh-testbed", "--ssh-config", str(SSH_CONFIG),
                        "--name", "from-laptop", "-o", "cluster.yaml"], cwd=laptop, env=env)
    assert init.returncode == 0, init.stderr
    text = (laptop / "cluster.yaml").read_text()
    assert "remote:\n  host: \"hpcjobs-ssh-testbed\"  # --remote\n" in text, text
    assert "partitions:\n  debug:\n" in text and "scheduler: \"slurm\"" in text, text
    assert hpcjobs_cli(["site", "validate", "cluster.yaml"], cwd=laptop, env=env).returncode == 0

    (laptop / "exp.yaml").write_text("name: planned\nresources: {cpus_per_task: 1, walltime: 5m}\ncommand: echo hi\n")
    plan = hpcjobs_cli(["plan", "exp.yaml", "--site", "cluster.yaml", "--json"], cwd=laptop, env=env)
    assert plan.returncode == 0, plan.stderr
    result = json.loads(plan.stdout)
    rows = {r["partition"]: r for r in result["rows"]}
    assert rows["debug"]["fits"] and rows["debug"]["expected_start"], rows["debug"]
    assert rows["debug"]["estimate_error"] is None and result["history_error"] is None, result
    assert result["recommended"]["partition"] in rows, result["recommended"]

    (laptop / "sweep.yaml").write_text(EXPERIMENT.format(name="reported", hostile='"x"')
                                       + f"description: from {laptop}\n")  # a sweep id of its own
    site, _workdir = remote_site(laptop.parent, BASE_SITE, name="laptop-report")
    sub = hpcjobs_cli(["sweep", "sweep.yaml", "--site", str(site), "--json"], cwd=laptop, env=env)
    assert sub.returncode == 0, sub.stderr
    sweep = json.loads(sub.stdout)["sweep_id"]
    wait_finished(sweep, laptop)
    deadline = time.monotonic() + 120
    while True:  # the accounting record of every task, complete (the jobs have ended)
        rep = hpcjobs_cli(["report", "--sweep", sweep, "--jobs", "--json"], cwd=laptop, env=env)
        assert rep.returncode == 0, rep.stderr
        jobs = json.loads(rep.stdout)["jobs"]
        if len(jobs) == 3 and all(j["state"] == "COMPLETED" for j in jobs):
            break
        assert time.monotonic() < deadline, [(j["job_id"], j["state"], j.get("point_id")) for j in jobs]
        time.sleep(2)
    assert {j["user"] for j in jobs} == {LOGIN_USER}
    mine = hpcjobs_cli(["report", "--site", "cluster.yaml", "--since", "1h", "--user", LOGIN_USER, "--jobs", "--json"],
                       cwd=laptop, env=env)
    assert mine.returncode == 0, mine.stderr
    assert len(json.loads(mine.stdout)["jobs"]) >= 3
    assert [p.name for p in (cache / "remote").iterdir()] and not (cache / "sacct").exists()
