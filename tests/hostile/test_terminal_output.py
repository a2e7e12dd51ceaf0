"""Control and format characters in values never reach the terminal raw: every table and message escapes them.

A point parameter, a metric, an error's text or a job name of a saved sacct file may hold an escape
sequence, a carriage return, a bidi override (U+202E) or a line separator. What hpcjobs prints for a
person shows each of them escaped (``\\x1b``, ``\\u202e``: :func:`hpcjobs.errors.terminal_text`),
through the one console and table of :mod:`hpcjobs.commands.terminal`; ``--json`` keeps the raw value.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.cli import main
from hpcjobs.errors import TERMINAL_ESCAPED_CATEGORIES, terminal_text

ROOT = Path(__file__).resolve().parents[2]
SACCT_JSON = ROOT / "tests" / "data" / "slurm" / "testbed-22.05_sacct.json"

#: One character of each kind that acts on a terminal: CSI, ESC, BEL, CR, a C1 control, DEL, bidi
#: override and isolate, BOM (a format character), line and paragraph separators, a tag character.
HOSTILE = "a\x1b[31mB\u202eC\x07\rD\x9b\x7f\u2066E\ufeff\u2028F\u2029\U000e0041G\tH\x1b]0;title\x07"

#: Any Unicode text (hypothesis leaves out lone surrogates, which no JSON or YAML value holds).
ANY_TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)


def yaml_quoted(value: str) -> str:
    """``value`` as a YAML double-quoted scalar: printable ASCII as it is, every other character as ``\\UXXXXXXXX``."""
    return '"' + "".join(ch if " " <= ch <= "~" and ch not in '"\\' else f"\\U{ord(ch):08x}" for ch in value) + '"'


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` that a terminal would act on: every one :func:`terminal_text` escapes, but newline
    (the layout's own)."""
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in TERMINAL_ESCAPED_CATEGORIES]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"hpcjobs {' '.join(args)} crashed: {result.exception!r}\n{result.output}")
    return result.exit_code, result.output


@given(ANY_TEXT)
def test_terminal_text_leaves_nothing_a_terminal_acts_on(value: str) -> None:
    shown = terminal_text(value)
    assert not raw_controls(shown) and "\n" not in shown
    kept = terminal_text(value, keep="\n")
    assert kept.count("\n") == value.count("\n") and not raw_controls(kept)
    if not raw_controls(value) and "\n" not in value:
        assert shown == value  # letters of every script, emoji and spaces are kept as they are


# --------------------------------------------------------------------------- a local sweep holding HOSTILE

EXPERIMENT = """\
name: hostile-values
site: local
script: |
  python3 -c 'import json, os; print("label:", os.environ["label"]); json.dump({"tag": os.environ["label"] + "!",
    "acc": 0.5}, open(os.path.join(os.environ["HPCJOBS_RUN_DIR"], "metrics.json"), "w"))'
  test "$n" != 2 || { echo "failed on purpose" >&2; exit 3; }
results:
  - {file: metrics.json}
sweep:
  grid:
    label: [%s]
    n: [1, 2]
"""


@pytest.fixture(scope="module")
def hostile_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished local sweep whose parameter ``label`` and metric ``tag`` hold :data:`HOSTILE`: (folder, sweep id)."""
    here = tmp_path_factory.mktemp("hostile")
    (here / "exp.yaml").write_text(EXPERIMENT % yaml_quoted(HOSTILE))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(here)
        code, out = _run("sweep", "exp.yaml", "--site", "local", "--json", "--workers", "2")
    assert code == 0, out
    return here, str(json.loads(out)["sweep_id"])


def _saved_sacct(folder: Path, value: str) -> Path:
    """The sacct --json capture with ``value`` as the first job's name, user and partition."""
    doc = json.loads(SACCT_JSON.read_text())
    for key in ("name", "user", "partition"):
        doc["jobs"][0][key] = value
    path = folder / "sacct.json"
    path.write_text(json.dumps(doc))
    return path


