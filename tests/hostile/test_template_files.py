"""Templates that cannot render: a clear error naming the file, never ``UnicodeDecodeError`` or ``RecursionError``.

A template that is not UTF-8 is refused with its file, line and the byte offset of the first bad byte
(:class:`hpcjobs.render.templating.TemplateLoader`); templates that extend, include or import each
other in a cycle of any length are named link by link (:func:`hpcjobs.render.templating.template_cycle`);
an experiment's ``template:`` that leaves the template folders or names no template is reported at
that key's line of the experiment file (or at ``--set``), and ``hpcjobs sweep`` writes nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from helpers import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.sites import find_site, load_site_file
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve

FIXTURE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _render(template: str, folder: Path) -> str:
    """Render a small experiment on the local site with ``template`` from ``folder``."""
    site = load_site_file(find_site("local"))
    job = resolve(Experiment.model_validate({"name": "t", "command": "echo hi"}), site)
    return render_job(job, template=template, template_dirs=(str(folder),)).text


def _fresh(parent: Path) -> Path:
    """A new folder for one example (the Jinja environment is cached per search path)."""
    return Path(tempfile.mkdtemp(dir=parent))


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


NOT_UTF8 = st.builds(lambda head, bad, tail: head + bad + tail,
                     st.text(max_size=300).map(lambda t: t.encode("utf-8")),
                     st.binary(min_size=1, max_size=8).filter(_not_utf8),
                     st.binary(max_size=50)).filter(_not_utf8)


@FIXTURE
@given(data=NOT_UTF8)
def test_a_template_that_is_not_utf8_is_named_with_its_line_and_offset(data: bytes, tmp_path: Path) -> None:
    folder = _fresh(tmp_path)
    (folder / "bad.sh.j2").write_bytes(data)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset, line = exc.start, data.count(b"\n", 0, exc.start) + 1
    with pytest.raises(ConfigError) as caught:
        _render("bad.sh.j2", folder)
    (problem,) = caught.value.problems
    assert problem.file == str(folder / "bad.sh.j2")
    assert problem.line == line
    assert f"byte offset {offset:,} holds" in problem.message


LINKS = {"extends": '{{% extends "{}" %}}\n', "includes": '{{% include "{}" %}}\n',
         "imports": '{{% import "{}" as m %}}\n'}


@FIXTURE
@given(hows=st.lists(st.sampled_from(sorted(LINKS)), min_size=1, max_size=4), lead=st.integers(0, 2))
def test_templates_in_a_cycle_are_named_link_by_link(hows: list[str], lead: int, tmp_path: Path) -> None:
    """Template ``c<i>`` links to ``c<i+1>`` and the last back to ``c0``; ``lead`` templates lead into the cycle."""
    folder = _fresh(tmp_path)
    names = [f"c{i}.sh.j2" for i in range(len(hows))]
    for i, how in enumerate(hows):
        (folder / names[i]).write_text("# line one\n" * i + LINKS[how].format(names[(i + 1) % len(names)]),
                                       encoding="utf-8")
    first = names[0]
    for j in range(lead):  # a chain into the cycle: entry0 -> entry1 -> ... -> c0
        target = f"entry{j + 1}.sh.j2" if j + 1 < lead else names[0]
        (folder / f"entry{j}.sh.j2").write_text(LINKS["includes"].format(target), encoding="utf-8")
        first = "entry0.sh.j2"
    with pytest.raises(ConfigError) as caught:
        _render(first, folder)
    message = str(caught.value)
    links = enumerate(zip(names, hows, strict=True))
    chain = " -> ".join(f"{name} ({folder / name}:{i + 1} {how})" for i, (name, how) in links)
    assert f"{chain} -> {names[0]}" in message, message
    assert "RecursionError" not in message


def test_a_macro_that_calls_itself_without_end_is_an_error_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "loop.sh.j2").write_text("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="recursed without end"):
        _render("loop.sh.j2", tmp_path)


def test_a_recursion_that_ends_still_renders(tmp_path: Path) -> None:
    """Cycles are looked for only once rendering recursed without end: a guarded self-include is fine."""
    (tmp_path / "count.sh.j2").write_text(
        "{% set n = (n | default(0)) + 1 %}{{ n }}\n{% if n < 3 %}{% include 'count.sh.j2' %}{% endif %}",
        encoding="utf-8")
    assert _render("count.sh.j2", tmp_path).split() == ["1", "2", "3"]


# ------------------------------------------------------------------- the experiment's template: key


BAD_NAMES = ["../../etc/passwd", "../outside.sh.j2", "a/../../b.sh.j2", "/etc/passwd", "missing.sh.j2",
             "sub/missing.sh.j2"]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("command", ["render", "sweep"])
def test_a_bad_template_key_is_reported_at_its_line(command: str, name: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCJOBS_SWEEP_ROOT", raising=False)
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(f"name: t\ncommand: echo hi\n\ntemplate: {name!r}\n", encoding="utf-8")
    code, output = invoke(command, str(experiment), "--site", "local")
    assert code == 2, output
    assert f"{experiment}:4:1: template: template {name!r}" in output, output
    assert ("outside the template folders" if ".." in name or name.startswith("/") else "not found") in output
    assert not (tmp_path / "hpcjobs-sweeps").exists(), "the sweep was written before its template was checked"


def test_a_bad_template_given_with_set_is_reported_at_set(tmp_path: Path) -> None:
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("name: t\ncommand: echo hi\n", encoding="utf-8")
    code, output = invoke("render", str(experiment), "--site", "local", "--set", "template=../x.sh.j2")
    assert code == 2, output
    assert "--set: template: template '../x.sh.j2' is outside the template folders" in output
