"""PBS Pro and Torque backends without a server: argv builders and parsing of real recorded output."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcjobs import process, states
from hpcjobs.errors import CommandError
from hpcjobs.process import CommandResult
from hpcjobs.schedulers.base import ArraySpec, SubmitOptions
from hpcjobs.schedulers.client import SchedulerClient
from hpcjobs.schedulers.registry import get_backend

DATA = Path(__file__).resolve().parent.parent / "data"


def test_pbspro_submit_argv():
    argv = get_backend("pbspro").submit_argv(Path("s.sh"), SubmitOptions(
        array=ArraySpec(0, 999, throttle=20), dependencies=("12.srv",), comment="hpcjobs:s:1:abcd1234"))
    assert argv == ["qsub", "-J", "0-999%20", "-W", "depend=afterok:12.srv", "-v", "HPCJOBS_TAG=hpcjobs:s:1:abcd1234",
                    "s.sh"]


def test_pbspro_array_of_one_task_is_a_range_pbs_accepts():
    # real OpenPBS refuses `-J 3-3` ("qsub: illegal -J value"); `3-4:2` is one subjob, index 3
    from hpcjobs.schedulers.pbs.backend import pbs_array_argument

    assert pbs_array_argument(ArraySpec(3, 3)) == "3-4:2"
    assert pbs_array_argument(ArraySpec(0, 0, throttle=1)) == "0-1:2%1"
    assert pbs_array_argument(ArraySpec(0, 4, step=5)) == "0-1:2"
    assert pbs_array_argument(ArraySpec(0, 1)) == "0-1"


def test_torque_submit_argv_uses_t_and_lists_steps():
    argv = get_backend("torque").submit_argv(Path("s.sh"), SubmitOptions(array=ArraySpec(0, 6, step=3, throttle=2)))
    assert argv == ["qsub", "-t", "0,3,6%2", "s.sh"]


def test_pbspro_status_argv_is_one_call():
    assert get_backend("pbspro").status_argv(["1.srv", "2[].srv"]) == [
        "qstat", "-E", "-x", "-f", "-F", "json", "-t", "--", "1.srv", "2[].srv"]


def test_pbspro_parse_status_real_openpbs_json():
    text = next((DATA / "pbs").rglob("*qstat-F-json-f-x_allusers.json")).read_text()
    recs = get_backend("pbspro").parse_status(text)
    assert recs, "the fixture has jobs"
    assert {r.state for r in recs} <= set(states.ALL_STATES)
    finished = [r for r in recs if r.state_raw == "F"]
    assert finished and all(r.state in states.TERMINAL_STATES for r in finished)


def test_torque_parse_status_real_xml():
    text = next((DATA / "torque").rglob("*qstat-x.xml")).read_text()
    recs = {r.job_id: r for r in get_backend("torque").parse_status(text)}
    assert recs["665199.superserver.stanford.edu"].state == states.RUNNING
    assert recs["667999.superserver.stanford.edu"].state == states.PENDING
    assert (recs["673174.superserver.stanford.edu"].state, recs["673174.superserver.stanford.edu"].exit_code) == (
        states.COMPLETED, 0)
    sub = recs["673175[19].fruster.stanford.edu"]
    assert (sub.array_task_id, sub.state) == (19, states.COMPLETED)
    # the subjob names another server than its parent: ids are matched by number
    assert get_backend("torque").same_job(sub.array_job_id, "673175[].superserver.stanford.edu")


@pytest.mark.usefixtures("pbs_clients_stubbed")
def test_unknown_ids_do_not_hide_known_ones(monkeypatch):
    known = next((DATA / "pbs").rglob("*qstat-F-json-f-1-x.json")).read_text()

    def fake(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        return CommandResult(tuple(argv), 153, known, "qstat: Unknown Job Id 999.pbs-standin\n", 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    recs = SchedulerClient(get_backend("pbspro")).status(["999.pbs-standin", "1000.pbs-standin"])
    assert recs


@pytest.mark.usefixtures("pbs_clients_stubbed")
def test_other_qstat_errors_raise(monkeypatch):
    def fake(argv, *, timeout=60.0, input=None, env=None, cwd=None, check=True):
        return CommandResult(tuple(argv), 1, "", "qstat: cannot connect to server pbs (errno=15010)\n", 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    with pytest.raises(CommandError, match="cannot connect"):
        SchedulerClient(get_backend("pbspro")).status(["1.pbs"])


def test_same_job_ignores_server_suffix():
    pbs = get_backend("pbspro")
    assert pbs.same_job("1234.gadi-pbs", "1234.gadi-pbs-01.gadi.nci.org.au")
    assert pbs.same_job("1234[7].a", "1234[7].b") and not pbs.same_job("1234[7].a", "1234[8].a")
