"""The site hooks: what a site file of a scheduler may hold, discovery and detection, all asked of the backend.

The site schema sits below the backends and never imports them: it asks the catalog the registry
plugs into :mod:`hpcjobs.config.scheduler_names`. A backend registered at run time (here a copy of
Slurm's under another name, as a sixth backend made by copying a folder would be) is a valid
``scheduler:`` at once, with its own rules, and no change outside its class.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import MappingProxyType

import pytest

from hpcjobs.config import scheduler_names
from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun, Probe
from hpcjobs.config.policy import directive_names
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.sites import detect_site
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import parse_yaml
from hpcjobs.errors import CommandError, ConfigError
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import BACKENDS, register, site_catalog
from hpcjobs.schedulers.slurm.backend import SlurmBackend
from hpcjobs.sites import discover


class SixthBackend(SlurmBackend):
    """Slurm's backend under another name, with its own short options and no QOS limits."""

    name = "sixth"
    display_name = "Sixth"
    site_fields = MappingProxyType({})
    short_options = MappingProxyType({"z": "zone"})

    def probe(self, run: DiscoveryRun, timeout: float) -> Probe | None:
        return Probe(self.name, "c6")

    def discover_site(self, run: DiscoveryRun, name: str | None, user: str) -> DiscoveredSite:
        return DiscoveredSite(name=name or "c6", scheduler=self.name, cluster="c6")


@pytest.fixture
def sixth() -> Iterator[BaseBackend]:
    backend = register(SixthBackend())
    try:
        yield backend
    finally:
        BACKENDS.pop(backend.name, None)


def _site(text: str) -> SiteConfig:
    return validate_document(SiteConfig, parse_yaml(text, file="site.yaml"))


def test_the_catalog_is_the_registry_and_the_local_runner() -> None:
    assert scheduler_names.scheduler_names() == tuple(BACKENDS)  # the local runner is one of them
    assert site_catalog() == dict(scheduler_names.known())
    local = scheduler_names.facts_of("local")
    assert local is not None and local.runs_here and not local.partitions


def test_a_backend_registered_at_run_time_is_a_scheduler_sites_may_name(sixth: BaseBackend) -> None:
    site = _site("name: six\nscheduler: sixth\npartitions:\n  cpu:\n    max_nodes: 2\n")
    assert site.scheduler == "sixth"
    with pytest.raises(ConfigError, match="qos_limits are Slurm QOS limits; this site's scheduler is sixth"):
        _site("name: six\nscheduler: sixth\nqos_limits:\n  normal:\n    max_submitted_jobs: 5\n")
    assert directive_names("-z north", "sixth") == {"z", "zone"}
    assert directive_names("-p gpu", "sixth") == {"p"}
    assert "sixth" in SiteConfig.model_json_schema()["properties"]["scheduler"]["enum"]


def test_an_unknown_scheduler_names_every_choice(sixth: BaseBackend) -> None:
    with pytest.raises(ConfigError) as caught:
        _site("name: x\nscheduler: sixht\n")
    problem = caught.value.problems[0]
    assert (problem.file, problem.line, problem.key) == ("site.yaml", 2, "scheduler")
    assert "invalid value 'sixht'; did you mean 'sixth'?" in problem.message
    assert problem.choices == tuple(BACKENDS)
    BACKENDS.pop("sixth")
    with pytest.raises(ConfigError, match="invalid value 'sixth'"):
        _site("name: six\nscheduler: sixth\n")


@pytest.mark.parametrize(("text", "message"), [
    ("scheduler: local\npartitions:\n  cpu: {}\n", "a 'local' site has no partitions"),
    ("scheduler: pbspro\nqos_limits:\n  q: {}\n", "qos_limits are Slurm QOS limits; this site's scheduler is pbspro"),
    ("scheduler: swarm\n", "a 'swarm' site needs `swarm:` settings (at least `image:`)"),
    ("scheduler: slurm\nswarm:\n  image: x\n", "`swarm:` settings are for swarm sites; this one runs slurm"),
    ("scheduler: kubernetes\n", "a 'kubernetes' site needs `kubernetes:` settings (at least `image:`)"),
    ("scheduler: slurm\nkubernetes:\n  image: x\n",
     "`kubernetes:` settings are for kubernetes sites; this one runs slurm"),
])
def test_the_schema_rules_come_from_the_backends(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _site("name: x\n" + text)
    assert [p.message for p in caught.value.problems] == [message]


def test_a_site_that_runs_here_is_never_detected_by_host_name(tmp_path, monkeypatch) -> None:
    for name, scheduler in (("here", "local"), ("there", "slurm")):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nscheduler: {scheduler}\n"
                                               "detect:\n  hostname_patterns: ['login*']\n")
    monkeypatch.setenv("HPCJOBS_SITE_PATH", str(tmp_path))
    monkeypatch.delenv("HPCJOBS_SITE", raising=False)
    assert detect_site(hostname="login1", env={}) == "there"
    (tmp_path / "there.yaml").unlink()
    assert detect_site(hostname="login1", env={}) == "local"


def test_discovery_asks_each_discoverable_backend(sixth: BaseBackend, monkeypatch) -> None:
    asked: list[str] = []

    def nobody(name: str):
        def probe(run: DiscoveryRun, timeout: float) -> None:
            asked.append(name)
        return probe

    for backend in discover.discoverable():
        if backend is not sixth:
            monkeypatch.setattr(backend, "probe", nobody(backend.name))
    assert [b.name for b in discover.discoverable()] == ["slurm", "pbspro", "torque", "sixth"]
    assert discover.detect_scheduler() == Probe("sixth", "c6")
    assert asked == ["slurm", "pbspro", "torque"]
    assert discover.discover_site("auto", name="mine").scheduler == "sixth"
    assert discover.site_yaml(discover.discover_site("sixth")).startswith("# Discovered from Sixth cluster c6 by")


def test_no_scheduler_answering_is_said_in_the_backends_words(monkeypatch) -> None:
    for backend in discover.discoverable():
        monkeypatch.setattr(backend, "probe", lambda run, timeout: None)
    with pytest.raises(CommandError, match=r"no Slurm, PBS or Torque scheduler answers on this machine "
                                           r"\(scontrol show config / PBS's qstat -B / Torque's qstat --version\)"):
        discover.discover_site()
    with pytest.raises(CommandError, match="no PBS Pro/OpenPBS scheduler answers"):
        discover.discover_site("pbspro")
    assert discover.detect_scheduler("swarm") is None  # not discoverable: never asked


def test_discovery_hooks_run_commands_only_through_the_run_they_are_given() -> None:
    ran: list[Sequence[str]] = []

    def run(argv: Sequence[str], *, timeout: float = 60.0, check: bool = True):
        ran.append(list(argv))
        raise CommandError(tuple(argv), 1, "", "down")

    assert BACKENDS["torque"].probe(run, 1.0) is None  # Torque does not answer (or has no qstat here)
    with pytest.raises(CommandError):
        BACKENDS["slurm"].discover_site(run, None, "alice")
    assert ran[-1][:3] == ["scontrol", "show", "config"]


def test_discoverable_backends_say_how_they_are_asked() -> None:
    for backend in BACKENDS.values():
        if backend.capabilities.discoverable:
            assert backend.probe_hint and backend.label and backend.short_name, backend.name
