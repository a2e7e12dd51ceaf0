"""The bash script a command becomes on a login node (:func:`hpcjobs.transport.ssh.command_script`).

The scripts run here under the same ``bash --noprofile --norc -s`` that ssh starts there: what is
checked is bash's reading of them, which is the same on both ends. Any argv, environment value,
working folder and standard input (all of Unicode but NUL, any bytes) arrives exactly; a script cut
anywhere runs nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.errors import ConfigError
from hpcjobs.process import run_here
from hpcjobs.transport.ssh import command_script

BASH = ["bash", "--noprofile", "--norc", "-s"]
ECHO_ARGV = [sys.executable, "-c", "import json, os, sys; print(json.dumps([sys.argv[1:], os.getcwd(), "
             "os.environ.get('HPCJOBS_T'), sys.stdin.buffer.read().hex()]))"]

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)


def run(script: str) -> list:
    result = run_here(BASH, input=script, timeout=30)
    return json.loads(result.stdout)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(texts, max_size=4), value=texts, data=st.binary(max_size=200))
def test_argv_env_and_input_arrive_exactly(tmp_path: Path, args: list[str], value: str, data: bytes) -> None:
    script = command_script([*ECHO_ARGV, *args], env={"HPCJOBS_T": value}, cwd=tmp_path, input=data)
    got_args, cwd, env, stdin = run(script)
    assert got_args == args
    assert cwd == str(tmp_path)
    assert env == value
    assert bytes.fromhex(stdin) == data


@pytest.mark.parametrize("hostile", ["$(touch {m})", "`touch {m}`", "'; touch {m}; '", "\n touch {m}\n",
                                     "-c touch {m}", "}}; touch {m}; {{", "\\\n touch {m}"])
def test_a_hostile_value_stays_data(tmp_path: Path, hostile: str) -> None:
    marker = tmp_path / "ran"
    value = hostile.format(m=marker)
    script = command_script([*ECHO_ARGV, value], env={"HPCJOBS_T": value}, cwd=tmp_path, input=value)
    got_args, _cwd, env, _stdin = run(script)
    assert got_args == [value] and env == value
    assert not marker.exists()


def test_a_folder_with_a_leading_dash_is_a_folder(tmp_path: Path) -> None:
    odd = tmp_path / "-P"
    odd.mkdir()
    _args, cwd, _env, _stdin = run(command_script(ECHO_ARGV, cwd=odd))
    assert cwd == str(odd)


def test_without_input_the_command_reads_nothing(tmp_path: Path) -> None:
    """Standard input is /dev/null: the command never reads the rest of the script as its input."""
    script = command_script(ECHO_ARGV, cwd=tmp_path)
    assert run(script)[3] == ""


def test_a_missing_folder_stops_before_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = command_script(["touch", str(marker)], cwd=tmp_path / "missing")
    result = run_here(BASH, input=script, timeout=30, check=False)
    assert result.returncode != 0 and not marker.exists()


def test_a_cut_script_runs_nothing(tmp_path: Path) -> None:
    """The whole script is one { ... } group: bash runs none of it until it has read the closing brace."""
    marker = tmp_path / "ran"
    script = command_script(["touch", str(marker)], cwd=tmp_path, input=b"x" * 5000)
    assert script.endswith("}\n")
    for cut in sorted({1, 2, len(script) // 3, len(script) // 2, len(script) - 3, len(script) - 2}):
        result = run_here(BASH, input=script[:cut], timeout=30, check=False)
        assert result.returncode != 0, cut
        assert not marker.exists(), f"a script cut at {cut} of {len(script)} characters ran its command"
    run_here(BASH, input=script, timeout=30)
    assert marker.exists()


def test_an_environment_name_that_is_no_shell_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot be set"):
        command_script(["true"], env={"A=B": "x"})
    with pytest.raises(ConfigError):
        command_script(["true"], env={"1A": "x"})
