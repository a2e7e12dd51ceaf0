"""No tracked text file names a development machine's paths or an internal issue reference.

Docs, comments, templates, tests and recorded data are read by people outside the project: a path
of the machine a change was made on (its work folder, a shared folder beside the checkout), or a
reference to an issue number or to the notes of a tracker they cannot see, means nothing to them.
Cite a public source instead (a man page, the scheduler's documentation or source file, a repository by URL).

The test walks ``git ls-files`` (binary files and the vendored OpenPBS tarball are skipped) and fails
with one ``file:line: text`` per hit. What must stay is listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WORK, ROOT_HOME, SHARED = "machine path (work folder)", "machine path (root's home)", "machine path (shared folder)"
CLOSING = "internal tracker note"

#: (name, pattern): what a public text must not contain.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # the patterns are written in two pieces so that this file does not itself contain what it looks for
    (WORK, re.compile(r"(?<![\w.-])/wor" r"k/")),
    (ROOT_HOME, re.compile(r"(?<![\w.-])/roo" r"t/")),
    (SHARED, re.compile(r"\.\./shar" r"ed/")),
    ("internal notes or fixtures folder", re.compile(r"(?<![\w-])shared/(?:notes|fixtures)\b")),
    ("internal notes file",
     re.compile(r"\bnotes\s*§|(?<![\w.-])notes/[\w-]+\.md|\b(?:pbs-formats|slurm-accounting)\.md")),
    ("pytest temporary folder", re.compile(r"/tmp/pytest-of-")),
    ("internal issue number", re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)),
    ("internal issue reference", re.compile(r"\(issue\b", re.IGNORECASE)),
    (CLOSING, re.compile(r"\bclos" r"ing[\s-]+notes?\b", re.IGNORECASE)),
)

#: Top-level folders not read: vendored third-party source (a tarball, read as binary anyway).
SKIPPED_PREFIXES = ("tests/pbs/vendor/",)

SELF = "tests/test_no_internal_references.py"

#: (path, pattern name) -> why the hit must stay.
ALLOWED: dict[tuple[str, str], str] = {
    **{(SELF, name): "this test spells out the patterns it looks for" for name, _ in PATTERNS},
    ("tests/pbs/testbed.sh", SHARED): "behaviour: the testbed restores a prebuilt "
    "/opt/pbs tarball from a shared/vendor/openpbs/ folder beside the checkout when a CI runner keeps one there",
    ("tests/pbs/README.md", SHARED): "documents that build-cache location of testbed.sh",
    ("tests/kubernetes/testbed.sh", SHARED): "behaviour: the testbed restores the Kubernetes server binaries "
    "from a shared/vendor/kubernetes/ tarball beside the checkout when a CI runner keeps one there",
    ("tests/kubernetes/README.md", SHARED): "documents that build-cache location of testbed.sh",
    ("tests/data/pbs/openpbs-real/qstat-x-f-json.qdel-never-run.json", ROOT_HOME): "a real OpenPBS "
    "capture kept byte for byte: the job's PBS_O_PATH as qstat printed it",
}


def _tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"not a git checkout ({exc})")
    files = [name for name in out.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    if not files:
        pytest.skip("git ls-files lists no files")
    return files


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (a NUL byte or not UTF-8) or one that is gone."""
    try:
        data = path.read_bytes()
    except OSError:  # listed by git but deleted in the working tree
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def find_references(name: str, text: str) -> list[tuple[str, int, str, str]]:
    """Every (file, line number, pattern name, line) in ``text`` that a pattern matches.

    Args:
        name: The file's path relative to the repository root (reported as is).
        text: The file's text.

    Returns:
        The hits, in line order; empty when the text names nothing internal.
    """
    hits = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for pattern_name, pattern in PATTERNS:
            if pattern.search(line):
                hits.append((name, lineno, pattern_name, line.strip()))
    return hits


@pytest.mark.parametrize(("line", "found"), [
    ("Material: /wor" "k/shared/fixtures", WORK),
    ("see ../shar" "ed/notes/slurm-testbed.md", SHARED),
    ("following shared/notes/pbs-formats.md", "internal notes or fixtures folder"),
    ("Goals (iss" "ue 4): one sbatch call", "internal issue number"),
    ("fixed in Iss" "ue #12", "internal issue number"),
    ("the template says (iss" "ue 7)", "internal issue reference"),
    ("see the report's clos" "ing note", CLOSING),
    ("line rules (notes §1.4): a TAB continues", "internal notes file"),
    ("see notes/slurm-accounting.md", "internal notes file"),
    ("PATH=/roo" "t/.cargo/bin:/usr/bin", ROOT_HOME),
    ("tmp_path is /tmp/pytest-of-root/pytest-3/x", "pytest temporary folder"),
])
def test_patterns_catch_internal_references(line: str, found: str) -> None:
    assert found in [hit[2] for hit in find_references("x.md", line)]


@pytest.mark.parametrize("line", [
    "github.com/openpbs/openpbs/issues/1255, fixed by pull 2603",
    "HPCJOBS_SWEEP_ROOT=./hpcjobs-sweeps/ and /var/lib/hpcjobs-testbed/wor" "k/x",
    "tests/pbs/vendor/openpbs-cd7ab5e.tar.gz",
    "a shared 2-core machine; see docs/architecture.md",
])
def test_patterns_leave_public_text_alone(line: str) -> None:
    assert find_references("x.md", line) == []


def test_no_tracked_file_names_an_internal_reference() -> None:
    hits, used = [], set()
    for name in _tracked_files():
        if name.startswith(SKIPPED_PREFIXES):
            continue
        text = _text(ROOT / name)
        if text is None:
            continue
        for hit in find_references(name, text):
            if (name, hit[2]) in ALLOWED:
                used.add((name, hit[2]))
            else:
                hits.append(hit)
    report = [f"{name}:{lineno}: {what}: {line[:160]}" for name, lineno, what, line in hits]
    assert not report, ("internal references (cite a public source or drop them; ALLOWED in "
                        "tests/test_no_internal_references.py lists what must stay):\n" + "\n".join(report))
    stale = [key for key in ALLOWED if key not in used and key[0] != SELF]
    assert not stale, f"ALLOWED entries that no longer match anything (remove them): {stale}"
