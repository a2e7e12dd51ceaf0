"""Every value hpcjobs writes into a script reaches the job as literal data, never as code.

Hypothesis renders hostile values ($(...), backticks, quotes, newlines, ;, globbing, unicode),
runs the rendered script with bash, and reads the exact values back.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.render.script import render_job
from hpcjobs.resolve import resolve

LOCAL = SiteConfig.model_validate({"name": "local", "scheduler": "local"})

HOSTILE = ["$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "a\nb\n", "*",
           "$HOME", "\\", "${IFS}", "!!", "-n", "", " lead and trail ", "é漢字🙂", "a'b\"c", "\t", "%s%n",
           # every character a line splitter breaks on, before a '#' that would start a comment
           "a\r# b", "a\x0b# b", "a\x0c# b", "a\x1c# b", "a\x1d# b", "a\x1e# b", "a\x85# b", "a\u2028# b",
           "a\u2029# b", "\x01\x7f"]

values = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
)
one_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)
dirnames = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
                   min_size=1, max_size=30).filter(lambda s: s not in (".", "..") and not s.startswith("~"))


def _run(script_text: str, cwd: Path) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    script = cwd / "job.sh"
    script.write_text(script_text, encoding="utf-8")
    env = dict(os.environ)
    # a stand-in `module` that reports its arguments instead of loading anything
    env["BASH_FUNC_module%%"] = "() { printf 'module:%s\\0' \"$@\" >> \"$HPCJOBS_TEST_OUT\"; }"
    env["HPCJOBS_TEST_OUT"] = str(cwd / "modules.out")
    proc = subprocess.run(["bash", str(script)], capture_output=True, cwd=cwd, env=env, timeout=30)
    return proc, script


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env_value=values, param_value=values, module=one_line, dirname=dirnames)
def test_hostile_values_arrive_verbatim(env_value: str, param_value: str, module: str, dirname: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        workdir = cwd / dirname
        workdir.mkdir()
        exp = Experiment.model_validate({
            "name": "safe",
            "environment": {"V": env_value},
            "params": {"P": param_value},
            "modules": [module],
            "workdir": str(workdir),
            "command": 'printf "%s\\0" "$V" "$P" "$PWD" > "$HPCJOBS_TEST_OUT.values"',
        })
        text = render_job(resolve(exp, LOCAL)).text
        # one printable-ASCII line per value: no line splitter, editor or locale can change it
        assert text.isascii() and all(line.isprintable() for line in text.splitlines())
        proc, _ = _run(text, cwd)
        assert proc.returncode == 0, proc.stderr.decode()
        got = (cwd / "modules.out.values").read_bytes().decode().split("\0")[:-1]
        assert got == [env_value, param_value, str(workdir)]
        assert (cwd / "modules.out").read_bytes().decode() == f"module:load\0module:{module}\0"
        assert not any(p.name == "PWNED" for p in cwd.rglob("*"))


def test_home_relative_workdir_is_expanded_but_quoted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "a b; $(x)").mkdir(parents=True)
    exp = Experiment.model_validate({"name": "h", "workdir": "~/a b; $(x)", "command": "pwd"})
    script = tmp_path / "h.sh"
    script.write_text(render_job(resolve(exp, LOCAL)).text)
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(home / "a b; $(x)")
