"""``sweep --dry-run`` resolves what ``sweep`` resolves: generated pairs of a dry run and its real run.

Every combination of the options that a sweep resolves before it submits is run twice from the same
folder, first with ``--dry-run``, then for real, against a fake Slurm behind the process seam
(:class:`helpers.FakeSlurm`, answering discovery with the testbed's recorded ``scontrol`` output):

- ``--after``: none, an upstream sweep that was submitted, an upstream file never submitted, a name
  that is no sweep;
- the site: ``--site local``, ``--site FILE`` (a valid site file, one ``site validate`` refuses, or one of
  another cluster than this machine's ``slurm.conf`` names, whose limits this scheduler cannot tell, or a
  site naming its clusters on a machine whose configuration names none: no ``slurm.conf``), or
  none on a Slurm login node with no site file and no discovered site cached (the site is discovered);
- Slurm's ``scontrol show config``: answers, or fails (no controller).

The dry run must end as the real run does (exit code, site and sweep id, the error, the dependency
it passes, what it says about the site and the limits, how often it asked ``scontrol`` for them), and
submit and write nothing.
"""

from __future__ import annotations

import itertools
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import FakeSlurm, invoke

from hpcjobs import process
from hpcjobs.errors import CommandError
from hpcjobs.process import CommandResult

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "tests" / "data" / "slurm" / "testbed"
AFTER = ("none", "submitted", "never-submitted", "unknown")
SITES = ("local", "file", "invalid-file", "other-cluster", "unnamed-here", "discovered")
SCONTROL = ("answers", "fails")
SLURM_COMMANDS = ("sbatch", "scontrol", "squeue", "sacct", "scancel", "sacctmgr")


class DiscoverableSlurm(FakeSlurm):
    """:class:`FakeSlurm` whose ``scontrol`` answers as the testbed's did (``hpctest``), or fails."""

    def __init__(self, scontrol: str) -> None:
        super().__init__()
        self.scontrol = scontrol

    def __call__(self, argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):  # type: ignore[no-untyped-def]
        argv = list(argv)
        if argv[0] == "scontrol":
            self.calls.append(argv)
            if self.scontrol == "fails":
                result = CommandResult(tuple(argv), 1, "", "slurm_load_ctl_conf error: Unable to contact slurm "
                                       "controller (connect failure)\n", 0.0)
                if check:
                    raise CommandError(argv, 1, "", result.stderr)
                return result
            recorded = {"config": "scontrol_show_config.txt", "partition": "scontrol_show_partition_oneliner.txt",
                        "node": "scontrol_show_node_oneliner.txt"}[argv[2]]
            return CommandResult(tuple(argv), 0, (TESTBED / recorded).read_text(), "", 0.0)
        if argv[0] not in SLURM_COMMANDS:  # no PBS or Torque here, whatever this machine has installed
            if check:
                raise CommandError(argv, 127, "", f"{argv[0]}: command not found")
            return CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found", 0.0)
        return super().__call__(argv, timeout=timeout, input=input, env=env, cwd=cwd, check=check)

    def submitted(self) -> int:
        return len(self.sbatch())

    def config_asked(self) -> int:
        """How often ``scontrol show config`` ran (discovery's probe, and the limits)."""
        return sum(1 for c in self.calls if c[:3] == ["scontrol", "show", "config"])


@dataclass(frozen=True)
class Outcome:
    """How one ``hpcjobs sweep`` ended, in the terms a dry run and its real run must share."""

    code: int
    sweep_id: str | None
    site: str | None
    errors: tuple[str, ...]
    dependencies: tuple[str, ...]
    said: tuple[str, ...]
    config_asked: int


def _said(caplog: pytest.LogCaptureFixture) -> tuple[str, ...]:
    """What the command said about the site it chose and the scheduler's limits (warnings)."""
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return tuple(line for line in lines if line.startswith("site ") or "limits" in line or "slurmctld" in line)


def _errors(output: str) -> tuple[str, ...]:
    lines = output.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("error")), len(lines))
    return tuple(line.strip() for line in lines[first:] if line.strip())


def _dependencies(argvs: list[list[str]]) -> tuple[str, ...]:
    return tuple(sorted(a for argv in argvs for a in argv if a.startswith("--dependency=")))


