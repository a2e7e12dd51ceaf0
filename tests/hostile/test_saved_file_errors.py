"""A corrupt saved scheduler file is bad input (exit 2, naming the file); the same fault live is exit 1.

``report --from-file`` and ``advise --from-file`` read saved sacct text and JSON, PBS ``qstat`` JSON and
text, Torque ``qstat -x`` XML and PBS/Torque accounting logs. Each capture of tests/data is corrupted
in generated ways (null, infinite, NaN, negative, huge, boolean, list and object values in ids and
fields, truncation, a wrong top-level type, an XML DOCTYPE with entities); the reader's answer is
exit 2 with the file's name and what was expected, or (for a field the reader takes as missing) a
report; never a traceback, never exit 1. The parser's error from a live scheduler call (the process
seam faked) stays exit 1 naming the command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hpcjobs.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
SACCT_JSON = DATA / "slurm" / "testbed-22.05_sacct.json"
SACCT_TEXT = DATA / "slurm" / "testbed-22.05_sacct-X-parsable2.txt"
QSTAT_JSON = DATA / "pbs" / "constructed_qstat-F-json_arrays-exit.json"
QSTAT_TEXT = DATA / "pbs" / "constructed_qstat-f_arrays-exit-edge-cases.txt"
TORQUE_XML = DATA / "torque" / "fyrd_torque-stanford_qstat-x.xml"
PBS_LOG = DATA / "pbs" / "constructed_accounting_20221014"
TORQUE_LOG = DATA / "torque" / "constructed_accounting_20170405"

#: The JSON values no scheduler writes where an id, a name or a number goes (Python's json writes Infinity/NaN).
BAD_VALUES: dict[str, Any] = {"null": None, "inf": float("inf"), "nan": float("nan"), "negative": -5,
                              "huge": 10**30, "bool": True, "list": [1], "object": {"a": 1}}
#: The same as text, for the text formats (sacct text, qstat -f text, XML, accounting logs).
BAD_TEXTS: dict[str, str] = {"empty": "", "inf": "inf", "nan": "NaN", "negative": "-5", "huge": "9" * 30,
                             "bool": "True", "garbage": "\x1b[2J?"}

#: An XML document whose entities, expanded, would be 10**9 "lol"s (the "billion laughs").
BILLION_LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
                  + "".join(f' <!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">\n'
                            for i in range(1, 10))
                  + ']>\n<Data><Job><Job_Id>1.x</Job_Id><Job_Name>&lol9;</Job_Name></Job></Data>\n')


def _json_case(source: Path, change: Callable[[Any], Any]) -> str:
    doc = json.loads(source.read_text())
    changed = change(doc)
    return json.dumps(doc if changed is None else changed)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    def change(doc: Any) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key] if not callable(key) else key(node)
        node[path[-1]] = value
    return change


def _first_job(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["Jobs"][next(iter(doc["Jobs"]))]


def refused_cases() -> Iterator[tuple[str, str, str]]:
    """``(case, file suffix, text)`` of corruptions every reader must refuse: exit 2 naming the file."""
    for name, value in BAD_VALUES.items():
        yield f"sacct-json job_id {name}", "json", _json_case(SACCT_JSON, _set(("jobs", 0, "job_id"), value))
        if value is not None:
            for field in ("name", "user", "partition", "account"):
                yield (f"sacct-json {field} {name}", "json",
                       _json_case(SACCT_JSON, _set(("jobs", 0, field), value)))
            yield f"sacct-json job {name}", "json", _json_case(SACCT_JSON, _set(("jobs", 0), value))
        if not isinstance(value, dict) and value is not None:  # an object without attributes is a job known by id
            yield f"qstat-json job {name}", "json", _json_case(QSTAT_JSON, lambda d, v=value: d["Jobs"].update(
                {next(iter(d["Jobs"])): v}))
            yield f"qstat-json Jobs {name}", "json", _json_case(QSTAT_JSON, _set(("Jobs",), value))
    for top in ([1, 2], "jobs", 7, None):
        yield f"json top level {json.dumps(top)}", "json", json.dumps(top)
    for source, suffix in ((SACCT_JSON, "json"), (QSTAT_JSON, "json"), (TORQUE_XML, "xml")):
        text = source.read_text()
        for cut in (len(text) // 3, len(text) - 2):
            yield f"{source.name} truncated at {cut}", suffix, text[:cut]
    xml = TORQUE_XML.read_text()
    yield "torque-xml DOCTYPE", "xml", '<?xml version="1.0"?>\n<!DOCTYPE Data [<!ENTITY n "x">]>\n' + xml
    yield "torque-xml billion laughs", "xml", BILLION_LAUGHS
    yield ("torque-xml external entity", "xml",
           '<!DOCTYPE Data [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<Data><Job><Job_Id>1.x</Job_Id>'
           "<Job_Name>&e;</Job_Name></Job></Data>\n")
    yield "torque-xml undefined entity", "xml", xml.replace("int_tmux", "&undefined;", 1)
    header, first, *rest = SACCT_TEXT.read_text().splitlines()
    for name, bad in BAD_TEXTS.items():
        if name != "empty":
            line = "|".join([bad, *first.split("|")[1:]])
            yield f"sacct-text JobID {name}", "txt", "\n".join([header, line, *rest]) + "\n"


def tolerated_cases() -> Iterator[tuple[str, str, str]]:
    """``(case, suffix, text)`` of corrupt fields that a reader may take as missing: a report, or exit 2."""
    for name, value in BAD_VALUES.items():
        for field in ("Job_Name", "Exit_status", "Resource_List", "resources_used", "ctime", "job_state"):
            yield f"qstat-json {field} {name}", "json", _json_case(QSTAT_JSON, _set((_first_job, field), value))
        for field in ("time", "tres", "exit_code", "steps", "state", "comment", "array"):
            yield f"sacct-json {field} {name}", "json", _json_case(SACCT_JSON, _set(("jobs", 0, field), value))
    xml = TORQUE_XML.read_text()
    qtext = QSTAT_TEXT.read_text()
    for name, bad in BAD_TEXTS.items():
        for tag in ("ctime", "Job_Id", "exit_status", "walltime", "mem", "start_time"):
            start, end = xml.index(f"<{tag}>") + len(tag) + 2, xml.index(f"</{tag}>")
            yield f"torque-xml {tag} {name}", "xml", xml[:start] + bad.replace("<", "") + xml[end:]
        for key in ("ctime", "Exit_status", "Resource_List.ncpus", "resources_used.walltime"):
            at = qtext.find(f"    {key} = ")
            if at >= 0:
                end = qtext.index("\n", at)
                yield f"qstat-text {key} {name}", "txt", qtext[:at] + f"    {key} = {bad}" + qtext[end:]
        for log, label in ((PBS_LOG, "pbs-log"), (TORQUE_LOG, "torque-log")):
            text = log.read_text()
            for key in ("ctime=", "start=", "Resource_List.walltime=", "resources_used.mem=", "Exit_status="):
                at = text.find(key)
                if at >= 0:
                    end = min(i for i in (text.find(" ", at), text.find("\n", at)) if i >= 0)
                    yield f"{label} {key} {name}", "log", text[:at + len(key)] + bad.replace(" ", "") + text[end:]
    for log, label in ((PBS_LOG, "pbs-log"), (TORQUE_LOG, "torque-log"), (QSTAT_TEXT, "qstat-text")):
        text = log.read_text()
        yield f"{label} truncated", "log" if "log" in label else "txt", text[:len(text) // 2]


def _report(path: Path, *more: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["report", "--from-file", str(path), "--json", *more])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {result.exception!r}\n{result.output}")
    return result.exit_code, " ".join(result.output.split())


def _write(tmp_path: Path, suffix: str, text: str) -> Path:
    path = tmp_path / f"saved.{suffix}"
    path.write_text(text, encoding="utf-8")
    return path


REFUSED = list(refused_cases())
TOLERATED = list(tolerated_cases())


@pytest.mark.parametrize(("case", "suffix", "text"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_corrupt_saved_file_exits_2_naming_the_file(tmp_path: Path, case: str, suffix: str, text: str) -> None:
    path = _write(tmp_path, suffix, text)
    code, out = _report(path)
    assert code == 2, (case, out)
    assert str(path) in out and "Traceback" not in out, (case, out)


@pytest.mark.parametrize(("case", "suffix", "text"), TOLERATED, ids=[c[0] for c in TOLERATED])
def test_a_corrupt_field_is_read_as_missing_or_refused(tmp_path: Path, case: str, suffix: str, text: str) -> None:
    path = _write(tmp_path, suffix, text)
    code, out = _report(path)
    assert code in (0, 2), (case, out)
    assert code == 0 or (str(path) in out and "Traceback" not in out), (case, out)


@pytest.mark.parametrize("case", ["sacct-json job_id null", "torque-xml DOCTYPE", "qstat-json Jobs list"])
def test_advise_from_file_says_the_same(tmp_path: Path, case: str) -> None:
    _, suffix, text = next(c for c in REFUSED if c[0] == case)
    path = _write(tmp_path, suffix, text)
    result = CliRunner().invoke(main, ["advise", "--from-file", str(path)])
    assert result.exit_code == 2 and str(path) in " ".join(result.output.split()), result.output


def test_the_file_error_says_what_was_expected(tmp_path: Path) -> None:
    _, _, text = next(c for c in REFUSED if c[0] == "sacct-json job_id inf")
    code, out = _report(_write(tmp_path, "json", text))
    assert code == 2 and "jobs[0].job_id" in out and "Infinity" in out and "expected sacct --json output" in out, out
    _, _, text = next(c for c in REFUSED if c[0] == "torque-xml billion laughs")
    code, out = _report(_write(tmp_path, "xml", text))
    assert code == 2 and "DOCTYPE" in out and "line 2" in out and "Torque qstat -f -x XML" in out, out


# --------------------------------------------------------------------------- the same faults, live: exit 1

def test_a_live_sacct_answer_with_a_bad_job_id_is_the_commands_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcjobs import process
    from hpcjobs.accounting.sources.slurm import SACCT_QUERY_FIELDS
    from hpcjobs.process import CommandResult

    def fake(argv: list[str], **_: Any) -> CommandResult:
        return CommandResult(tuple(argv), 0, "|".join(["inf", *[""] * (len(SACCT_QUERY_FIELDS) - 1)]) + "\n", "", 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    result = CliRunner().invoke(main, ["report", "--json"])
    assert result.exit_code == 1, result.output
    assert "sacct --noheader" in result.output and "'inf'" in result.output and "Traceback" not in result.output


@pytest.mark.usefixtures("pbs_clients_stubbed")
@pytest.mark.parametrize("answer", [BILLION_LAUGHS, "<Data><Job><Job_Id>1.x</Job_Id>"])
def test_live_torque_xml_that_cannot_be_read_names_qstat(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    from hpcjobs import process
    from hpcjobs.errors import SchedulerOutputError
    from hpcjobs.process import CommandResult
    from hpcjobs.schedulers.client import SchedulerClient
    from hpcjobs.schedulers.registry import get_backend

    def fake(argv: list[str], **_: Any) -> CommandResult:
        return CommandResult(tuple(argv), 0, answer, "", 0.0)

    monkeypatch.setattr(process, "run_command", fake)
    with pytest.raises(SchedulerOutputError) as caught:
        SchedulerClient(get_backend("torque")).status(["1.x"])
    assert caught.value.exit_code == 1 and caught.value.argv and Path(caught.value.argv[0]).name == "qstat"
    assert "qstat" in str(caught.value)
