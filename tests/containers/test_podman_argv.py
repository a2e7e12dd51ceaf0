"""Every Podman argv hpcjobs renders runs as measured in real Slurm and PBS jobs.

``--init`` and ``hpcjobs_podman_run`` (so ``scancel``/``qdel`` stop the container, which conmon detaches
from the job), a ``--name``
built at run time from the job id, array index, point and rank that Podman accepts
(``[a-zA-Z0-9][a-zA-Z0-9_.-]*``) and that differs between concurrent tasks, and ``--userns=keep-id`` only
when the job's uid is not 0 (rootful Podman refuses it). The cases are every Podman golden script.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "containers"
PODMAN_SCRIPTS = sorted(GOLDEN.glob("*/*.podman.sh"))
PODMAN_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
#: How the job starts a container: ``hpcjobs_podman_run NAME`` (the job's shell removes it when signalled),
#: or ``podman run --name NAME`` where a launcher execs the program.
NAME_WORD = re.compile(r'(?:hpcjobs_podman_run|podman run --name) ("\$\(.*?\)") --rm --init ')
USERNS_LINE = re.compile(r"^if \[\[ \$\(id -u\) -ne 0 \]\]; then HPCJOBS_PODMAN_USERNS=keep-id; .*$", re.M)
#: Job ids, array indexes, points and ranks as schedulers write them: PBS array ids have brackets and a server.
TASKS = [
    {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs-server"},
    {"SLURM_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": "3", "PBS_JOBID": "4242[3].pbs-server", "PBS_ARRAY_INDEX": "3"},
    {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs", "HPCJOBS_POINT_ID": "p0007"},
    {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs", "HPCJOBS_TASK_RANK": "1"},
    {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs", "HPCJOBS_TASK_RANK": "12"},
    {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs", "HPCJOBS_POINT_ID": "a b/c;d"},
]


def test_there_are_podman_goldens() -> None:
    assert len(PODMAN_SCRIPTS) >= 8


@pytest.mark.parametrize("script", PODMAN_SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_podman_runs_with_init_a_name_and_keep_id_only_rootless(script: Path) -> None:
    text = script.read_text()
    runs = [line for line in text.splitlines() if re.search(r'(hpcjobs_podman_run|podman run --name) "\$\(', line)]
    assert runs, script
    for line in runs:
        assert NAME_WORD.search(line), line
        assert "--userns=keep-id" not in line, line
        assert '${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"}' in line, line
    assert USERNS_LINE.search(text), "the keep-id decision is missing"
    assert text.index("HPCJOBS_PODMAN_USERNS=keep-id") < text.index(runs[0])


@pytest.mark.skipif(not shutil.which("bash"), reason="bash needed")
@pytest.mark.parametrize("script", PODMAN_SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_podman_names_are_valid_and_distinct_per_task(script: Path) -> None:
    match = NAME_WORD.search(script.read_text())
    assert match, script
    names = []
    for env in TASKS:
        proc = subprocess.run(["bash", "-c", f"printf '%s' {match.group(1)}"], env={"PATH": "/usr/bin:/bin", **env},
                              capture_output=True, text=True, check=True)
        assert PODMAN_NAME.fullmatch(proc.stdout), proc.stdout
        names.append(proc.stdout)
    assert len(set(names)) == len(names), names


FAKE_PODMAN = """#!/bin/bash
# `podman run`: a client that is still starting its container and passes no signal on (as measured);
# `podman rm -f`: the container goes, and with it its client
case $1 in
run) trap '' TERM INT HUP; echo "$$" >"$FAKE_DIR/client.pid"; echo "run $*" >>"$FAKE_DIR/calls"
     while :; do sleep 0.1; done ;;
