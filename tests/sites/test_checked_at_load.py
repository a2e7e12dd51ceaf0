"""A site file ``site validate`` refuses is refused by every command that loads a site, at the same lines.

The defects are generated from the checks ``site validate`` runs (:data:`hpcjobs.sites.check.SITE_CHECKS`,
plus the schema): each check has its defects here, and a check without one fails the table. Every
site-loading command (``render``, ``sweep`` and ``sweep --dry-run``, ``submit``, ``plan``, ``advise
--site``) must exit 2 naming each problem at the file, line and column ``site validate`` names, and run
no scheduler command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import invoke

from hpcjobs import process
from hpcjobs.errors import CommandError
from hpcjobs.sites.check import SITE_CHECKS

ROOT = Path(__file__).resolve().parents[2]

BASE_SITE = """\
name: checked
scheduler: slurm
default_partition: batch
partitions:
  batch:
    max_walltime: 1-00:00:00
    cpus_per_node: 8
    memory_per_node: 32G
    qos: [normal, long]
  short:
    max_walltime: 01:00:00
    cpus_per_node: 8
    memory_per_node: 32G
    qos: [normal]
"""

#: Site-file defects by the check that refuses them (``schema``: the site schema itself).
DEFECTS: dict[str, tuple[str, ...]] = {
    "schema": ("max_array_tasks: 10\n", "default_partition: [batch]\n"),
    "default_qos allowed on every partition": ("default_qos: nosuch\n", "default_qos: long\n"),  # long: not on short
    "prologue and epilogue are valid bash": ("prologue:\n  - 'if then fi'\n", "epilogue:\n  - 'for x in'\n"),
    "a one-CPU job renders to valid bash on every partition": ("template: nosuch.sh.j2\n",
                                                               "template: broken.sh.j2\n"),
}

#: A template that renders a script bash cannot parse (found on ``$HPCJOBS_TEMPLATE_PATH``).
BROKEN_TEMPLATE = "#!/bin/bash\n{{ directive_lines }}\nif [ -n x ]; then\n  {{ body }}\n"

EXPERIMENT = "name: probe\ncommand: echo hi\n"

#: Every command that loads a site, with the site file in the place of ``{site}``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "render": ("render", "exp.yaml", "--site", "{site}"),
    "sweep": ("sweep", "exp.yaml", "--site", "{site}", "--json"),
    "sweep --dry-run": ("sweep", "exp.yaml", "--site", "{site}", "--dry-run"),
    "submit": ("submit", "exp.yaml", "--site", "{site}"),
    "plan": ("plan", "exp.yaml", "--site", "{site}"),
    "advise --site": ("advise", "--from-file", str(ROOT / "tests/data/slurm/testbed/sacct_header_X.txt"),
                      "--site", "{site}"),
}


def _cases() -> list[tuple[str, str]]:
    return [(check, defect) for check, defects in DEFECTS.items() for defect in defects]


def _site_text(defect: str) -> str:
    if defect.startswith("default_partition:"):  # a key given twice is a YAML error: replace it
        return BASE_SITE.replace("default_partition: batch\n", defect)
    return BASE_SITE + defect


def _locations(output: str) -> set[str]:
    return set(re.findall(r"^\s+(\S+:\d+:\d+): ", output, re.M))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The test's folder as cwd, the broken template on the template path, and the scheduler calls made."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "broken.sh.j2").write_text(BROKEN_TEMPLATE)
    monkeypatch.setenv("HPCJOBS_TEMPLATE_PATH", str(tmp_path / "templates"))
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    calls: list[list[str]] = []

    def no_scheduler(argv, **_kw):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        raise CommandError(list(argv), 1, "", "no scheduler in this test")

    monkeypatch.setattr(process, "run_command", no_scheduler)
    return calls


def test_every_check_has_defects() -> None:
    assert set(DEFECTS) == {"schema", *(check.name for check in SITE_CHECKS)}


@pytest.mark.parametrize(("check", "defect"), _cases(), ids=lambda v: v.strip().replace("\n", " ")[:40])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_site_validate_refuses_is_refused_by_every_command(check: str, defect: str, command: str,
                                                             folder: list[list[str]], tmp_path: Path) -> None:
    Path("site.yaml").write_text(_site_text(defect))
    code, validated = invoke("site", "validate", "site.yaml")
    expected = _locations(validated)
    assert code == 2 and expected, f"site validate accepts the {check!r} defect:\n{validated}"
    code, out = invoke(*(a.format(site="site.yaml") for a in COMMANDS[command]))
    assert code == 2, out
    assert _locations(out) == expected, f"site validate said:\n{validated}\n{command} said:\n{out}"
    assert folder == [] and not (tmp_path / "hpcjobs-sweeps").exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_base_site_is_loaded(command: str, folder: list[list[str]]) -> None:
    """Without a defect the same commands get past the site (the table's refusals are the defects')."""
    Path("site.yaml").write_text(BASE_SITE)
    assert invoke("site", "validate", "site.yaml")[0] == 0
    if command in ("render", "sweep --dry-run"):  # the others go on to ask the scheduler
        code, out = invoke(*(a.format(site="site.yaml") for a in COMMANDS[command]))
        assert code == 0, out
