"""The render hooks of a backend: its directives, its template, and the facts resolving asks of it.

``hpcjobs.resolve`` sits below the schedulers layer: it gets what it must know of a scheduler (mail,
secrets from the environment, launchers, a scheduler's own preemption signal) as a
:class:`~hpcjobs.resolve.SchedulerFacts`, which the registry fills from the backend.
"""

from __future__ import annotations

import pytest

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_job, template_name
from hpcjobs.resolve import SchedulerFacts, facts_of, resolve
from hpcjobs.schedulers.base import BaseBackend
from hpcjobs.schedulers.registry import BACKENDS, scheduler_facts_of, template_of


def _site(scheduler: str) -> SiteConfig:
    return SiteConfig.model_validate({"name": "s", "scheduler": scheduler, "partitions": {"q": {}}})


def test_each_backend_names_its_template_and_facts() -> None:
    for name, backend in BACKENDS.items():
        assert template_of(name) == backend.template == f"{name}.sh.j2"
        facts = scheduler_facts_of(name)
        assert facts.mail == backend.capabilities.mail
        assert facts.walltime_signal == backend.capabilities.walltime_signal
        assert facts.launchers == backend.launchers
    assert template_of("local") == "local.sh.j2"
    local, defaults = scheduler_facts_of("local"), SchedulerFacts()  # the local runner: the defaults
    assert (local.mail, local.walltime_signal, local.launchers) == (defaults.mail, defaults.walltime_signal,
                                                                    defaults.launchers)
    assert facts_of("slurm") == scheduler_facts_of("slurm")  # the registry installed itself as the provider


def test_a_backend_may_name_another_template() -> None:
    class Named(BaseBackend):
        name = "named"
        template = "custom.sh.j2"

    assert Named().template == "custom.sh.j2"
    assert Named().directives(resolve(Experiment(name="j", command="true"), _site("slurm"))) == []  # the default


def test_the_site_and_experiment_template_win_over_the_backend() -> None:
    job = resolve(Experiment(name="j", command="true"), _site("pbspro"))
    assert template_name(job) == "pbspro.sh.j2"
    assert template_name(job, "mine.sh.j2") == "mine.sh.j2"


def test_resolve_takes_the_facts_its_caller_gives() -> None:
    exp = Experiment.model_validate({"name": "j", "command": "true", "secrets": {"TOKEN": {"env": "TOKEN"}},
                                     "notify": {"email": "a@b.c", "on": ["end"]}})
    with pytest.raises(ConfigError, match="qsub -v"):
        resolve(exp, _site("pbspro"))
    job = resolve(exp, _site("pbspro"), scheduler_facts=SchedulerFacts(mail=True))  # a PBS that passes secrets
    assert job.secrets and not any("sends no mail" in w for w in job.warnings)
    assert any("sends no mail" in w for w in resolve(exp, _site("slurm"), scheduler_facts=SchedulerFacts()).warnings)


def test_launchers_and_preemption_follow_the_facts() -> None:
    exp = Experiment.model_validate({"name": "j", "launch": {"launcher": "srun", "program": "x", "preemptible": True}})
    with pytest.raises(ConfigError) as info:
        resolve(exp, _site("torque"))
    messages = [p.message for p in info.value.problems]
    assert any("launcher 'srun' needs Slurm" in m for m in messages)
    assert any("needs resources.walltime" in m for m in messages)
    assert resolve(exp, _site("slurm")).launch is not None
    facts = SchedulerFacts(launchers=frozenset({"srun"}), walltime_signal=True)
    assert resolve(exp, _site("torque"), scheduler_facts=facts).launch is not None


def test_directives_come_from_the_backend() -> None:
    job = resolve(Experiment(name="j", command="true"), _site("torque"))
    assert BACKENDS["torque"].directives(job)[0] == ("N", "-N j")
    assert "#PBS -l nodes=1:ppn=1" in render_job(job).text
