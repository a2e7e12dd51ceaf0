"""What ``hpcjobs site validate`` checks: the schema, the site's own consistency, and scripts bash accepts.

For each site file: the schema; then :data:`SITE_CHECKS`: ``default_qos`` against every partition's
``qos`` list; the ``prologue`` and ``epilogue`` through ``bash -n``; and a one-CPU job rendered on
every partition, also through ``bash -n`` (a script bash cannot parse fails on the cluster only when
the job starts). Every one of them reads only the file (none asks a scheduler; comparing a site with
its live cluster is ``hpcjobs site diff``), so every command that loads a site runs them too
(:func:`site_problems`, called where sites are loaded: :func:`hpcjobs.render.script.load_checked_site`).
The rendering is the caller's (:data:`RenderScript`, the renderer's own): it sits a layer above the
sites.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import KeyPath, YamlDocument, read_yaml
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.resolve import ResolvedJob, resolve

log = logging.getLogger("hpcjobs.sites")

#: The text of the batch script of a resolved job (:func:`hpcjobs.render.script.render_job`'s ``.text``).
RenderScript = Callable[[ResolvedJob], str]

#: Seconds ``bash -n`` may take on one script (it only parses).
BASH_CHECK_TIMEOUT_S = 30.0


def locate_in_site_file(site_file: str | Path, path: KeyPath, message: str) -> ConfigProblem:
    """A problem located at ``path`` (e.g. ``("template",)``) in a site file, by file, line and column.

    Falls back to the file alone when it cannot be read again.
    """
    try:
        return read_yaml(site_file).problem(path, message)
    except ConfigError:
        return ConfigProblem(message, file=str(site_file), key=".".join(map(str, path)))


def bash_syntax_error(text: str) -> str | None:
    """What ``bash -n`` says about ``text`` (``None`` when bash parses it).

    Raises:
        CommandError: bash could not be started.
    """
    from hpcjobs import process

    result = process.run_local_tool(["bash", "-n"], input=text, timeout=BASH_CHECK_TIMEOUT_S, check=False)
    if result.returncode == 0:
        return None
    return (result.stderr.strip() or f"bash -n exited with code {result.returncode}").replace("bash: ", "")


def _qos_problems(site: SiteConfig, doc: YamlDocument) -> list[ConfigProblem]:
    if not site.default_qos:
        return []
    return [doc.problem(("default_qos",), f"default_qos {site.default_qos!r} is not allowed on partition {name!r} "
                                          f"(its qos: {', '.join(part.qos)})")
            for name, part in site.partitions.items() if part.qos and site.default_qos not in part.qos]


def _shell_problems(site: SiteConfig, doc: YamlDocument) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for key, lines in (("prologue", site.prologue), ("epilogue", site.epilogue)):
        if lines:
            error = bash_syntax_error("\n".join(lines) + "\n")
            if error:
                problems.append(doc.problem((key,), f"not valid bash: {error}"))
    return problems


def _render_problems(site: SiteConfig, doc: YamlDocument, f: str, render: RenderScript) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    account = site.default_account or (site.accounts[0] if site.accounts else
                                       ("validate" if site.account_required else None))
    partitions: list[str | None] = list(site.partitions) or [None]
    for partition in partitions:
        where = f"test render on partition {partition!r}" if partition else "test render"
        exp = Experiment(name="validate", command="true", partition=partition, account=account)
        try:
            text = render(resolve(exp, site, site_file=f))
        except ConfigError as exc:
            for p in exc.problems:
                if p.key == "template" and site.template and p.file is None:
                    located = doc.problem(("template",), p.message)
                    p.file, p.line, p.column = located.file, located.line, located.column
                p.file = p.file or f
                p.message = f"{where}: {p.message}"
            problems.extend(exc.problems)
            continue
        error = bash_syntax_error(text)
        if error:
            problems.append(doc.problem(("partitions", partition) if partition else (),
                                        f"{where}: the script is not valid bash: {error}"))
    return problems


@dataclass(frozen=True)
class SiteCheck:
    """One check of a loaded site file.

    Attributes:
        name: What it checks (for listings and tests).
        run: Its problems for a site, its document, the file as named, and the renderer.
        parses_shell: It runs ``bash -n`` (so it needs bash on this machine).
    """

    name: str
    run: Callable[[SiteConfig, YamlDocument, str, RenderScript], list[ConfigProblem]]
    parses_shell: bool = True


#: Every check after the schema, in the order ``site validate`` reports them; all read the file alone.
SITE_CHECKS: tuple[SiteCheck, ...] = (
    SiteCheck("default_qos allowed on every partition", lambda site, doc, _f, _r: _qos_problems(site, doc),
              parses_shell=False),
    SiteCheck("prologue and epilogue are valid bash", lambda site, doc, _f, _r: _shell_problems(site, doc)),
    SiteCheck("a one-CPU job renders to valid bash on every partition", _render_problems),
)


def site_problems(site: SiteConfig, doc: YamlDocument, file: str, render: RenderScript, *,
                  require_bash: bool = True) -> list[ConfigProblem]:
    """The problems :data:`SITE_CHECKS` find in a site that passed its schema, each naming ``file`` as given.

    ``require_bash=False`` (a command loading the site, not ``site validate``): on a machine without
    bash the checks that parse shell are left out, said at info level; the job's script needs bash
    where it runs, not where it is rendered.

    Raises:
        CommandError: bash could not be started (with ``require_bash``).
    """
    checks = SITE_CHECKS
    if not require_bash and shutil.which("bash") is None:
        log.info("bash is not on PATH here: %s's scripts are not parsed (hpcjobs site validate does)", file)
        checks = tuple(c for c in SITE_CHECKS if not c.parses_shell)
    found = [p for check in checks for p in check.run(site, doc, file, render)]
    for p in found:  # named as given, so the command line can tell which files were ok
        if p.file == doc.file:
            p.file = file
    return found


def check_site_files(files: Sequence[str], render: RenderScript) -> list[ConfigProblem]:
    """Validate each site file and render a one-CPU job on each of its partitions with ``render``.

    Returns:
        Every problem found, each naming its file (empty when all files are good).

    Raises:
        CommandError: bash could not be started.
    """
    problems: list[ConfigProblem] = []
    for f in files:
        try:
            doc = read_yaml(f)
            site = validate_document(SiteConfig, doc)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        problems += site_problems(site, doc, f, render)
    return problems
