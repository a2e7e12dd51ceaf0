"""Every command the README and the manual show runs, and shows what the docs say it shows.

The ``sh``, ``bash``, ``shell`` and ``console`` blocks of README.md and docs/**/*.md are read in order:

* in ``sh``/``bash``/``shell`` blocks every line that is not a comment is a command (``\\`` continues it);
* in ``console`` blocks a line ``$ COMMAND`` is a command and the lines up to the next ``$ `` are the
  output it shows.

The blocks of a page run in order in one temporary folder (``/home/me/project`` in the docs), a copy
of ``examples/``, ``site-configs/``, ``templates/``, ``tests/sites/`` and ``tests/data/``, with ``HOME``
and the XDG folders in the temporary folder too, so no command reads or writes the user's files.
``hpcjobs`` is ``python -m hpcjobs`` of this checkout. Each command runs with bash, its stderr merged
into its stdout as on a terminal; it must exit 0 (or what the block's marker says), and the output a
``console`` block shows must match: a line ``...`` stands for any number of lines, ``...`` within a
line for any text, runs of spaces count as one.

An HTML comment on the line before a block says how to run it (items separated by ``;``):

``skip (reason)``
    not run (``pip install``, the test suite, a story with made-up job ids);
``slurm`` / ``swarm``
    run only on that testbed, as a test with that pytest marker (skipped on a laptop, failing under
    ``CI=true`` when the testbed does not answer, like the other testbed tests);
``exit N``
    every command of the block must exit N (a documented refusal);
``output not compared (reason)``
    exit codes only (output of a live queue);
``shell``
    the block's commands that are not hpcjobs' (``mkdir``, ``printf``) run too;
``file NAME``
    before a ``yaml`` (or other) block: its text is written to NAME for the page's later blocks;
``xfail (reason)``
    a known bug: the block must fail (and the test says so when it passes again).

Whatever is run, every ``hpcjobs`` command of every block (skipped ones and the blocks of the pages
this test does not run) must name commands and options that exist: they are parsed with click against
``hpcjobs.cli:main``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The pages whose commands are read.
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: Pages whose blocks are parsed against the click commands but not run, and why.
NOT_RUN: dict[str, str] = {}

SHELL_LANGS = {"sh", "bash", "shell", "console"}
TESTBEDS = ("slurm", "swarm")
#: What the blocks' folder holds: a copy of these repository folders.
COPIED = ("examples", "site-configs", "templates", "tests/sites", "tests/data")
#: How the docs write the folder the commands run in, and the home directory.
DOC_PROJECT, DOC_HOME = "/home/me/project", "/home/me"
COMMAND_TIMEOUT_S = 300

_MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)")
_SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "|&"}


@dataclass
class Marker:
    skip: str | None = None
    testbed: str | None = None
    exit_code: int = 0
    compare_output: bool = True
    shell: bool = False
    file: str | None = None
    xfail: str | None = None


@dataclass
class Command:
    text: str                     # as written, without the `$ ` prompt
    output: list[str] | None      # what a console block shows after it (None: not shown)
    is_hpcjobs: bool
    argv: list[str] = field(default_factory=list)   # the words after `hpcjobs`, up to a shell operator


@dataclass
class Block:
    path: str                     # relative to the repository root
    line: int                     # of the opening fence, 1-based
    lang: str
    text: str
    marker: Marker
    problems: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL_LANGS


def _split_items(body: str) -> list[str]:
    """``a; b (x; y); c`` → ``["a", "b (x; y)", "c"]``."""
    items, depth, current = [], 0, ""
    for char in body:
        depth += char == "("
        depth -= char == ")"
        if char == ";" and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    items.append(current.strip())
    return [item for item in items if item]


def parse_marker(body: str) -> tuple[Marker, list[str]]:
    """The marker of ``<!-- docs-test: BODY -->`` and the problems of its items."""
    marker, problems = Marker(), []
    for item in _split_items(body):
        if m := re.fullmatch(r"skip \((.+)\)", item):
            marker.skip = m.group(1)
        elif item in TESTBEDS:
            marker.testbed = item
        elif m := re.fullmatch(r"exit (\d+)", item):
            marker.exit_code = int(m.group(1))
        elif re.fullmatch(r"output not compared \((.+)\)", item):
            marker.compare_output = False
        elif item == "shell":
            marker.shell = True
        elif m := re.fullmatch(r"file ([\w./-]+)", item):
            marker.file = m.group(1)
        elif m := re.fullmatch(r"xfail \((.+)\)", item):
            marker.xfail = m.group(1)
        else:
            problems.append(f"unknown docs-test item {item!r} (skip (reason), {', '.join(TESTBEDS)}, exit N, "
                            "output not compared (reason), shell, file NAME, xfail (reason))")
    return marker, problems


def read_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each with the marker on the line before it."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, start = opened.group("fence"), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marked = _MARKER.match(before)
        marker, problems = parse_marker(marked.group("body")) if marked else (Marker(), [])
        block = Block(rel, start + 1, opened.group("info").lower(), "\n".join(body) + "\n", marker, problems)
        blocks.append(block)
    return blocks


def _hpcjobs_argv(text: str) -> tuple[bool, list[str]]:
    """Whether a command line runs hpcjobs, and its arguments up to the first shell operator."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return False, []
    if words[:1] == ["hpcjobs"]:
        rest = words[1:]
    elif len(words) >= 3 and words[0] in ("python", "python3") and words[1:3] == ["-m", "hpcjobs"]:
        rest = words[3:]
    else:
        return False, []
    for n, word in enumerate(rest):
        if word in _SHELL_OPERATORS or set(word) <= set("|&;<>"):
            rest = rest[:n]
            break
    return True, rest