rm)  echo "rm $*" >>"$FAKE_DIR/calls"; kill -9 "$(cat "$FAKE_DIR/client.pid")" 2>/dev/null; exit 0 ;;
esac
"""


def _default_signals() -> None:
    """The job shell starts with the default action of each signal, as a scheduler starts a batch script.

    A signal ignored when bash starts cannot be trapped (bash's manual, "Signals"), and pytest-xdist's
    workers run with SIGINT ignored: inherited, it would make the INT case hang rather than test anything.
    """
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.skipif(not shutil.which("bash"), reason="bash needed")
@pytest.mark.parametrize(("signal_name", "status"), [("TERM", 143), ("INT", 130), ("HUP", 129)])
def test_a_signalled_job_removes_its_container_although_podman_passes_nothing_on(
        tmp_path: Path, signal_name: str, status: int) -> None:
    from hpcjobs.containers.runtimes import podman_setup_lines

    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text(FAKE_PODMAN)
    fake.chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text("set -eo pipefail\n" + "\n".join(podman_setup_lines())
                      + "\ntrap 'echo previous-trap' USR1\n"
                      + 'hpcjobs_podman_run "hpcjobs-42-0-p1-0" --rm --init img bash -c "sleep 100"\n'
                      + "echo not-reached\n")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "FAKE_DIR": str(tmp_path)}
    job = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, text=True,
                           preexec_fn=_default_signals)
    deadline = time.monotonic() + 20
    while not (tmp_path / "client.pid").exists():
        assert time.monotonic() < deadline, "the client never started"
        time.sleep(0.05)
    client = int((tmp_path / "client.pid").read_text())
    job.send_signal(getattr(signal, "SIG" + signal_name))
    out, _ = job.communicate(timeout=30)
    assert job.returncode == status
    assert "not-reached" not in out
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "run run --name hpcjobs-42-0-p1-0 --rm --init img bash -c sleep 100"
    assert "rm rm -f -t 10 hpcjobs-42-0-p1-0" in calls[1:], calls
    with pytest.raises(ProcessLookupError):
        os.kill(client, 0)


@pytest.mark.skipif(not shutil.which("bash"), reason="bash needed")
def test_the_job_goes_on_with_the_containers_status_and_its_own_traps(tmp_path: Path) -> None:
    from hpcjobs.containers.runtimes import podman_setup_lines

    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text('#!/bin/bash\n[ "$1" = run ] && exit 3\n')
    fake.chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text("\n".join(podman_setup_lines()) + "\ntrap 'echo mine' TERM\n"
                      + 'hpcjobs_podman_run n --rm img true || echo "status $?"\n'
                      + "trap -p TERM\n")
    proc = subprocess.run(["bash", str(script)], env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30)
    assert proc.stdout.splitlines() == ["status 3", "trap -- 'echo mine' SIGTERM"], proc.stdout + proc.stderr


@pytest.mark.skipif(not shutil.which("bash"), reason="bash needed")
@pytest.mark.parametrize("delay", [0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2])
def test_a_signal_at_any_moment_leaves_no_client_or_container(tmp_path: Path, delay: float) -> None:
    """The traps are set before the client starts: a cancel before, during or after its start."""
    from hpcjobs.containers.runtimes import podman_setup_lines

    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text(FAKE_PODMAN)
    fake.chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text("\n".join(podman_setup_lines()) + '\nhpcjobs_podman_run n --rm img true\necho not-reached\n')
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "FAKE_DIR": str(tmp_path)}
    with open(tmp_path / "out", "w") as out:
        job = subprocess.Popen(["bash", str(script)], env=env, stdout=out, stderr=subprocess.STDOUT,
                               preexec_fn=_default_signals)
        time.sleep(delay)
        job.send_signal(signal.SIGTERM)
        status = job.wait(timeout=30)
    assert "not-reached" not in (tmp_path / "out").read_text()
    # before the traps were set (the shell still reading the script) the shell dies of the signal itself
    assert status in (143, -signal.SIGTERM)
    if (tmp_path / "client.pid").exists():
        assert status == 143  # the client had started: it is gone, and the container was removed
        deadline = time.monotonic() + 10
        client = int((tmp_path / "client.pid").read_text())
        while True:
            try:
                os.kill(client, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the podman client outlived the job"
            time.sleep(0.05)
        assert any(c.startswith("rm rm -f") for c in (tmp_path / "calls").read_text().splitlines())
