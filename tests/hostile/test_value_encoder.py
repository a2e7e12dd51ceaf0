"""One encoder for every value that reaches a job: any text arrives as exactly its UTF-8 bytes.

Every check runs a real ``bash`` (under ``LANG=C`` and ``LANG=C.UTF-8``) and compares bytes:

* the encoder alone, hypothesis over all of Unicode (no surrogates, no NUL) plus every
  line-breaking character, at least 10,000 examples decoded by bash in a few batched runs;
* a sweep's chunk env file (the bash ``case`` the array task sources) with those values;
* ``hpcjobs sweep --site local`` with a value list built to break a line-splitting writer, a
  canary file in ``$(...)``, backticks and ``;touch``: the canary never appears and every point's
  values, ``params.json`` and ``$HPCJOBS_PARAMS_JSON`` equal the inputs; the same on the real
  Slurm testbed;
* a single job's ``environment:`` and ``params:`` rendered for every scheduler family;
* NUL is refused where values enter (exit 2, naming the key); ``--set`` text and sweep
  arguments arrive exactly as typed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.loading import load_experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.errors import ConfigError
from hpcjobs.render.script import render_job
from hpcjobs.render.shellvalue import UnencodableValueError, decode_ansi_c, shell_word
from hpcjobs.resolve import resolve
from hpcjobs.sweep.points.overrides import parse_overrides
from hpcjobs.sweep.points.point import Point, canonical_json, point_id
from hpcjobs.sweep.prepare import chunk_env_text

#: Characters some line splitter treats as a line break (Python's ``str.splitlines`` splits on all).
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
LOCALES = ("C", "C.UTF-8")
EXAMPLES = 10_000

any_char = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
hostile_piece = st.sampled_from([*LINE_BREAKS, "#", "'", '"', "\\", "$", "`", "$(", "\\x41", "%", "!", " "])
values = st.lists(st.one_of(any_char, hostile_piece), max_size=30).map("".join)


def _bash(script: str, cwd: Path, locale: str, env: dict[str, str] | None = None) -> bytes:
    path = cwd / "decode.sh"
    path.write_text(script, encoding="ascii")  # the encoder promises ASCII: writing otherwise fails here
    run_env = {**os.environ, **(env or {}), "LANG": locale, "LC_ALL": locale}
    proc = subprocess.run(["bash", str(path)], capture_output=True, cwd=cwd, env=run_env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def _decoded_by_bash(words: Sequence[str], cwd: Path, locale: str) -> list[bytes]:
    """Each word assigned, exported and printed back by one bash run (NUL-separated)."""
    lines = ["set -eu"]
    for word in words:
        lines.append(f"export V={word}")
        lines.append("printf '%s\\0' \"$V\"")
    out = _bash("\n".join(lines) + "\n", cwd, locale)
    return out.split(b"\0")[:-1]


def _assert_one_ascii_line(word: str) -> None:
    assert word.isascii() and word.isprintable(), word
    assert len(f"export V={word}".splitlines()) == 1


def test_encoder_property_over_all_unicode_decoded_by_bash(tmp_path: Path) -> None:
    seen: list[str] = []

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(value=values)
    def encode(value: str) -> None:
        word = shell_word(value)
        _assert_one_ascii_line(word)
        assert decode_ansi_c(word) == value.encode("utf-8")
        seen.append(value)

    encode()
    # every line-breaking character on its own and around a comment, whatever hypothesis drew
    seen += [*LINE_BREAKS, *(f"a{c}# b" for c in LINE_BREAKS), "\x01\x7f\x1b", "\xe9\u6f22\U0001f642", ""]
    assert len(seen) >= EXAMPLES
    words = [shell_word(v) for v in seen]
    for locale in LOCALES:
        for start in range(0, len(seen), 2500):
            got = _decoded_by_bash(words[start:start + 2500], tmp_path, locale)
            want = [v.encode("utf-8") for v in seen[start:start + 2500]]
            bad = [(v, g) for v, g, w in zip(seen[start:], got, want, strict=False) if g != w]
            assert len(got) == len(want) and not bad, f"LANG={locale}: {bad[:5]}"


def test_encoder_refuses_nul_and_keeps_ordinary_values_readable() -> None:
    with pytest.raises(UnencodableValueError, match="NUL"):
        shell_word("a\x00b")
    assert [shell_word(v) for v in ("adam", "0.1", "cuda/12.2", "a b", "it's", "")] == [
        "adam", "0.1", "cuda/12.2", "'a b'", "'it'\"'\"'s'", "''"]
    assert shell_word("a\n# b") == "$'a\\n# b'"
    assert shell_word("\xe9") == "$'\\xc3\\xa9'"  # UTF-8 bytes, never a locale-dependent \u escape


# ------------------------------------------------------------------------ the chunk env file (array tasks)

def _point(index: int, params: dict[str, object]) -> Point:
    return Point(index, point_id(params), params, canonical_json(params))


class _Prepared:
    """What :func:`chunk_env_text` reads of a prepared sweep."""

    def __init__(self, points: list[Point]) -> None:
        self.sweep_id = "enc-00000000"
        self.points = tuple(points)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(values, min_size=1, max_size=40))
def test_chunk_env_file_exports_every_value_verbatim(batch: list[str]) -> None:
    points = [_point(i, {"note": v, "other": f"#{i}\n"}) for i, v in enumerate(batch)]
    text = chunk_env_text(_Prepared(points), [p.point_id for p in points])  # type: ignore[arg-type]
    assert text.isascii() and all(line.isprintable() for line in text.splitlines())
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "chunk.env").write_text(text, encoding="ascii")
        script = (f"for HPCJOBS_ARRAY_INDEX in $(seq 0 {len(points) - 1}); do\n"
                  "  source ./chunk.env\n"
                  "  printf '%s\\0%s\\0%s\\0' \"$note\" \"$HPCJOBS_PARAMS_JSON\" \"$HPCJOBS_POINT_ID\"\n"
                  "done\n")
        for locale in LOCALES:
            got = _bash(script, cwd, locale).split(b"\0")[:-1]
            assert len(got) == 3 * len(points)
            for i, p in enumerate(points):
                note, params_json, pid = got[3 * i:3 * i + 3]
                assert note == batch[i].encode("utf-8")
                assert json.loads(params_json.decode("utf-8")) == p.params
                assert pid.decode() == p.point_id


# ------------------------------------------------------------------------ end to end: hpcjobs sweep --site local

#: In the job: every value as hex bytes, and HPCJOBS_PARAMS_JSON parsed, as JSON in the run folder.
READER = """\
import json, os
env = os.environb
out = {"note": env[b"note"].hex(), "tag": env[b"tag"].hex(),
       "params": json.loads(env[b"HPCJOBS_PARAMS_JSON"].decode("utf-8")),
       "point_id": env[b"HPCJOBS_POINT_ID"].decode()}