def commands(block: Block) -> list[Command]:
    """The commands of a shell block, with the output a console block shows for each."""
    found: list[Command] = []
    pending = ""
    lines = block.text.splitlines()
    if block.lang == "console":
        for line in lines:
            if line.startswith("$ ") or pending:
                text = line[2:] if not pending else line
                if text.endswith("\\"):
                    pending += text[:-1] + " "
                    continue
                text, pending = pending + text, ""
                found.append(Command(text, [], *_hpcjobs_argv(text)))
            elif found:
                assert found[-1].output is not None
                found[-1].output.append(line)
            elif line.strip():
                block.problems.append(f"{block.where}: output before the first `$ ` command: {line!r}")
        return found
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = pending + line, ""
        found.append(Command(text, None, *_hpcjobs_argv(text)))
    return found


ALL_BLOCKS = [block for path in DOC_FILES for block in read_blocks(path)]


def _runnable(block: Block) -> bool:
    return block.is_shell and block.marker.skip is None and block.path not in NOT_RUN


# --- static checks ------------------------------------------------------------------------------------

def _check_argv(argv: list[str]) -> str | None:
    """Why ``hpcjobs ARGV`` names a command or option that does not exist, or None."""
    from hpcjobs.cli import main

    command: click.Command = main
    ctx = click.Context(main, info_name="hpcjobs")
    args = list(argv)
    try:
        while isinstance(command, click.Group):
            _, rest, _ = command.make_parser(ctx).parse_args(args)
            if not rest:
                return None
            sub = command.get_command(ctx, rest[0])
            if sub is None or sub.hidden:
                return f"no command {ctx.command_path} {rest[0]}"
            ctx = click.Context(sub, info_name=rest[0], parent=ctx)
            command, args = sub, rest[1:]
        command.make_parser(ctx).parse_args(args)
    except click.UsageError as exc:
        return f"{ctx.command_path}: {exc.format_message()}"
    return None


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shown_command_names_real_commands_and_options(path: Path) -> None:
    problems = []
    for block in read_blocks(path):
        if not block.is_shell:
            continue
        for command in commands(block):
            if command.is_hpcjobs and (why := _check_argv(command.argv)):
                problems.append(f"{block.where}: `{command.text}`: {why}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_block_is_run_or_says_why_not(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    problems = []
    for block in read_blocks(path):
        problems += [f"{block.where}: {p}" for p in block.problems]
        shown = [line for line in block.text.splitlines() if re.match(r"\s*\$ (hpcjobs|python)", line)]
        if not block.is_shell:
            if shown and block.marker.file is None:
                problems.append(f"{block.where}: a ```{block.lang or '(no language)'} block shows "
                                f"{shown[0].strip()!r}: make it a ```console block so that it runs")
            continue
        if rel in NOT_RUN or block.marker.skip is not None:
            continue
        cmds = commands(block)
        problems += block.problems
        if not cmds:
            problems.append(f"{block.where}: a {block.lang} block with no command (mark it skip (reason))")
        others = [c.text for c in cmds if not c.is_hpcjobs]
        if others and not block.marker.shell:
            problems.append(f"{block.where}: `{others[0]}` is not an hpcjobs command: mark the block "
                            "<!-- docs-test: skip (reason) --> or, if it can run in a temporary folder, shell")
    assert not problems, "\n".join(problems)


# --- running the pages ------------------------------------------------------------------------------

def _sessions() -> list[tuple[str, str | None]]:
    """(page, testbed) for every page with runnable blocks: the local ones, then one per testbed."""
    seen: dict[tuple[str, str | None], None] = {}
    for block in ALL_BLOCKS:
        if _runnable(block):
            seen[(block.path, block.marker.testbed)] = None
    return list(seen)


def _require_testbed(name: str) -> None:
    if name == "slurm":
        from integration.conftest import START_HINT, testbed_problem

        problem = testbed_problem()
        if problem is not None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI=true but the Slurm testbed does not answer ({problem}); {START_HINT}")
            pytest.skip(f"{START_HINT} ({problem})")
    elif name == "swarm":
        from swarm.real import require_swarm

        require_swarm()
    else:  # pragma: no cover - parse_marker knows only TESTBEDS
        raise AssertionError(name)


def _workdir(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    tmp_path.chmod(0o755)  # a testbed's daemons (slurmd, a container running as you) read the run folders
    for name in COPIED:
        shutil.copytree(ROOT / name, project / name, symlinks=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, args in (("hpcjobs", '-m hpcjobs "$@"'), ("python", '"$@"'), ("python3", '"$@"')):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args}\n')
        shim.chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HPCJOBS_", "XDG_", "PYTEST_")) and key not in ("COLUMNS", "LINES")}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                    if p and p != str(ROOT))]),
        "PYTHONUNBUFFERED": "1",        # stdout and stderr in the order a terminal shows them
        "COLUMNS": "200",               # tables as wide as they need
        "NO_COLOR": "1",
        "HPCJOBS_DISCOVER": "0",        # a machine with a testbed must not turn `local` into its cluster
    })
    return home, project, env


