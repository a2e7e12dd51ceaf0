"""What ``hpcjobs site validate`` checks: the schema, the site's own consistency, and scripts bash accepts.

For each site file: the schema; ``default_qos`` against every partition's ``qos`` list; the
``prologue`` and ``epilogue`` through ``bash -n``; and a one-CPU job rendered on every partition,
also through ``bash -n`` (a script bash cannot parse fails on the cluster only when the job starts).
The rendering is the caller's (:data:`RenderScript`, the CLI hands in the renderer's): it sits a
layer above the sites.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import KeyPath, YamlDocument, read_yaml
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.resolve import ResolvedJob, resolve

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

    result = process.run_command(["bash", "-n"], input=text, timeout=BASH_CHECK_TIMEOUT_S, check=False)
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
        found = _qos_problems(site, doc) + _shell_problems(site, doc) + _render_problems(site, doc, f, render)
        for p in found:  # named as given, so the command line can tell which files were ok
            if p.file == doc.file:
                p.file = f
        problems += found
    return problems
