"""The testbed scripts are code: shellcheck holds them, and what they must never need is checked.

- Every shell script of the project passes ``shellcheck -x`` (sourced files followed).
- ``scripts/test.sh`` and the testbeds need no path outside the checkout: a path above the checkout
  appears only as a cache candidate tested with ``-f`` (the build caches beside a developer's checkout
  are a speed-up), and every path inside the checkout that they name exists in git.
- The deb-src lists a testbed adds copy the machine's own sources (deb822 with its ``Signed-By``, or the
  one-line form) and are gone again when the command fails or is killed, with apt still working.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "tests" / "testbed_lib.sh"
TESTBEDS = sorted(ROOT.glob("tests/*/testbed.sh"))
ENTRY_SCRIPTS = [ROOT / "scripts" / "test.sh", *TESTBEDS, LIB]


def _tracked() -> set[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:  # an sdist or a copy without .git: fall back to what is on disk
        return {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()}
    return set(out.stdout.splitlines())


def _shell_scripts() -> list[Path]:
    # the golden job scripts are held to shellcheck by tests/test_golden.py, as users' scripts
    found = {*ROOT.glob("scripts/*.sh"), *ROOT.glob("tests/**/*.sh"), *ROOT.glob("benchmarks/**/*.sh")}
    return sorted(p for p in found if "golden" not in p.relative_to(ROOT).parts)


def test_there_are_five_testbeds_and_they_share_the_library() -> None:
    assert {p.parent.name for p in TESTBEDS} == {"slurm", "pbs", "swarm", "kubernetes", "ssh"}
    for script in TESTBEDS:
        assert "testbed_lib.sh" in script.read_text(), f"{script.name} does not source tests/testbed_lib.sh"


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_scripts_pass_shellcheck(script: Path) -> None:
    if not shutil.which("shellcheck"):
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (scripts/test.sh installs the Debian package)")
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", "-x", "--severity=style", str(script.relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


_ABOVE = re.compile(r"\$\{?(?:ROOT|REPO)\}?/\.\.|\$\{?HERE\}?/\.\./\.\./\.\.|(?<![\w.])\.\./shared")
_INSIDE = re.compile(r"\$\{?(HERE|ROOT)\}?/([A-Za-z0-9_.${}/-]+)")
_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


def _code_lines(script: Path) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(script.read_text().splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("script", ENTRY_SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_path_above_the_checkout_is_only_an_optional_cache(script: Path) -> None:
    text = script.read_text()
    for n, line in _code_lines(script):
        if not _ABOVE.search(line):
            continue
        # the only allowed shape: a candidate in a cached_* function's loop, taken only when it is a file
        func = [m.group(1) for m in re.finditer(r"^(\w+)\(\) \{", "\n".join(text.splitlines()[:n]), re.M)]
        assert func and func[-1].startswith("cached_"), f"{script.name}:{n} needs a path outside the checkout: {line.strip()}"
        body = "\n".join(text.splitlines()[n:n + 3])
        assert re.search(r"-f \$c", body), f"{script.name}:{n}: the candidate is not tested with -f before use"


@pytest.mark.parametrize("script", ENTRY_SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_in_the_checkout_that_a_script_names_exists(script: Path) -> None:
    tracked = _tracked()
    base = {"HERE": script.parent.relative_to(ROOT), "ROOT": Path(".")}
    checked = 0
    for n, line in _code_lines(script):
        for m in _INSIDE.finditer(line):
            rel = m.group(2)
            while rel.count("}") > rel.count("{"):  # the end of a ${X:-$HERE/...} default
                rel = rel[:rel.rindex("}")]
            rel = rel.rstrip("/")
            if rel.startswith(".."):
                rel_path = os.path.normpath(base[m.group(1)] / rel)
                if rel_path.startswith(".."):
                    continue  # above the checkout: the test above holds it to a cache candidate
            else:
                rel_path = os.path.normpath(base[m.group(1)] / rel)
            pattern = re.escape(_VAR.sub("\0", rel_path)).replace("\\\0", ".*").replace("\0", ".*")
            found = rel_path == "." or any(re.fullmatch(pattern, t) or t.startswith(rel_path + "/") for t in tracked)
            assert found, f"{script.name}:{n} names {m.group(0)}, which is not in the checkout"
            checked += 1
    if script.name == "testbed.sh" and script.parent.name in {"pbs", "kubernetes"}:
        assert checked, "the scan found none of the files this testbed is known to use"


def _lib(cmd: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    prelude = 'log() { echo "log: $*" >&2; }; die() { echo "die: $*" >&2; exit 1; }; . "$LIB"; '
    return subprocess.run(["bash", "-c", prelude + cmd], capture_output=True, text=True,
                          env={**os.environ, "LIB": str(LIB), **env})


def _fake_apt(tmp_path: Path, sources: str | None = None, lists: str | None = None) -> dict[str, str]:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources is not None:
        (etc / "sources.list.d" / "debian.sources").write_text(sources)
    if lists is not None:
        (etc / "sources.list").write_text(lists)
    osr = tmp_path / "os-release"
    osr.write_text("ID=debian\nVERSION_CODENAME=bookworm\n")
    return {"HPCJOBS_APT_ETC": str(etc), "HPCJOBS_OS_RELEASE": str(osr)}


DEBIAN12_SOURCES = """\
Types: deb
# a comment, as Debian's images carry
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://example.org/disabled
Suites: bookworm
Components: main
Enabled: no