with open(os.path.join(os.environ["HPCJOBS_RUN_DIR"], "got.json"), "w") as fh:
    json.dump(out, fh)
"""


#: A second parameter of every point.
TAG = "x\n# y \u2028 z"


def hostile_values(canary: Path) -> list[str]:
    """The reported reproduction, then values that break a quoting that is not one line per value."""
    c = str(canary)
    return ["first line\n# second", f"$(touch {c})", "third\n# again",
            f"`touch {c}`", f"x;touch {c}", f"x' ; touch {c} ; '", f'"; touch {c}; "', f"'\n$(touch {c})\n'",
            *(f"a{b}# b" for b in LINE_BREAKS), "\x01\x1b\x7f", "\xe9\u6f22\U0001f642", "\\", "", " lead ", "\t#"]


def _yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: printable characters as they are, others as escapes."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _sweep_experiment(folder: Path, notes: Sequence[str], runner: Path, walltime: str = "") -> Path:
    """An experiment whose values travel as YAML escapes (the file itself has no control character)."""
    q = _yaml_quoted
    path = folder / "enc.yaml"
    path.write_text(
        f"name: enc\ndescription: {q(f'run in {folder}')}\n"
        f"environment:\n  PY: {q(sys.executable)}\n  READER: {q(str(runner))}\n"
        "command: '\"$PY\" \"$READER\"'\n"
        + (f"resources: {{walltime: {walltime}}}\n" if walltime else "")
        + f"sweep:\n  grid:\n    note: [{', '.join(map(q, notes))}]\n    tag: [{q(TAG)}]\n",
        encoding="utf-8")
    return path


def _check_points(root: Path, notes: Sequence[str], tag: str) -> None:
    (sweep,) = [d for d in root.iterdir() if d.is_dir()]
    got = [json.loads(f.read_text()) for f in sorted((sweep / "points").glob("*/got.json"))]
    assert sorted(bytes.fromhex(g["note"]) for g in got) == sorted(n.encode("utf-8") for n in notes)
    for g in got:
        note = bytes.fromhex(g["note"]).decode("utf-8")
        assert g["params"] == {"note": note, "tag": tag}
        assert bytes.fromhex(g["tag"]) == tag.encode("utf-8")
        params_file = sweep / "points" / g["point_id"] / "params.json"
        assert json.loads(params_file.read_text(encoding="utf-8")) == {"note": note, "tag": tag}
        assert g["point_id"] == point_id({"note": note, "tag": tag})


def _hpcjobs(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpcjobs", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_sweep_on_the_local_site_runs_no_value_as_code(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    runner = tmp_path / "reader.py"
    runner.write_text(READER)
    notes = hostile_values(canary)
    exp = _sweep_experiment(tmp_path, notes, runner)
    proc = _hpcjobs(["sweep", str(exp), "--site", "local", "--root", str(tmp_path / "sweeps")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    _check_points(tmp_path / "sweeps", notes, TAG)


def test_sweep_arguments_with_form_feeds_arrive_verbatim(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    runner = tmp_path / "reader.py"
    runner.write_text(READER)
    notes = ["first line\x0c# second", f"$(touch {canary})", "third\x0c# again", "a\n# b", "u\u2028# v",
             f"`touch {canary}`", f"y;touch {canary}"]
    exp = _sweep_experiment(tmp_path, ["unused"], runner)
    typed = [f"'{n}'" if n.startswith("`") else n for n in notes]  # YAML refuses a bare leading backtick
    proc = _hpcjobs(["sweep", str(exp), "--site", "local", "--root", str(tmp_path / "sweeps"),
                     "note=" + ",".join(typed)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    _check_points(tmp_path / "sweeps", notes, TAG)


# ------------------------------------------------------------------------ end to end: the real Slurm testbed

def _testbed_problem() -> str | None:
    """Why the Slurm testbed cannot be used (as tests/integration/conftest.py asks it), or None."""
    for argv in (["sinfo", "--noheader"], ["sacct", "--noheader", "-X", "--jobs=1", "--format=JobID"]):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{argv[0]}: {exc}"
        if proc.returncode != 0:
            return f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[:300]}"
    return None


@pytest.mark.slurm
def test_sweep_on_slurm_runs_no_value_as_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _testbed_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Slurm testbed does not answer ({problem})")
        pytest.skip(f"no Slurm testbed ({problem})")
    from hpcjobs.sweep.api import run_sweep, sweep_status

    tmp_path.chmod(0o777)
    monkeypatch.chdir(tmp_path)
    canary = tmp_path / "CANARY"
    runner = tmp_path / "reader.py"
    runner.write_text(READER)
    notes = hostile_values(canary)
    exp = _sweep_experiment(tmp_path, notes, runner, walltime="5m")
    site = Path(__file__).resolve().parent.parent / "sites" / "hpctest.yaml"
    root = tmp_path / "sweeps"
    prepared, _ = run_sweep(exp, site=str(site), root=root)
    deadline = time.monotonic() + 400
    while not (status := sweep_status(prepared.sweep_id, root=root)).done:
        assert time.monotonic() < deadline, f"sweep not done: {status.counts}"
        time.sleep(2)
    assert status.counts == {"COMPLETED": len(notes)}, status.counts
    assert not canary.exists()
    _check_points(root, notes, TAG)


# ------------------------------------------------------------------------ a single job: environment and params

SCHEDULERS = ("local", "slurm", "pbspro", "torque")


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_single_job_environment_and_params_arrive_verbatim(tmp_path: Path, scheduler: str) -> None:
    canary = tmp_path / "CANARY"
    notes = hostile_values(canary)
    env = {f"E{i}": v for i, v in enumerate(notes)}
    params = {f"P{i}": v for i, v in enumerate(reversed(notes))}
    names = [*env, *params]
    exp = Experiment.model_validate({
        "name": "single", "environment": env, "params": params,
        "command": "printf '%s\\0' " + " ".join(f'"${n}"' for n in names),
    })
    site = SiteConfig.model_validate({"name": "t", "scheduler": scheduler})
    text = render_job(resolve(exp, site)).text
    for locale in LOCALES:
        got = _bash(text, tmp_path, locale, {"PBS_O_WORKDIR": str(tmp_path)}).split(b"\0")[:-1]
        assert got == [v.encode("utf-8") for v in [*env.values(), *params.values()]]
    assert not canary.exists()


# ------------------------------------------------------------------------ where values enter: NUL, --set, arguments

def _write(folder: Path, text: str) -> Path:
    path = folder / "e.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "key"), [
    ('environment:\n  X: "a\\0b"\n', "environment.X"),
    ('params:\n  P: "a\\0b"\n', "params.P"),
    ('sweep:\n  grid:\n    note: ["ok", "a\\0b"]\n', "sweep.grid.note.1"),
])
def test_nul_in_a_file_is_refused_with_exit_2_naming_the_key(tmp_path: Path, body: str, key: str) -> None:
    exp = _write(tmp_path, 'name: n\ncommand: "true"\n' + body)
    proc = _hpcjobs(["sweep", str(exp), "--site", "local", "--dry-run", "--root", str(tmp_path / "s")], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert key in proc.stderr and "NUL" in proc.stderr and "Traceback" not in proc.stderr


def test_nul_from_set_and_sweep_arguments_is_refused(tmp_path: Path) -> None:
    exp = _write(tmp_path, "name: n\ncommand: x\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(exp, ["environment.X=a\x00b"])
    (problem,) = info.value.problems
    assert (problem.file, problem.key) == ("--set", "environment.X") and "NUL" in problem.message
    with pytest.raises(ConfigError, match="NUL"):
        parse_overrides(["note=a\x00b"])


@pytest.mark.parametrize("value", ["a #b", "a\nb", "a\n# b\n", "x\x0cy", " lead ", "1e3", "0x10", "true", "'q'",
                                   "[1, 2]", "\u2028"])
def test_set_text_values_arrive_exactly_as_typed(tmp_path: Path, value: str) -> None:
    exp = _write(tmp_path, "name: n\ncommand: x\n")
    loaded, _ = load_experiment(exp, [f"command={value}"])
    assert loaded.command == value
    exp = _write(tmp_path, "name: n\ncommand: printf '%s\\0' \"$X\" \"$P\"\n")
    loaded, _ = load_experiment(exp, [f"environment.X={value}", f"params.P={value}"])
    assert loaded.environment == {"X": value} and loaded.params == {"P": value}
    text = render_job(resolve(loaded, SiteConfig.model_validate({"name": "l", "scheduler": "local"}))).text
    assert _bash(text, tmp_path, "C").split(b"\0")[:-1] == [value.encode("utf-8")] * 2


def test_set_still_types_non_text_keys(tmp_path: Path) -> None:
    exp = _write(tmp_path, "name: n\ncommand: x\n")
    loaded, _ = load_experiment(exp, ["resources.nodes=2", "modules=[a, b]"])
    assert loaded.resources.nodes == 2 and loaded.modules == ["a", "b"]


@pytest.mark.parametrize("value", ["a #b", "1 #b", "a\nb", "a\x0cb", "\x85", "x\u2028# y", "a\n"])
def test_sweep_argument_text_arrives_exactly_as_typed(value: str) -> None:
    assert parse_overrides([f"note={value}"]) == {"note": [value]}


def test_sweep_arguments_still_typed_and_quoted() -> None:
    assert parse_overrides(["a= 1 , 0.5,true,null,'x #y',adam w"]) == {"a": [1, 0.5, True, None, "x #y", "adam w"]}
