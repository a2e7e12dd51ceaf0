"""Every Podman argv hpcjobs renders runs as measured in real Slurm and PBS jobs.

``--init`` (so ``scancel``/``qdel`` stop the container, which conmon detaches from the job), a ``--name``
built at run time from the job id, array index, point and rank that Podman accepts
(``[a-zA-Z0-9][a-zA-Z0-9_.-]*``) and that differs between concurrent tasks, and ``--userns=keep-id`` only
when the job's uid is not 0 (rootful Podman refuses it). The cases are every Podman golden script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "containers"
PODMAN_SCRIPTS = sorted(GOLDEN.glob("*/*.podman.sh"))
PODMAN_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
NAME_WORD = re.compile(r'podman run --rm --init --name ("\$\(.*?\)") ')
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
    runs = [line for line in text.splitlines() if "podman run " in line]
    assert runs, script
    for line in runs:
        assert NAME_WORD.search(line), line
        assert "--userns=keep-id" not in line, line
        assert '${HPCJOBS_PODMAN_USERNS:+"--userns=$HPCJOBS_PODMAN_USERNS"}' in line, line
    assert USERNS_LINE.search(text), "the keep-id decision is missing"
    assert text.index("HPCJOBS_PODMAN_USERNS=keep-id") < text.index("podman run ")


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
