"""Hostile ``container:`` values: refused at their file and line with exit 2, or rendered as one encoded word.

The generator draws from all of Unicode, shell metacharacters, line breaks and option-looking
values (``--privileged``) for each of ``image``, ``mounts``, ``workdir`` and ``env``. A value is
either refused by the schema or the site checks, with the experiment file's line in the message
(and ``hpcjobs render`` exits 2, never runs anything), or accepted, when the rendered script
passes ``bash -n`` and the value is one word of the runtime's command line.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.container import parse_mount
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_experiment
from tests.helpers import invoke

ROOT = Path(__file__).resolve().parents[2]
SLURM_SITE = str(ROOT / "tests" / "sites" / "containers-slurm.yaml")

HOSTILE = ["--privileged", "-v", "a;id", "$(id)", "`id`", "a b", "a\nb", "a\rb", "a'b", 'a"b', "a|b", "a&b",
           "a>b", "x\x00y", "\u202e", "caf\u00e9", "a,b", "a:b:c:d", "/scratch/../etc", "/scratch/$HOME", "~root",
           "docker://x/y;reboot", "/scratch/a\tb", "", " ", "\x1b[31m", "/scratch/\u00e9", "HF_TOKEN", "1ABC"]
VALUES = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=20),
                   st.builds(lambda a, b: a + b, st.sampled_from(["/scratch/", "docker://", "-", "~/", "/"]),
                             st.text(max_size=12)))


def _write(tmp: Path, field: str, value: str) -> Path:
    container: dict[str, object] = {"image": "docker://nvcr.io/nvidia/pytorch:24.05-py3", "runtime": "apptainer"}
    container[field] = [value] if field in ("mounts", "env") else value
    lines = ["name: hostile", "command: python train.py", "container:"]
    lines += [f"  {key}: {json.dumps(val)}" for key, val in container.items()]
    path = tmp / "exp.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _container_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("apptainer exec "))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["image", "mounts", "workdir", "env"]), value=VALUES)
def test_hostile_container_values_are_refused_at_their_line_or_one_word(tmp_path: Path, field: str,
                                                                        value: str) -> None:
    path = _write(tmp_path, field, value)
    try:
        rendered = render_experiment(path, site=SLURM_SITE)
    except ConfigError as exc:
        assert re.search(rf"{re.escape(str(path))}:\d+", str(exc)), f"no file:line in {exc}"
        return
    proc = subprocess.run(["bash", "-n"], input=rendered.text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    words = shlex.split(_container_line(rendered.text))
    if field == "image":
        home = value == "~" or value.startswith("~/")  # path_word: a leading ~ or ~/ is the job's home folder
        assert words[-4:-2] == [value.replace("~", "$HOME", 1) if home else value, "bash"]
    elif field == "mounts":
        mount = parse_mount(value)
        source = "$HOME" + mount.source[1:] if mount.source.startswith("~") else mount.source
        expected = f"{source}:{mount.target}" + (":ro" if mount.read_only else "")
        assert words[words.index(expected) - 1] == "--bind" and words.count(expected) == 1
    elif field == "workdir":
        assert words[words.index("--pwd") + 1] == value
    else:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value), value
        assert value in rendered.text.split("for hpcjobs_name in ", 1)[1].split(";", 1)[0].split()


@pytest.mark.parametrize(("field", "value"), [("image", "docker://x/y;reboot"), ("image", "--privileged"),
                                              ("mounts", "/scratch/a\nb"), ("workdir", "/w`id`"),
                                              ("env", "GITHUB_TOKEN"), ("runtime", "docker")])
def test_bad_container_input_exits_2_at_its_line(tmp_path: Path, field: str, value: str) -> None:
    path = _write(tmp_path, field, value)
    code, out = invoke("render", str(path), "--site", SLURM_SITE)
    assert code == 2, out
    assert re.search(r"exp\.yaml:\d+", out), out
    assert "Traceback" not in out
