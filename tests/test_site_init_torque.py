"""``hpcjobs site init/validate/diff`` on Torque, end to end through the subprocess seam.

A fake Torque (``qstat``, ``pbsnodes`` on ``PATH``) answers with the recorded public Torque 6.1.2
texts in ``tests/data/torque/discover`` (queues and nodes of a real cluster, a server block written
the way ``qstat.c`` prints one). Detection is also checked against the real Slurm ``qstat`` wrapper
and OpenPBS ``qstat`` when this machine has them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcjobs.errors import CommandError
from hpcjobs.schedulers.pbs.discover_live import torque_command
from hpcjobs.schedulers.registry import BACKENDS
from hpcjobs.sites.discover import Probe, detect_scheduler, discover_site, probe_timeout_s, run_discovery

ROOT = Path(__file__).resolve().parents[1]


def probe_torque() -> Probe | None:
    """What the Torque backend's probe hook finds on this machine."""
    return BACKENDS["torque"].probe(run_discovery, probe_timeout_s())

DATA = ROOT / "tests" / "data" / "torque" / "discover"

FAKE = """#!{python}
import os, sys
from pathlib import Path
data = Path({data!r})
with open(os.environ["FAKE_TORQUE_LOG"], "a") as log:
    log.write(" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\\n")
cmd = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
answers = {{
    "qstat -Q -f": "kisti-gsdc_torque-6.1.2_qstat-Qf.txt",
    "qstat -B -f": "constructed_torque-6_qstat-B-f.txt",
    "pbsnodes -a": "kisti-gsdc_torque-6.1.2_pbsnodes-a_excerpt.txt",
}}
if cmd == "qstat --version":
    sys.stderr.write("Version: 6.1.2\\nCommit: 0123456789abcdef\\n")  # Torque writes it to stderr
    sys.exit(0)
if cmd in answers:
    text = (data / answers[cmd]).read_text()
    array = os.environ.get("FAKE_ARRAY", "max_job_array_size = 1000")
    sys.stdout.write(text.replace("max_job_array_size = 1000", array))
    sys.exit(0)
sys.stderr.write("qstat: invalid option -- 'F'\\n")  # e.g. PBS's qstat -B -f -F json on Torque
sys.exit(2)
"""


@pytest.fixture
def fake_torque(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin folder with Torque's ``qstat`` and ``pbsnodes``, first on ``PATH``; returns the call log."""
    bin_dir = tmp_path / "torque-bin"
    bin_dir.mkdir()
    for name in ("qstat", "pbsnodes"):
        path = bin_dir / name
        path.write_text(FAKE.format(python=sys.executable, data=str(DATA)))
        path.chmod(0o755)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_TORQUE_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _hpcjobs(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "hpcjobs", *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_site_init_validate_render_and_diff_on_torque(fake_torque: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "torque.yaml"
    init = _hpcjobs("site", "init", "--scheduler", "torque", "-o", str(out), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert f"wrote {out} (site torque-head.example.org, 7 partitions)" in init.stdout
    text = out.read_text()
    assert text.startswith("# Discovered from Torque server torque-head.example.org")
    assert 'scheduler: "torque"' in text and "max_array_size: 1000  # qstat -B -f: max_job_array_size=1000" in text
    calls = fake_torque.read_text().splitlines()
    assert calls == ["qstat --version", "qstat -B -f", "qstat -Q -f", "pbsnodes -a", "qstat -B -f"]

    valid = _hpcjobs("site", "validate", str(out), cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert f"ok  {out}" in valid.stdout

    exp = tmp_path / "exp.yaml"
    exp.write_text("name: gpujob\ncommand: nvidia-smi\nresources:\n  gpus_per_node: 2\n  cpus_per_task: 4\n"
                   "  walltime: 01:00:00\n")
    render = _hpcjobs("render", str(exp), "--site", str(out), cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    assert "#PBS -q gpuQ" in render.stdout and "#PBS -l nodes=1:ppn=4:gpus=2" in render.stdout

    clean = _hpcjobs("site", "diff", str(out), cwd=tmp_path)
    assert (clean.returncode, clean.stdout.strip()) == (0, f"{out}: matches the cluster"), clean.stderr
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace("cpus_per_node: 36", "cpus_per_node: 40"))
    changed = _hpcjobs("site", "diff", str(edited), cwd=tmp_path)
    assert changed.returncode == 1, changed.stderr
    assert changed.stdout.splitlines() == ["partition cpuQ-c36: cpus_per_node 40 in the file, 36 on the cluster"]
    monkeypatch.setenv("FAKE_ARRAY", "max_job_array_size = 500")  # the server changed under the file
    moved = _hpcjobs("site", "diff", str(out), cwd=tmp_path)
    assert (moved.returncode, moved.stdout.splitlines()) == (
        1, ["limits: max_array_size 1000 in the file, 500 on the cluster"])


def test_detection_takes_torque_only_from_torques_own_qstat(fake_torque: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert probe_torque() == Probe("torque", "torque-head.example.org")
    for name in ("slurm", "pbspro"):
        monkeypatch.setattr(BACKENDS[name], "probe", lambda run, timeout: None)
    assert detect_scheduler() == Probe("torque", "torque-head.example.org")
    assert detect_scheduler("torque") == Probe("torque", "torque-head.example.org")
    assert discover_site("torque").scheduler == "torque"


@pytest.mark.skipif(not Path("/usr/bin/qstat").is_file(), reason="no Slurm qstat wrapper (slurm-wlm-torque) here")
def test_slurms_qstat_wrapper_is_not_torque(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.schedulers.locate import is_slurm_wrapper

    if not is_slurm_wrapper("/usr/bin/qstat"):
        pytest.skip("/usr/bin/qstat is not Slurm's wrapper on this machine")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert probe_torque() is None
    with pytest.raises(CommandError, match="Slurm's PBS wrapper"):
        torque_command("qstat")
    with pytest.raises(CommandError, match="no Torque scheduler answers"):
        discover_site("torque")


@pytest.mark.skipif(not Path("/opt/pbs/bin/qstat").is_file(), reason="no OpenPBS client here")
def test_openpbs_qstat_is_not_torque(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"/opt/pbs/bin{os.pathsep}/usr/bin:/bin")
    assert probe_torque() is None  # `qstat --version` says pbs_version = ..., not Version:
