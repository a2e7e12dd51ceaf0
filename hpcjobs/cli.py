"""The ``hpcjobs`` command line: parse options, make one library call, print.

Heavy modules (pydantic, jinja2, rich, pandas, submitit) are imported inside
the commands that need them, so ``hpcjobs --help`` stays as fast as a bare
click application on a login node's slow shared filesystem.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from hpcjobs import __version__
from hpcjobs.errors import ConfigError, ConfigProblem, HpcJobsError, terminal_text

if TYPE_CHECKING:
    from hpcjobs.schedulers.base import Capabilities

    _StrChoice = click.Choice[str]
else:
    _StrChoice = click.Choice  # click before 8.2: not generic

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_COMMAND_FAILED = 1
EXIT_BUG = 3


#: The largest count or index an option takes (a page offset, a point index, workers): beyond any
#: real sweep, and inside what SQLite's INTEGER holds, so a huge number is refused as bad input.
MAX_COUNT = 10**15


def count_range(minimum: int) -> click.IntRange:
    """The click type of a count or index option: an integer from ``minimum`` to :data:`MAX_COUNT`."""
    return click.IntRange(min=minimum, max=MAX_COUNT)


class SchedulerChoice(_StrChoice):
    """The names of the registered schedulers whose capabilities pass ``wanted`` (every one: ``None``), after
    ``first`` (such as ``auto``), in the registry's order.

    The registry is asked on first use (parsing the option, showing its help), not when the command is
    declared, so ``hpcjobs --help`` does not import the backends; a new backend is a new choice, with no
    change here. The local runner (``runs_here``) is no scheduler and never a choice.
    """

    def __init__(self, wanted: Callable[[Capabilities], bool] | None = None, *, first: Sequence[str] = (),
                 case_sensitive: bool = True) -> None:
        self._wanted = wanted
        self._first = tuple(first)
        self._names: tuple[str, ...] | None = None
        super().__init__((), case_sensitive=case_sensitive)

    @property
    def choices(self) -> tuple[str, ...]:
        """``first`` and the names of the schedulers wanted, computed once."""
        if self._names is None:
            from hpcjobs.schedulers.registry import capabilities_of, scheduler_names

            self._names = (*self._first, *(name for name in scheduler_names()
                                           if self._wanted is None or self._wanted(capabilities_of(name))))
        return self._names

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        """Ignored: click's ``Choice.__init__`` sets the choices, which are the registry's here."""


def _non_finite_at(data: Any) -> str | None:
    """The dotted path of the first float in ``data`` that is NaN or infinite (``""``: ``data`` itself)."""
    import math

    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return ".".join(path)
        if isinstance(node, dict):
            stack.extend((v, (*path, str(k))) for k, v in reversed(node.items()))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, (*path, str(i))) for i, v in reversed(list(enumerate(node))))
    return None


def echo_json(data: Any, *, indent: int | None = None, default: Callable[[Any], Any] | None = None) -> None:
    """Print ``data`` as strict JSON (RFC 8259) on stdout: what every ``--json`` option prints through.

    ``json.dumps`` writes ``NaN`` and ``Infinity`` unless told not to, and no strict parser reads them;
    here they are refused, nothing is printed.

    Raises:
        NotJsonError: ``data`` holds NaN or an infinity (the message says where).
    """
    from hpcjobs.errors import NotJsonError

    try:
        text = json.dumps(data, indent=indent, default=default, allow_nan=False)
    except ValueError:
        where = _non_finite_at(data)
        if where is None:
            raise
        raise NotJsonError(f"the JSON output would hold a value that is not a finite number at {where or 'its top'}; "
                           "JSON cannot write NaN or infinities, so nothing was printed") from None
    click.echo(text)


def console(stderr: bool = True) -> Any:
    """A rich console (stderr by default); plain text when not a terminal.

    It shows the control and format characters of what it prints escaped
    (:class:`hpcjobs.commands.terminal.TerminalConsole`); tables are made with :func:`new_table`.
    """
    from hpcjobs.commands.terminal import TerminalConsole

    return TerminalConsole(stderr=stderr, highlight=False, soft_wrap=True)


def new_table(*headers: Any, **kwargs: Any) -> Any:
    """A rich table (:class:`rich.table.Table`'s arguments) whose title, headers and cells are shown with their
    control and format characters escaped (:class:`hpcjobs.commands.terminal.TerminalTable`)."""
    from hpcjobs.commands.terminal import TerminalTable

    return TerminalTable(*headers, **kwargs)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of a message for a person: control and format characters escaped, its own newlines kept.

    Machine output (JSON, CSV, a rendered script, a site file) is printed with ``click.echo`` as it is.
    """
    click.echo(terminal_text(message, keep="\n"), err=err, nl=nl)


def _report_error(exc: HpcJobsError) -> None:
    from rich.markup import escape

    out = console()
    if isinstance(exc, ConfigError):
        n = len(exc.problems)
        out.print(f"[bold red]error:[/] {n} problem{'s' if n != 1 else ''} found")
        for p in sorted(exc.problems, key=lambda p: (p.file or "", p.line or 0, p.column or 0)):
            where = p.location()
            text = str(p)[len(where) + 2:] if where else str(p)
            out.print(f"  [bold]{escape(terminal_text(where or '-'))}[/]: " + escape(terminal_text(text, keep="\n")))
    else:
        out.print(f"[bold red]error:[/] {escape(_command_failure_text(exc))}")


def _command_failure_text(exc: HpcJobsError) -> str:
    """The message of an exit-1 error, followed by the failed command it came from when it does not show it.

    A failure wrapped in another error (a refused submission, an ambiguous answer) must still show
    the command line, its exit code and its stderr. Scheduler output is shown on a terminal: the
    text has its control characters escaped (:func:`~hpcjobs.errors.terminal_text`).
    """
    import shlex

    from hpcjobs.errors import CommandError, SchedulerOutputError

    text = str(exc)
    seen: set[int] = set()
    cause: BaseException | None = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, CommandError | SchedulerOutputError) and getattr(cause, "argv", None):
            if shlex.join(cause.argv or []) not in text:
                text += f"\ncaused by: {cause}"
            break
        cause = cause.__cause__ or cause.__context__
    return terminal_text(text, keep="\n")


@contextlib.contextmanager
def _terminal_safe_click_errors() -> Iterator[None]:
    """Click's own errors (a bad option value, an unknown option) with their control characters escaped.

    Click prints the message itself (``Error: ...``); what the user typed is in it.
    """
    try:
        yield
    except click.ClickException as exc:
        exc.message = terminal_text(exc.message, keep="\n")
        raise


def handle_errors(func: F) -> F:
    """Turn the library's typed errors into messages and exit codes (2 input, 1 command, 3 bug)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HpcJobsError as exc:
            _report_error(exc)
            sys.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # output piped into `head` and the like: stop quietly
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except OSError as exc:
            typed = _path_error(exc)
            if typed is None:
                _report_bug(exc)
            _report_error(typed)
            sys.exit(typed.exit_code)
        except Exception as exc:
            _report_bug(exc)

    return wrapper  # type: ignore[return-value]


def _path_error(exc: OSError) -> HpcJobsError | None:
    """The typed error of a file system refusal that reached the command line with its file named.

    The library turns the refusals of the paths a person names into typed errors where it opens them
    (:func:`hpcjobs.safe_files.user_path_errors`); this is the last net for one it did not foresee: a
    refusal the environment causes (no space, quota, permission, read-only, a name too long, a part that
    is not a folder) of a named file is said with that file and exit 1 or 2, not as a bug. Any other
    ``OSError`` (no file named, or an errno no path explains) stays a bug (``None``).
    """
    from hpcjobs.safe_files import os_error_for

    if not isinstance(exc.filename, str) or not exc.filename or isinstance(exc, FileNotFoundError):
        return None
    return os_error_for(exc, exc.filename, what="", doing="use")


def _report_bug(exc: BaseException) -> NoReturn:
    """Print the traceback of an unexpected error and exit with :data:`EXIT_BUG`."""
    import traceback

    traceback.print_exception(exc)
    echo(f"hpcjobs {__version__}: unexpected error ({type(exc).__name__}: {exc}). "
         "This is a bug in hpcjobs: please report it with the traceback above.", err=True)
    sys.exit(EXIT_BUG)


class LazyGroup(click.Group):
    """A group whose subcommands live in their own modules, imported only when run.

    ``lazy_commands`` maps a command name to ``"module:attribute"`` of a click command.
    ``--help`` lists them with the short help given here, without importing them.
    """

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands or {}

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Click's context, its errors (a bad option of the group) shown with control characters escaped."""
        with _terminal_safe_click_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; click's errors (a bad option value, an unknown option) shown with control
        characters escaped."""
        with _terminal_safe_click_errors():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_commands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            import importlib

            target, _help = self.lazy_commands[cmd_name]
            module, attr = target.split(":")
            command = getattr(importlib.import_module(module), attr)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:
                if self.lazy_commands[name][1]:  # an empty help hides the command
                    rows.append((name, self.lazy_commands[name][1]))
            else:
                cmd = super().get_command(ctx, name)
                if cmd is not None and not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


#: Commands implemented in their own modules: name → ("module:command", short help).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "report": ("hpcjobs.commands.report:report", "Efficiency, queue wait and failure reports from accounting data."),
    "plan": ("hpcjobs.commands.plan:plan", "Where a job would start soonest: every partition, estimate, wait, cost."),
    "why": ("hpcjobs.commands.why:why", "Why a sweep's jobs (or a job) wait, and what would change it."),
    "watch": ("hpcjobs.commands.watch:watch", "A live view of a sweep: states, throughput, running points, failures."),
    "metrics": ("hpcjobs.commands.metrics:metrics", "Sweeps' state as OpenMetrics text for Prometheus (or served)."),
    "advise": ("hpcjobs.commands.advise:advise", "Propose memory, wall time and CPUs from what finished runs used."),
    "sweep": ("hpcjobs.commands.sweep:sweep", "Submit (or resume) the parameter sweep of an experiment."),
    "status": ("hpcjobs.commands.sweep:status", "Show a sweep's or a job's progress (one scheduler call per poll)."),
    "cancel": ("hpcjobs.commands.sweep:cancel", "Cancel a sweep's (or a job's) queued and running jobs."),
    "resubmit": ("hpcjobs.commands.sweep:resubmit", "Submit a sweep's failed points (or a failed job) again."),
    "ls": ("hpcjobs.commands.sweep:ls", "List the sweeps in the sweep folder (--jobs: the single jobs)."),
    "results": ("hpcjobs.commands.results:results", "A sweep's points with their parameters, state and metrics."),
    "logs": ("hpcjobs.commands.results:logs", "Show the stdout/stderr of a job, or of a sweep's points."),
    "sweep-run-local": ("hpcjobs.commands.sweep:sweep_run_local", ""),
}


@click.group(cls=LazyGroup, lazy_commands=LAZY_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hpcjobs")
@click.option("-v", "--verbose", count=True, help="Log scheduler commands (-v) and debug detail (-vv).")
def main(verbose: int) -> None:
    """hpcjobs: from an experiment YAML to jobs on Slurm and PBS clusters, and back to answers."""
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.option("--site", "site", metavar="NAME", help="Site config (name or path); default: the file's, else detected.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a key of the experiment, e.g. --set resources.gpus_per_node=2 (repeatable).")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False), help="Write the script here instead of stdout.")
@click.option("--template-dir", multiple=True, type=click.Path(file_okay=False),
              help="Extra template directory searched first (repeatable).")
@click.option("--script", "script_only", is_flag=True,
              help="Kubernetes: the pods' script instead of the Jobs' manifest (YAML).")
@handle_errors
def render(experiment: str, site: str | None, overrides: tuple[str, ...], output_dir: str | None,
           template_dir: tuple[str, ...], script_only: bool = False) -> None:
    """Render the batch script for EXPERIMENT (a YAML file); on Kubernetes, the manifest of its Jobs."""
    from hpcjobs.render.api import RenderRequest, render_request
    from hpcjobs.sweep.prepare import render_packed

    result = render_request(RenderRequest(experiment, site=site, overrides=overrides, template_dirs=template_dir,
                                          output_dir=output_dir, script_only=script_only), packed=render_packed)
    for path in result.written:
        echo(str(path))
    if result.text is not None:
        click.echo(result.text, nl=False)


@main.command()
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.option("--site", "site", metavar="NAME", help="Site config (name or path); default: the file's, else detected.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the experiment.")
@click.option("--refresh-site", is_flag=True,
              help="Discover this machine's cluster again (when no site file describes it) instead of the cached site.")
@click.option("--new", "new", is_flag=True, help="Submit another job even if this request was submitted before.")
@click.option("--root", type=click.Path(file_okay=False),
              help="Folder of sweep folders; single jobs are recorded in its jobs/ (default: as for sweeps).")
@click.option("--partition", metavar="NAME|auto",
              help="Partition (as --set partition=NAME); auto: where it would start soonest (hpcjobs plan's rule).")
@click.option("--after", "after", multiple=True, metavar="[WHEN:]SWEEP|JOB",
              help="Wait for this sweep or job (id, name, experiment file) to end: WHEN ok (default: it succeeded), "
              "any or done (any ending). Repeatable.")
@click.option("--remote", metavar="[USER@]HOST[:PORT]", envvar="HPCJOBS_REMOTE",
              help="Submit through this login node over SSH (your ssh, its config and keys; the ledger stays "
              "here). Default: the site's remote:, else $HPCJOBS_REMOTE.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def submit(experiment: str, site: str | None, overrides: tuple[str, ...], refresh_site: bool, new: bool,
           root: str | None, as_json: bool, partition: str | None = None, after: tuple[str, ...] = (),
           remote: str | None = None) -> None:
    """Check, render and submit EXPERIMENT as one job (its parameter sweep is `hpcjobs sweep`).

    The same request (the experiment's content, --set overrides, site and this folder) is submitted
    once: running the command again prints the job already submitted (and finds one whose answer was
    lost) instead of submitting another. --new submits another job.
    """
    from hpcjobs.sweep.singles import submit_single

    if partition is not None:
        from hpcjobs.plan.api import with_partition

        overrides, chosen = with_partition(experiment, partition, site=site, overrides=overrides)
        if chosen:
            echo(chosen, err=True)
    sub = submit_single(experiment, site=site, overrides=overrides, refresh_site=refresh_site, root=root, new=new,
                        after=after, remote=remote)
    if as_json:
        echo_json({"job_id": sub.job_id, "script": str(sub.script), "tag": sub.tag.render(),
                   "site": sub.site, "scheduler": sub.scheduler,
                   "stdout": sub.stdout and str(sub.stdout), "stderr": sub.stderr and str(sub.stderr),
                   "request_id": sub.request_id, "new": sub.new, "recovered": sub.recovered,
                   "state": sub.state})
        return
    from hpcjobs.sweep.logs import log_command

    if sub.new:
        echo(f"submitted job {sub.job_id} to {sub.site} ({sub.scheduler}); script {sub.script}")
    elif sub.recovered:
        echo(f"job {sub.job_id} ({sub.state}) was submitted by an earlier run whose answer was lost; found by "
                   "its token, not submitted again")
    else:
        echo(f"job {sub.job_id} ({sub.state}) was already submitted for this request ({sub.request_id}); not "
                   "submitted again (--new submits another)")
    if sub.stdout is not None:
        echo(f"logs: {sub.stdout} and {sub.stderr}")
    elif sub.job_id and log_command(sub.scheduler, sub.job_id):  # Swarm, Kubernetes: the scheduler's log
        echo(f"logs: {log_command(sub.scheduler, sub.job_id)}")
    echo(f"follow it with: hpcjobs status {sub.job_id} · hpcjobs logs {sub.job_id} -f")


@main.group()
def site() -> None:
    """List, show and validate site configs."""


@site.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def site_list(as_json: bool) -> None:
    """List the sites on the search path."""
    from hpcjobs.config.sites import list_sites, load_site_file

    rows: list[dict[str, Any]] = []
    for entry in list_sites():
        try:
            cfg = load_site_file(entry.path)
            scheduler: str = cfg.scheduler
            description, ok = cfg.description, True
        except ConfigError:
            scheduler, description, ok = "?", "(invalid: run `hpcjobs site validate`)", False
        rows.append({"name": entry.name, "scheduler": scheduler, "description": description,
                     "path": str(entry.path), "valid": ok, "shadows": [str(p) for p in entry.shadowed]})
    if as_json:
        echo_json(rows, indent=2)
        return
    listing = new_table("site", "scheduler", "description", "file", box=None)
    for r in rows:
        listing.add_row(str(r["name"]), str(r["scheduler"]), str(r["description"]), str(r["path"]))
    console(stderr=False).print(listing)


@site.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The validated config as JSON.")
@handle_errors
def site_show(name: str, as_json: bool) -> None:
    """Show a site's scheduler, partitions and limits."""
    from hpcjobs.config.sites import find_site, load_site_file
    from hpcjobs.units import format_memory_human, format_walltime_slurm

    path = find_site(name)
    cfg = load_site_file(path)
    if as_json:
        click.echo(cfg.model_dump_json(indent=2))
        return
    out = console(stderr=False)
    out.print(f"[bold]{cfg.name}[/] ({cfg.scheduler}) {cfg.description}\nfile: {path}")
    if cfg.documentation:
        out.print(f"limits from: {cfg.documentation}")
    if cfg.partitions:
        partitions = new_table("partition", "max walltime", "max nodes", "cpus/node", "mem/node", "gpus/node",
                           "gpu types", box=None)
        for pname, p in cfg.partitions.items():
            mark = " (default)" if pname == cfg.default_partition else ""
            partitions.add_row(
                pname + mark,
                format_walltime_slurm(p.max_walltime) if p.max_walltime else "-",
                str(p.max_nodes or "-"), str(p.cpus_per_node or "-"),
                format_memory_human(p.memory_per_node) if p.memory_per_node else "-",
                str(p.gpus_per_node), ", ".join(p.gpu_types) or "-",
            )
        out.print(partitions)


@site.command("init")
@click.option("--scheduler", type=SchedulerChoice(lambda caps: caps.discoverable, first=("auto",)), default="auto",
              show_default=True, help="Which scheduler to read.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the site file here (default: stdout).")
@click.option("--name", help="The site's name (default: the cluster's).")
@click.option("--remote", metavar="[USER@]HOST[:PORT]", envvar="HPCJOBS_REMOTE",
              help="Read the scheduler of this login node over SSH; the site file gets a remote: block.")
@click.option("--ssh-config", type=click.Path(dir_okay=False), metavar="FILE",
              help="With --remote: the ssh_config file to use instead of ~/.ssh/config (ssh -F), kept in remote:.")
@handle_errors
def site_init(scheduler: str, output: str | None, name: str | None, remote: str | None,
              ssh_config: str | None) -> None:
    """Write a site file from the live scheduler (partitions, nodes, GPUs, limits), each value with its source."""
    from hpcjobs.sites.discover import discover_site, site_yaml, write_site_file

    if remote is not None:
        from hpcjobs.transport.discovery import discover_remote_site

        found = discover_remote_site(remote, scheduler=scheduler, name=name, ssh_config=ssh_config)
    elif ssh_config is not None:
        raise ConfigError(ConfigProblem("--ssh-config goes with --remote", key="--ssh-config"))
    else:
        found = discover_site(scheduler, name=name)
    if output:
        echo(f"wrote {write_site_file(found, output)} (site {found.name}, {len(found.partitions)} partitions)")
    else:
        click.echo(site_yaml(found), nl=False)


@site.command("diff")
@click.argument("site_name", metavar="NAME|FILE")
@handle_errors
def site_diff(site_name: str) -> None:
    """Compare a site file with the live cluster: one line per difference, exit 1 when they differ."""
    from hpcjobs.sites.diff import diff_site_file

    lines = diff_site_file(site_name)
    for line in lines:
        echo(line)
    if lines:
        sys.exit(EXIT_COMMAND_FAILED)
    echo(f"{site_name}: matches the cluster")


@site.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@handle_errors
def site_validate(files: tuple[str, ...]) -> None:
    """Validate site config FILES (exit 2 on any problem): schema, limits and a test render."""
    from hpcjobs.render.script import render_job
    from hpcjobs.sites.check import check_site_files

    problems = check_site_files(files, lambda job: render_job(job).text)
    for f in files:
        if not any(p.file == f for p in problems):
            echo(f"ok  {f}")
    if problems:
        raise ConfigError(problems)


@main.command()
@click.argument("kind", type=click.Choice(["experiment", "site"]))
@handle_errors
def schema(kind: str) -> None:
    """Print the JSON Schema of experiment or site files (for editors and CI)."""
    from hpcjobs.config.schemas import json_schema

    echo_json(json_schema(kind), indent=2)