#: Every command that prints a table or a message built from a value, with the arguments that show HOSTILE
#: (``{root}``: the sweep folder's parent, ``{sweep}``: the sweep id, ``{sacct}``: a saved sacct file).
COMMANDS = {
    "sweep --dry-run": ("sweep", "{here}/exp.yaml", "--site", "local", "--dry-run", "--root", "{here}/dry"),
    "status": ("status", "{sweep}", "--root", "{root}"),
    "status --points": ("status", "{sweep}", "--points", "--root", "{root}"),
    "results": ("results", "{sweep}", "--root", "{root}"),
    "logs": ("logs", "{sweep}", "--root", "{root}"),
    "ls": ("ls", "--root", "{root}"),
    "report": ("report", "--from-file", "{sacct}"),
    "report --jobs": ("report", "--from-file", "{sacct}", "--jobs", "--columns", "job_id,job_name,user,partition"),
    "advise --from-file": ("advise", "--from-file", "{sacct}", "--min-runs", "1"),
    "error (exit 2)": ("status", HOSTILE, "--root", "{root}"),
    "click error": ("logs", "{sweep}", "--state", HOSTILE, "--root", "{root}"),
}
#: Where HOSTILE (escaped) must show in the output: the commands whose output holds it.
SHOWS_IT = {"sweep --dry-run", "status --points", "results", "logs", "report", "report --jobs", "error (exit 2)"}
#: What a terminal may be given raw besides the layout's newlines: a log file's own tabs (``logs``), which move
#: the cursor to the next tab stop and can neither redraw nor hide anything.
LAYOUT = {"logs": "\t"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_prints_values_escaped(hostile_sweep: tuple[Path, str], command: str) -> None:
    here, sweep_id = hostile_sweep
    sacct = _saved_sacct(here, HOSTILE)
    fields = {"here": str(here), "root": str(here / "hpcjobs-sweeps"), "sweep": sweep_id, "sacct": str(sacct)}
    args = [a.format(**fields) if a != HOSTILE else a for a in COMMANDS[command]]
    code, out = _run(*args)
    assert code in (0, 1, 2), out
    raw = [ch for ch in raw_controls(out) if ch not in LAYOUT.get(command, "")]
    assert not raw, (command, sorted(set(raw)), out)
    if command in SHOWS_IT:  # the value's start, escaped for the terminal (or, in a JSON cell, by JSON)
        shown = " ".join(out.split())  # a cell may wrap
        assert terminal_text(HOSTILE)[:12] in shown or json.dumps(HOSTILE)[1:13] in shown, (command, out)


def test_json_keeps_the_raw_values(hostile_sweep: tuple[Path, str]) -> None:
    here, sweep_id = hostile_sweep
    root = str(here / "hpcjobs-sweeps")
    code, out = _run("results", sweep_id, "--root", root, "--json")
    assert code == 0, out
    records = json.loads(out)
    assert {r["label"] for r in records} == {HOSTILE} and HOSTILE + "!" in {r["tag"] for r in records}
    code, out = _run("status", sweep_id, "--root", root, "--json")
    assert code == 0 and {p["params"]["label"] for p in json.loads(out)["points"]} == {HOSTILE}
    code, out = _run("report", "--from-file", str(_saved_sacct(here, HOSTILE)), "--jobs", "--json")
    assert code == 0 and json.loads(out)["jobs"][0]["job_name"] == HOSTILE


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=ANY_TEXT)
def test_any_text_in_a_saved_sacct_file(tmp_path: Path, value: str) -> None:
    """Job name, user and partition of a saved ``sacct --json``: escaped in ``report --jobs``, raw in its JSON."""
    sacct = _saved_sacct(tmp_path, value)
    columns = ("--jobs", "--columns", "job_id,job_name,user,partition")
    code, out = _run("report", "--from-file", str(sacct), *columns)
    assert code == 0 and not raw_controls(out), out
    code, out = _run("report", "--from-file", str(sacct), *columns, "--json")
    row = json.loads(out)["jobs"][0]
    assert code == 0 and (row["job_name"], row["user"], row["partition"]) == (value, value, value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=ANY_TEXT)
def test_any_text_in_a_parameter_and_an_error(tmp_path: Path, value: str) -> None:
    """A point parameter shown by ``sweep --dry-run``, and a name in an error message (exit 2)."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: any-text\nsite: local\ncommand: 'true'\nsweep:\n  grid:\n    v: [{yaml_quoted(value)}]\n")
    code, out = _run("sweep", str(exp), "--dry-run", "--root", str(tmp_path / "sweeps"))
    assert not raw_controls(out), out
    code, json_out = _run("sweep", str(exp), "--dry-run", "--json", "--root", str(tmp_path / "sweeps"))
    if code == 0:
        assert json.loads(json_out)["point_list"][0]["params"]["v"] == value
    code, out = _run("status", value, "--root", str(tmp_path / "sweeps"))
    assert code == 2 and not raw_controls(out), out


def test_a_multiline_error_keeps_its_lines() -> None:
    """An error of several problems is printed one line each: only the layout's newlines are raw."""
    code, out = _run("report", "--since", "x\x1b[2J", "--until", "y")
    assert code == 2 and not raw_controls(out) and "\\x1b[2J" in out, out


def test_commands_print_through_the_escaping_console_and_table() -> None:
    """No command makes its own rich table or console: each goes through :mod:`hpcjobs.commands.terminal`."""
    offenders = []
    for path in [ROOT / "hpcjobs" / "cli.py", *sorted((ROOT / "hpcjobs" / "commands").glob("*.py"))]:
        if path.name == "terminal.py":
            continue
        text = path.read_text(encoding="utf-8").replace("TerminalTable(", "").replace("TerminalConsole(", "")
        for needle in ("from rich.table import", "from rich.console import", "Table(", "Console("):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not offenders, offenders