def _dry_outcome(code: int, output: str, said: tuple[str, ...], config_asked: int) -> Outcome:
    head = re.search(r"^# sweep (\S+): \d+ points on (\S+?)(,|$)", output, re.M)
    commands = [line.split() for line in output.splitlines() if line.startswith("sbatch ")]
    return Outcome(code, head and head.group(1), head and head.group(2), _errors(output),
                   _dependencies(commands), said, config_asked)


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, site: str, scontrol: str) -> DiscoverableSlurm:
    """A Slurm login node (``sbatch`` and ``scontrol`` on PATH, ``slurm.conf`` naming hpctest) with a faked seam."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in SLURM_COMMANDS:
        stub = bindir / name
        stub.write_text("#!/bin/sh\necho 'this test fakes the process seam' >&2\nexit 127\n")
        stub.chmod(0o755)
    if site != "unnamed-here":
        (tmp_path / "slurm.conf").write_text("ClusterName=hpctest\n")
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    monkeypatch.setenv("PBS_CONF_FILE", str(tmp_path / "no-pbs.conf"))
    monkeypatch.setenv("PBS_DEFAULT", "")
    monkeypatch.setenv("HPCJOBS_DISCOVER", "1")
    monkeypatch.setenv("HPCJOBS_SUBMIT_LOOKUP_S", "0")
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    fake = DiscoverableSlurm(scontrol)
    monkeypatch.setattr(process, "run_command", fake)
    if site in ("file", "invalid-file", "other-cluster", "unnamed-here"):
        text = (ROOT / "tests" / "sites" / "hpctest.yaml").read_text()
        if site == "other-cluster":
            text = text.replace("cluster_names: [hpctest]", "cluster_names: [othercluster]")
        (tmp_path / "cluster.yaml").write_text(text)
    for name in ("up", "down"):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\ncommand: 'true'\nsweep:\n  grid:\n    x: [1, 2]\n")
    return fake


def _site_args(site: str) -> tuple[str, ...]:
    return {"local": ("--site", "local"), "file": ("--site", "cluster.yaml"),
            "invalid-file": ("--site", "cluster.yaml"), "other-cluster": ("--site", "cluster.yaml"),
            "unnamed-here": ("--site", "cluster.yaml"),
            "discovered": ()}[site]


def _pairs() -> list[tuple[str, str, str]]:
    return [(after, site, scontrol) for after, site, scontrol in itertools.product(AFTER, SITES, SCONTROL)
            if not (site == "local" and scontrol == "fails")]  # the local site asks no scheduler


@pytest.mark.parametrize(("after", "site", "scontrol"), _pairs(), ids=lambda v: v)
def test_a_dry_run_ends_as_its_real_run(after: str, site: str, scontrol: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    fake = _setup(tmp_path, monkeypatch, site, scontrol)
    site_args = _site_args(site)
    after_args: tuple[str, ...] = ()
    if after == "submitted":
        code, out = invoke("sweep", "up.yaml", *site_args, "--json")
        assert code == 0, out
        fake.running.update(fake.jobs)  # the upstream's jobs still run: the downstream waits for them
        after_args = ("--after", "up")
    elif after == "never-submitted":
        after_args = ("--after", "up.yaml")
    elif after == "unknown":
        after_args = ("--after", "no-such-sweep")
    if site == "invalid-file":  # a defect `site validate` refuses: the prologue is not bash
        with (tmp_path / "cluster.yaml").open("a") as f:
            f.write("prologue:\n  - 'if then fi'\n")
    discovered, cached = tmp_path / "xdg-config", tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(discovered))  # no discovered site cached
    monkeypatch.setenv("XDG_CACHE_HOME", str(cached))  # no scheduler limits cached
    sweeps_before = sorted(p.name for p in (tmp_path / "hpcjobs-sweeps").glob("*"))
    submitted_before = fake.submitted()

    caplog.clear()
    asked_before = fake.config_asked()
    code, out = invoke("sweep", "down.yaml", *site_args, *after_args, "--dry-run")
    dry = _dry_outcome(code, out, _said(caplog), fake.config_asked() - asked_before)
    assert code != 3 and "Traceback" not in out, out
    assert fake.submitted() == submitted_before, "the dry run submitted"
    assert sorted(p.name for p in (tmp_path / "hpcjobs-sweeps").glob("*")) == sweeps_before, "the dry run wrote"

    for folder in (discovered, cached):  # the real run discovers and asks afresh, as the dry run did
        shutil.rmtree(folder, ignore_errors=True)
    caplog.clear()
    asked_before = fake.config_asked()
    code, out = invoke("sweep", "down.yaml", *site_args, *after_args, "--json")
    said, asked = _said(caplog), fake.config_asked() - asked_before
    sweep_id = site_name = None
    if code == 0:
        sweep_id = re.search(r'"sweep_id": "([^"]+)"', out).group(1)  # type: ignore[union-attr]
        status_code, status = invoke("status", sweep_id, "--json")
        assert status_code == 0, status
        site_name = re.search(r'"site": "([^"]+)"', status).group(1)  # type: ignore[union-attr]
    real = Outcome(code, sweep_id, site_name, _errors(out), _dependencies(fake.sbatch()[submitted_before:]), said,
                   asked)
    assert dry == real
    if site in ("other-cluster", "unnamed-here"):  # this machine's scontrol may speak for another cluster
        assert asked == 0


def test_the_pairs_cover_every_option() -> None:
    pairs = _pairs()
    assert {a for a, _, _ in pairs} == set(AFTER) and {s for _, s, _ in pairs} == set(SITES)
    assert {c for _, s, c in pairs if s != "local"} == set(SCONTROL)
