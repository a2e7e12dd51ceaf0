"""Every registered backend meets the whole contract of :class:`hpcjobs.schedulers.base.BaseBackend`.

This is the checklist for a new backend (docs/CONTRIBUTING.md, "Adding a scheduler"): the class
attributes, the required commands, and for each capability it declares that capability's hooks and
no others. The registry runs the same check when a backend registers; the tests below also call
every hook a backend has with plain arguments, so a hook that exists but cannot be called fails here
rather than in a user's sweep.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from hpcjobs.schedulers.base import (
    CAPABILITY_HOOKS,
    BaseBackend,
    Capabilities,
    JobEnv,
    SubmitOptions,
    UnsupportedCommand,
)
from hpcjobs.schedulers.client import client_for
from hpcjobs.schedulers.registry import (
    BACKENDS,
    REQUIRED_HOOKS,
    BackendContractError,
    capabilities_of,
    contract_problems,
    get_backend,
    job_env_of,
    register,
    scheduler_names,
)

NAMES = sorted(BACKENDS)
#: Hooks whose default is an ordinary answer rather than :class:`UnsupportedCommand`.
NEUTRAL_DEFAULTS = frozenset({"same_job", "job_key", "command_path", "submit_argv_in", "parse_submit_for",
                              "needs_server_version", "cancel_argvs"})
#: Neutral defaults that call a required hook (so say so too where there are none, ``runs_here``).
DELEGATING_DEFAULTS = frozenset({"submit_argv_in", "parse_submit_for", "cancel_argvs"})


@pytest.fixture(params=NAMES)
def backend(request: pytest.FixtureRequest) -> BaseBackend:
    return BACKENDS[request.param]


def test_the_registry_holds_the_five_schedulers_and_the_local_runner() -> None:
    assert NAMES == ["kubernetes", "local", "pbspro", "slurm", "swarm", "torque"]
    assert all(get_backend(n).name == n for n in NAMES)
    assert [n for n in NAMES if BACKENDS[n].capabilities.runs_here] == ["local"]
    assert sorted(scheduler_names()) == ["kubernetes", "pbspro", "slurm", "swarm", "torque"]


def test_backend_meets_the_contract(backend: BaseBackend) -> None:
    assert contract_problems(backend) == []
    assert isinstance(backend.capabilities, Capabilities)
    assert re.fullmatch(r"#[A-Z0-9]*" if backend.capabilities.runs_here else r"#[A-Z0-9]+", backend.directive_prefix)
    assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", backend.array_index_var)
    assert backend.job_id_grammar and backend.job_id_pattern.pattern


def test_every_hook_of_the_contract_is_declared_with_a_default() -> None:
    hooks = {h for hs in CAPABILITY_HOOKS.values() for h in hs} | set(REQUIRED_HOOKS)
    assert all(callable(getattr(BaseBackend, h)) for h in hooks)
    assert set(CAPABILITY_HOOKS) <= {f.name for f in dataclasses.fields(Capabilities)}


def test_undeclared_commands_say_so(backend: BaseBackend) -> None:
    caps = backend.capabilities
    for flag, hooks in CAPABILITY_HOOKS.items():
        if getattr(caps, flag) or flag == "job_ids_as_text":
            continue
        for hook in hooks:
            if hook in NEUTRAL_DEFAULTS and not (caps.runs_here and hook in DELEGATING_DEFAULTS):
                _call(backend, hook)  # a plain answer: the command's ordinary form, False, the id itself
            else:
                with pytest.raises(UnsupportedCommand, match=backend.name):
                    _call(backend, hook)


def _no_run(argv: object, **options: object) -> object:
    raise AssertionError(f"an undeclared discovery hook ran {argv}")


def _call(backend: BaseBackend, hook: str) -> object:
    args = {"tag_query_argvs": ("exp", "alice"), "user_limits_argv": ("alice",), "queued_argv": ("alice",),
            "logs_argv": ("123",), "same_job": ("1", "1"), "job_key": ("1",), "command_path": ("qsub", {}),
            "needs_server_version": (Path("x.sh"),), "parse_user_limits": ("",),
            "submit_argv_in": (Path("x.sh"), SubmitOptions(), Path(".")), "parse_submit_for": (["x"], "1\n"),
            "start_estimate_argv": (Path("x.sh"), "p", None), "parse_start_estimate": ("", 1), "queue_state_argv": (),
            "submit_argv": (Path("x.sh"), SubmitOptions()),
            "probe": (_no_run, 1.0), "discover_site": (_no_run, None, "alice"), "explain_pending": (["1"], _no_run)}
    fn = getattr(backend, hook)
    if hook in args:
        return fn(*args[hook])
    if hook.endswith("_argv") or hook == "cancel_argvs":
        return fn() if hook in ("config_argv", "qos_limits_argv", "server_version_argv") else fn(["1"])
    return fn("")


def test_a_backend_that_runs_here_has_no_commands(backend: BaseBackend) -> None:
    if not backend.capabilities.runs_here:
        assert all(getattr(type(backend), h) is not getattr(BaseBackend, h) for h in REQUIRED_HOOKS)
        return
    for hook in REQUIRED_HOOKS:
        with pytest.raises(UnsupportedCommand, match=backend.name):
            _call(backend, hook)
    with pytest.raises(UnsupportedCommand, match="no scheduler client"):
        client_for(backend.name)


def test_declared_argv_hooks_build_commands(backend: BaseBackend) -> None:
    caps = backend.capabilities
    if caps.runs_here:
        return  # no commands at all (test_a_backend_that_runs_here_has_no_commands)
    for flag in ("status_fallback", "cluster_limits", "user_limits", "qos_limits", "queued_count", "logs_command",
                 "server_version", "start_estimate", "queue_states"):
        if getattr(caps, flag):
            for hook in CAPABILITY_HOOKS[flag]:
                if hook.endswith("_argv"):
                    argv = _call(backend, hook)
                    assert isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv), (flag, hook)
    assert backend.status_argv(["1"]) if backend.valid_job_id("1") else True
    for argvs in (backend.tag_query_argvs("exp", "alice"), backend.cancel_argvs(_ids(backend))):
        assert argvs and all(isinstance(a, list) and a for a in argvs)


def _ids(backend: BaseBackend) -> list[str]:
    for candidate in ("123", "123.server", "hpcjobs-abc-0-0123456789abcdef", "sweep-abc.0.tok", "local-12-0abc"):
        if backend.valid_job_id(candidate):
            return [candidate]
    raise AssertionError(f"{backend.name}: none of the sample ids is valid")


def test_submit_in_folder_gives_the_same_command_family(backend: BaseBackend, tmp_path: Path) -> None:
    if backend.capabilities.submit_in_folder or backend.capabilities.runs_here:
        return  # Swarm and Kubernetes read the script's directives: their own tests cover it
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n")
    assert backend.submit_argv_in(script, SubmitOptions(), tmp_path) == backend.submit_argv(script, SubmitOptions())


def test_capabilities_are_consistent() -> None:
    with pytest.raises(ValueError, match="failed_upstream"):
        Capabilities(dependencies=True)
    with pytest.raises(ValueError, match="failed_upstream"):
        Capabilities(failed_upstream="sometimes")
    assert capabilities_of("local") is BACKENDS["local"].capabilities and not capabilities_of("local").packing
    assert capabilities_of("local").runs_here and not capabilities_of("slurm").runs_here
    assert capabilities_of("slurm") is BACKENDS["slurm"].capabilities
    assert job_env_of("local") == JobEnv("HPCJOBS_JOB_ID", "HPCJOBS_ARRAY_INDEX", "#")


class _Half(BaseBackend):
    name = "half"
    directive_prefix = "#HALF"
    array_index_var = "HALF_INDEX"
    job_id_pattern = re.compile(r"[0-9]+")
    job_id_grammar = "digits"
    capabilities = Capabilities(logs_command=True)

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        return ["half-submit", str(script)]

    def config_argv(self) -> list[str]:  # implemented, but cluster_limits is not declared
        return ["half-config"]


def test_register_refuses_a_backend_that_breaks_the_contract() -> None:
    problems = contract_problems(_Half())
    assert "parse_submit is not implemented" in problems
    assert "capability logs_command is declared but logs_argv is not implemented" in problems
    assert any("config_argv is implemented but capability cluster_limits" in p for p in problems)
    with pytest.raises(BackendContractError, match="_Half"):
        register(_Half())
    assert "half" not in BACKENDS


class _HereWithCommands(_Half):
    name = "here"
    job_id_var = "HERE_JOB"
    capabilities = Capabilities(runs_here=True)
    config_argv = BaseBackend.config_argv


def test_a_backend_that_runs_here_implements_no_scheduler_command() -> None:
    problems = contract_problems(_HereWithCommands())
    assert problems == ["submit_argv is implemented but capability runs_here says there is no scheduler"]
    assert contract_problems(object()) == ["object is not a BaseBackend"]