def _normalise(text: str, project: Path, home: Path) -> list[str]:
    text = text.replace(str(project), DOC_PROJECT).replace(str(home), DOC_HOME).replace(str(ROOT), "...")
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in line.split("...")) + r"\Z")


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` matches ``expected``, where a ``...`` line is any lines and ``...`` any text."""
    patterns = [None if line == "..." else _pattern(line) for line in expected]
    # reach[j]: the first i expected lines can match the first j actual lines
    reach = [True] + [False] * len(actual)
    for pattern in patterns:
        new = [False] * (len(actual) + 1)
        for j in range(len(actual) + 1):
            if pattern is None:
                new[j] = reach[j] or (j > 0 and new[j - 1])
            elif j > 0:
                new[j] = reach[j - 1] and bool(pattern.match(actual[j - 1]))
        reach = new
    return reach[len(actual)]


def _run_block(block: Block, project: Path, home: Path, env: dict[str, str]) -> list[str]:
    """Run a block's commands in order; the problems found (empty: the block does what it shows)."""
    problems = []
    for command in commands(block):
        if not command.is_hpcjobs and not block.marker.shell:
            continue
        try:
            proc = subprocess.run(["bash", "-c", command.text], cwd=project, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            problems.append(f"`{command.text}` ran past {COMMAND_TIMEOUT_S} s")
            continue
        out = proc.stdout
        if command.is_hpcjobs and proc.returncode != block.marker.exit_code:
            problems.append(f"`{command.text}` exited {proc.returncode}, the docs say {block.marker.exit_code}:\n"
                            + out[-3000:])
            continue
        if not command.is_hpcjobs and proc.returncode != 0:
            problems.append(f"`{command.text}` exited {proc.returncode}:\n{out[-3000:]}")
            continue
        if command.output is not None and block.marker.compare_output:
            expected = _normalise("\n".join(command.output), project, home)
            actual = _normalise(out, project, home)
            if not output_matches(expected, actual):
                problems.append(f"`{command.text}`: the output differs from what the docs show.\n--- docs:\n"
                                + "\n".join(expected) + "\n--- actual:\n" + "\n".join(actual[:80]))
    return problems


def _session_params() -> list[object]:
    params = []
    for path, testbed in _sessions():
        marks = [getattr(pytest.mark, testbed)] if testbed else []
        params.append(pytest.param(path, testbed, marks=marks, id=f"{path}[{testbed or 'local'}]"))
    return params


@pytest.mark.parametrize(("page", "testbed"), _session_params())
def test_the_commands_of_a_page_run(page: str, testbed: str | None, tmp_path: Path) -> None:
    if testbed:
        _require_testbed(testbed)
    home, project, env = _workdir(tmp_path)
    failures, expected_failures, fixed = [], [], []
    ran = 0
    for block in (b for b in ALL_BLOCKS if b.path == page):
        if block.marker.file:
            target = project / block.marker.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        if not _runnable(block) or block.marker.testbed != testbed:
            continue
        ran += 1
        problems = _run_block(block, project, home, env)
        if block.marker.xfail:
            (expected_failures if problems else fixed).append(block)
        elif problems:
            failures.append(f"{block.where}:\n" + "\n".join(problems))
    assert ran, f"no block of {page} ran"
    assert not fixed, ("blocks marked xfail now work: remove their xfail marker: "
                       + ", ".join(f"{b.where} ({b.marker.xfail})" for b in fixed))
    assert not failures, "\n\n".join(failures)
    if expected_failures:
        pytest.xfail("; ".join(f"{b.where}: {b.marker.xfail}" for b in expected_failures))


# --- the test's own parts -----------------------------------------------------------------------------

def test_output_matching() -> None:
    assert output_matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert output_matches(["a", "...", "b"], ["a", "b"])
    assert output_matches(["job ... submitted"], ["job 1234 submitted"])
    assert not output_matches(["a", "b"], ["a", "b", "c"])
    assert not output_matches(["a", "c"], ["a", "b"])


def test_marker_and_command_parsing() -> None:
    marker, problems = parse_marker("slurm; exit 2; output not compared (a; b); xfail (bug)")
    assert (marker.testbed, marker.exit_code, marker.compare_output, marker.xfail) == ("slurm", 2, False, "bug")
    assert not problems
    assert parse_marker("sometimes")[1]
    assert _hpcjobs_argv("hpcjobs render x.yaml --site a | head -5  # note") == (True, ["render", "x.yaml",
                                                                                         "--site", "a"])
    assert _hpcjobs_argv("python -m hpcjobs --version") == (True, ["--version"])
    assert _hpcjobs_argv("pip install .")[0] is False
    assert _check_argv(["render", "x.yaml", "--no-such-option"])
    assert _check_argv(["no-such-command"])
    assert _check_argv(["site", "list", "--json"]) is None


def test_the_pages_not_run_exist() -> None:
    assert all((ROOT / page).is_file() for page in NOT_RUN), "NOT_RUN names a page that is gone"
