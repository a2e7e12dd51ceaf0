"""Values read from files never become options: a ledger's job id ``--user=daemon`` made ``scancel --user=daemon``.

Every backend declares its job id grammar (``job_id_pattern``, :mod:`hpcjobs.schedulers.base`) and checks
every id against it in its argv builders (``check_job_ids``) before any argv exists; ``scancel``, ``qdel``,
``qstat``, ``kubectl patch`` and the ``docker`` commands also get their ids after ``--``. The error is
typed (:class:`hpcjobs.errors.UnsafeValueError`, exit 2), shows the value with ``repr`` and names the
file it came from (the ledger, through :func:`hpcjobs.ids.values_from`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcjobs import process
from hpcjobs.accounting.sources.slurm import sacct_accounting_argv
from hpcjobs.cli import main
from hpcjobs.errors import ConfigError, UnsafeValueError
from hpcjobs.ids import values_from
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend, scheduler_names
from hpcjobs.sweep.ledger.store import Ledger
from hpcjobs.sweep.prepare import prepare_sweep
from hpcjobs.sweep.submitter import RetryPolicy, SweepSubmitter, open_ledger
from tests.hostile._lying_helpers import LyingSlurm, experiment

ROOT = Path(__file__).resolve().parents[2]
SITE = str(ROOT / "tests" / "sites" / "hpctest.yaml")
NAMES = sorted(scheduler_names())  # the local runner (runs_here) builds no command to pass an id to

#: A character no id holds: whitespace, control and format characters of every kind.
BAD_CHAR = st.one_of(st.characters(categories=("Zs", "Zl", "Zp", "Cc", "Cf")), st.sampled_from(" \t\n\r\x00\x1b"))
#: Values that must never reach an argv: an option, or text with whitespace or a control character in it.
HOSTILE = st.one_of(
    st.text(max_size=12).map(lambda t: "-" + t),
    st.sampled_from(["--user=daemon", "-u", "--", "-1", "--signal=KILL", "--jobs=1", "-x -f"]),
    st.builds(lambda a, bad, b: a + bad + b, st.text(max_size=6), BAD_CHAR, st.text(max_size=6)),
)
#: Ids each scheduler prints, which must stay accepted.
VALID = {
    "slurm": ["123", "123_4", "123_[1-5]", "123_[1,3-5%2]", "123+1", "4294967295"],
    "pbspro": ["123", "123.server", "123[].server", "123[4].server", "123[1-5].srv.example.org", "7.pbs-standin"],
    "torque": ["45.master23", "673175[].srv", "673175[3].srv"],
    "kubernetes": ["default/capk-c3165f35-0-6-bb3e499817a3c850", "team-a/x-x-0-1i-0123456789abcdef", "job"],
    "swarm": ["cap-f6d56752-0-6-0825086bd9dfb5c5", "Svc_1.b-2", "0123456789ab"],
}


def _builders(name: str):
    """``(label, build)`` of every argv builder of the backend that takes ids, ``build(ids) -> argv(s)``."""
    backend = get_backend(name)
    caps = backend.capabilities
    out = [("status_argv", backend.status_argv), ("cancel_argv", backend.cancel_argv),
           ("cancel_argvs", backend.cancel_argvs)]
    for flag, hooks in (("status_fallback", ("fallback_status_argv",)), ("retire", ("retire_argv", "inspect_argv"))):
        if getattr(caps, flag):
            out += [(hook, getattr(backend, hook)) for hook in hooks]
    if caps.logs_command:
        out.append(("logs_argv", lambda ids: [backend.logs_argv(i) for i in ids]))
    if caps.dependencies:  # the families whose submissions wait for other jobs' ids
        out.append(("submit_argv", lambda ids: backend.submit_argv(Path("/sub/job.sh"),
                                                                   SubmitOptions(dependencies=tuple(ids)))))
    return out


# ------------------------------------------------------------------------------ the grammars


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None)
@given(value=HOSTILE)
def test_no_hostile_value_reaches_an_argv(name: str, value: str) -> None:
    backend = get_backend(name)
    assert not backend.valid_job_id(value)
    with pytest.raises(UnsafeValueError) as info:
        backend.check_job_ids([VALID[name][0], value])
    assert repr(value)[:200] in str(info.value) or "bytes omitted" in str(info.value)
    for label, build in _builders(name):
        with pytest.raises(UnsafeValueError):
            build([value])
        with pytest.raises(UnsafeValueError, match=label and "not passed to any command"):
            build([VALID[name][0], value])


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_id_of_the_grammar_is_accepted(name: str, data: st.DataObject) -> None:
    backend = get_backend(name)
    value = data.draw(st.from_regex(backend.job_id_pattern, fullmatch=True))
    assert backend.valid_job_id(value) and backend.check_job_ids([value]) == [value]
    assert not value.startswith("-")
    builders = _builders(name) if name != "kubernetes" else [("status_argv", backend.status_argv)]
    for _label, build in builders:  # (kubernetes cancels each Job of a chunk: the count is in the name)
        build([value])


@pytest.mark.parametrize("name", NAMES)
def test_the_ids_schedulers_print_are_accepted_and_follow_double_dash(name: str) -> None:
    backend = get_backend(name)
    ids = VALID[name]
    assert all(backend.valid_job_id(i) for i in ids) and backend.check_job_ids(ids) == ids
    for _label, build in _builders(name):
        result = build(ids)
        for argv in (result if result and isinstance(result[0], list) else [result]):
            if "--" in argv:  # after it, nothing is an option
                assert not any(a.startswith("-") for a in argv[argv.index("--") + 1:]), argv


def test_double_dash_where_the_commands_take_ids_as_operands() -> None:
    assert get_backend("slurm").cancel_argv(["12", "13_[1-3]"]) == ["scancel", "--", "12", "13_[1-3]"]
    assert get_backend("pbspro").cancel_argv(["1.srv"]) == ["qdel", "--", "1.srv"]
    assert get_backend("torque").cancel_argv(["1.srv"]) == ["qdel", "--", "1.srv"]
    assert get_backend("pbspro").status_argv(["1.srv"])[-2:] == ["--", "1.srv"]
    assert get_backend("torque").status_argv(["1.srv"])[-2:] == ["--", "1.srv"]
    assert get_backend("swarm").retire_argv(["a-1"]) == ["docker", "service", "rm", "--", "a-1"]
    assert get_backend("slurm").status_argv(["12"])[-1] == "--jobs=12"  # an option's own value: one word


def test_a_single_string_is_not_a_list_of_ids() -> None:
    with pytest.raises(TypeError):
        get_backend("slurm").check_job_ids("123")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", NAMES)
def test_the_client_runs_nothing_with_a_hostile_id(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(process, "run_command", lambda argv, **kw: ran.append(list(argv)))
    client = SchedulerClient(get_backend(name))
    for call in (client.cancel, client.status):
        with pytest.raises(UnsafeValueError), values_from("/data/ledger.sqlite"):
            call([VALID[name][0], "--user=daemon"])
    assert ran == []


def test_the_error_names_the_file_and_the_value() -> None:
    with values_from("/x/hpcjobs-sweeps/s-1/ledger.sqlite"), pytest.raises(UnsafeValueError) as info:
        get_backend("slurm").cancel_argv(["--user=daemon"])
    err = info.value
    assert isinstance(err, ConfigError) and err.exit_code == 2
    assert err.source == "/x/hpcjobs-sweeps/s-1/ledger.sqlite" and err.value == "--user=daemon"
    assert str(err).startswith("/x/hpcjobs-sweeps/s-1/ledger.sqlite: '--user=daemon' is not a Slurm job id")


def test_sacct_accounting_ids_are_checked() -> None:
    assert sacct_accounting_argv(job_ids=["3", "5_1"])[-1].startswith("--")  # the fields etc. follow
    for bad in ("1,2", "--user=root", "1 2"):
        with pytest.raises(UnsafeValueError):
            sacct_accounting_argv(job_ids=[bad])


def test_swarm_names_from_docker_output_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs.accounting.sources.swarm import query_swarm

    ran: list[list[str]] = []

    def docker(argv, **kw):
        ran.append(list(argv))
        return CommandResult(tuple(argv), 0, "good-svc\n--filter=x\n", "", 0.0)

    monkeypatch.setattr(process, "run_command", docker)
    with pytest.raises(UnsafeValueError, match="docker service ls"):
        query_swarm()
    assert len(ran) == 1  # only the listing ran


# ------------------------------------------------------------------------------ a tampered ledger


@pytest.fixture
def tampered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, LyingSlurm]:
    """A Slurm sweep submitted to a fake Slurm, whose ledger then says its job is ``--user=daemon``."""
    fake = LyingSlurm()
    monkeypatch.setattr(process, "run_command", fake)
    monkeypatch.chdir(tmp_path)
    prepared = prepare_sweep(experiment(tmp_path, 3), site=SITE, root=tmp_path / "hpcjobs-sweeps")
    with open_ledger(prepared) as ledger:
        SweepSubmitter(prepared, ledger, SchedulerClient(get_backend("slurm")), sleep=fake.sleep,
                       retry=RetryPolicy(attempts=1, initial=0.1, lookup_s=1)).submit()
    con = sqlite3.connect(prepared.folder / "ledger.sqlite")
    with con:
        con.execute("UPDATE submissions SET job_id = '--user=daemon'")
        con.execute("UPDATE points SET job_id = '--user=daemon_' || array_index, array_job_id = '--user=daemon'")
    con.close()
    fake.calls.clear()
    return prepared.folder, fake


@pytest.mark.parametrize("command", ["cancel", "status"])
def test_a_hostile_ledger_id_is_refused_before_any_command(tampered: tuple[Path, LyingSlurm], command: str) -> None:
    folder, fake = tampered
    with Ledger.open(folder, allow_read_only=True) as ledger:
        before = ledger.summary()
    result = CliRunner().invoke(main, [command, folder.name])
    assert result.exit_code == 2, result.output
    assert "'--user=daemon'" in result.output and str(folder / "ledger.sqlite") in result.output
    assert fake.calls == []  # no scancel, no sacct
    assert not any(j.state == "CANCELLED" for j in fake.jobs.values())
    with Ledger.open(folder, allow_read_only=True) as ledger:
        assert ledger.summary() == before