Types: deb deb-src
URIs: http://example.org/has-src
Suites: bookworm
Components: main

Types: deb
URIs: http://example.org/other-release
Suites: trixie
Components: main
"""


def _stanzas(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append(fields)
    return out


def test_deb822_twins_copy_each_enabled_stanza_with_its_signed_by(tmp_path: Path) -> None:
    proc = _lib("deb_src_twins deb822", _fake_apt(tmp_path, sources=DEBIAN12_SOURCES))
    assert proc.returncode == 0, proc.stderr
    twins = _stanzas(proc.stdout)
    assert [t["URIs"] for t in twins] == ["http://deb.debian.org/debian", "http://deb.debian.org/debian-security"]
    assert all(t["Types"] == "deb-src" for t in twins)
    assert all(t["Signed-By"] == "/usr/share/keyrings/debian-archive-keyring.gpg" for t in twins)
    assert twins[0]["Suites"] == "bookworm bookworm-updates"
    assert twins[1]["Components"] == "main contrib"
    assert "Types: deb\n" not in proc.stdout  # never a second Types line in a stanza


def test_one_line_twins_keep_the_options(tmp_path: Path) -> None:
    lists = ("deb [signed-by=/usr/share/keyrings/k.gpg] http://deb.debian.org/debian bookworm main\n"
             "# deb http://deb.debian.org/debian bookworm contrib\n"
             "deb http://deb.debian.org/debian trixie main\n")
    proc = _lib("deb_src_twins list", _fake_apt(tmp_path, lists=lists))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "deb-src [signed-by=/usr/share/keyrings/k.gpg] http://deb.debian.org/debian bookworm main"]


def test_no_debian_source_is_a_clear_error(tmp_path: Path) -> None:
    proc = _lib("with_deb_src true", _fake_apt(tmp_path, sources=""))
    assert proc.returncode == 1
    assert "no enabled Debian source for this release" in proc.stderr


def _needs_root_apt() -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("needs root and apt-get (the deb-src list is added to the machine's real apt)")


def _apt_works() -> subprocess.CompletedProcess[str]:
    return subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, timeout=300)


def _deb_src_files() -> list[Path]:
    return sorted(Path("/etc/apt/sources.list.d").glob("hpcjobs-deb-src.*"))


@pytest.mark.parametrize("command", ["true", "false", "exit 3"])
def test_with_deb_src_leaves_apt_as_it_was_whatever_the_command_does(command: str) -> None:
    _needs_root_apt()
    proc = _lib(f"with_deb_src {command}; echo after=$?", {})
    assert not _deb_src_files(), proc.stderr
    if command == "true":
        assert "after=0" in proc.stdout, proc.stderr
    elif command == "false":
        assert "after=1" in proc.stdout, proc.stderr
    else:  # `exit` ends the shell inside with_deb_src: the EXIT trap removes the lists
        assert proc.returncode == 3 and "after" not in proc.stdout
    apt = _apt_works()
    assert apt.returncode == 0 and "E:" not in apt.stderr, apt.stderr


def test_with_deb_src_killed_by_sigterm_removes_its_lists() -> None:
    _needs_root_apt()
    marker = "/tmp/hpcjobs-deb-src-running"
    Path(marker).unlink(missing_ok=True)
    prelude = 'log() { echo "log: $*" >&2; }; die() { echo "die: $*" >&2; exit 1; }; . "$LIB"; '
    proc = subprocess.Popen(["bash", "-c", prelude + f"with_deb_src bash -c 'touch {marker}; sleep 60'"],
                            env={**os.environ, "LIB": str(LIB)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not Path(marker).exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "with_deb_src never ran its command"
            time.sleep(0.1)
        assert _deb_src_files(), "the lists are there while the command runs"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        Path(marker).unlink(missing_ok=True)
    assert proc.returncode != 0
    assert not _deb_src_files(), err.decode()
    apt = _apt_works()
    assert apt.returncode == 0 and "E:" not in apt.stderr, apt.stderr
