"""Render a resolved job into a batch script."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import jinja2

from hpcjobs import __version__
from hpcjobs.config.experiment import Experiment
from hpcjobs.config.loading import load_experiment
from hpcjobs.config.site import SiteConfig
from hpcjobs.config.sites import DEFAULT_SITE, detect_site, find_site
from hpcjobs.config.validation import validate_document
from hpcjobs.config.yamlio import YamlDocument, read_yaml
from hpcjobs.containers import render_container
from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.render.directives import build_directives
from hpcjobs.render.pack import PackPlan
from hpcjobs.render.shellvalue import UnencodableValueError
from hpcjobs.render.templating import shell_quote, template_environment, template_search_path
from hpcjobs.resolve import ResolvedJob, resolve
from hpcjobs.schedulers.registry import job_env_of, template_of

log = logging.getLogger("hpcjobs.sites")

@dataclass(frozen=True)
class RenderedScript:
    """A rendered batch script and the job it was rendered from."""

    job: ResolvedJob
    text: str
    template: str

    @property
    def filename(self) -> str:
        """Suggested file name: ``<job name>.<scheduler>.sh``."""
        return f"{self.job.name}.{self.job.scheduler}.sh"


def _encoded(value: str, key: str) -> str:
    """``value`` as one bash word (:func:`hpcjobs.render.shellvalue.shell_word`).

    Raises:
        ConfigError: The value contains NUL (refused where it entered; this is the last guard).
    """
    try:
        return shell_quote(value)
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key=f"environment.{key}")) from None


def template_name(job: ResolvedJob, experiment_template: str | None = None) -> str:
    """Which template renders ``job``: the experiment's, else the site's, else its backend's (``template``)."""
    return experiment_template or job.site.template or template_of(job.scheduler)


def _template_problem(job: ResolvedJob, template: str | None, doc: YamlDocument | None, message: str) -> ConfigError:
    """``message`` located at the ``template:`` key that chose the template: the experiment's (``doc``, when
    known), else the site file's, else no file."""
    if template is not None and doc is not None:
        return ConfigError(doc.problem(("template",), message))
    if template is None and job.site.template and job.site_file:  # the site's `template:` names it
        from hpcjobs.sites.check import locate_in_site_file

        return ConfigError(locate_in_site_file(job.site_file, ("template",), message))
    return ConfigError(ConfigProblem(message, key="template"))


def load_template(job: ResolvedJob, *, template: str | None = None, template_dirs: tuple[str, ...] = (),
                  doc: YamlDocument | None = None) -> jinja2.Template:
    """The compiled template that renders ``job`` (:func:`template_name`), checked before anything is written.

    Args:
        job: The resolved job.
        template: The experiment's ``template:``.
        template_dirs: Extra template folders, searched first.
        doc: The experiment's document: a template it names that cannot be found is reported at its
            ``template:`` key (file and line, or ``--set``).

    Raises:
        ConfigError: The template is missing (or its name leaves the template folders), is not UTF-8, or
            has a syntax error.
    """
    name = template_name(job, template)
    env = template_environment(template_dirs)
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound as exc:
        searched = ", ".join(str(p) for p in template_search_path(template_dirs))
        if exc.name == name and (name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/")):
            message = (f"template {name!r} is outside the template folders: a template is named relative to them, "
                       f"without '..' or a leading '/' (searched {searched})")
        else:
            message = f"template {exc.name!r} not found (searched {searched})"
        raise _template_problem(job, template, doc, message) from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(ConfigProblem(f"template syntax error: {exc.message}", file=exc.filename or exc.name,
                                        line=exc.lineno)) from None
    except RecursionError:
        raise _recursion_error(name, template_dirs) from None


def _recursion_error(name: str, template_dirs: tuple[str, ...]) -> ConfigError:
    """The error for a template whose loading or rendering recursed without end: the cycle, link by link."""
    from hpcjobs.render.templating import template_cycle

    cycle = template_cycle(template_environment(template_dirs), name)
    if cycle is None:
        return ConfigError(ConfigProblem(f"template {name!r} recursed without end (a macro or an include that "
                                         "calls itself with no way out)", key="template"))
    chain = " -> ".join(f"{tpl} ({file or tpl}:{line} {how})" for tpl, file, how, line in cycle)
    first = cycle[0]
    return ConfigError(ConfigProblem(
        f"templates extend, include or import each other in a cycle: {chain} -> {first[0]}; break the cycle",
        file=first[1], line=first[3], key="template"))


def render_job(job: ResolvedJob, *, template: str | None = None,
               template_dirs: tuple[str, ...] = (), pack: PackPlan | None = None,
               doc: YamlDocument | None = None) -> RenderedScript:
    """Render ``job`` with the layered templates.

    Every value goes into the script through :func:`hpcjobs.render.shellvalue.shell_word` (the
    ``q``/``qpath`` filters and the ``environment_lines`` exports): one printable-ASCII word per
    value, decoded by bash to exactly the value's UTF-8 bytes. ``pack`` renders a packed array task
    (:class:`hpcjobs.render.pack.PackPlan`): the point's part of the script runs once per point.
    ``doc``: the experiment's document, to locate a missing template at its ``template:`` key.

    Raises:
        ConfigError: The template does not exist, is not UTF-8, has a syntax error, uses an undefined
            variable or includes or extends itself (directly or in a cycle); or a value contains NUL.
    """
    name = template_name(job, template)
    compiled = load_template(job, template=template, template_dirs=template_dirs, doc=doc)
    directives = build_directives(job)
    job_env = job_env_of(job.scheduler)
    prefix = job_env.directive_prefix
    lines = ["module purge"] if job.site.module_purge else []
    try:
        lines += [f"module load {shell_quote(m)}" for m in job.modules]
        for key, value in job.environment:
            lines.append(f"export {key}={_encoded(value, key)}")
        lines += [f"export HPCJOBS_JOB_NAME={shell_quote(job.name)}",
                  f"export HPCJOBS_SITE={shell_quote(job.site.name)}"]
        container = render_container(job)
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(str(exc))) from None
    context = {
        "job": job,
        "site": job.site,
        "scheduler": job.scheduler,
        "version": __version__,
        "directive_prefix": prefix,
        "directives": directives,
        "directive_lines": "".join(f"{prefix} {d}\n" for d in directives).rstrip("\n"),
        "environment": job.environment,
        "environment_lines": "\n".join(lines),
        "modules": job.modules,
        "module_purge": job.site.module_purge,
        "prologue": job.site.prologue,
        "epilogue": job.site.epilogue,
        "setup": job.setup,
        "body": job.body,
        "params": job.params,
        "array_index_var": job_env.array_index_var,
        "job_id_var": job_env.job_id_var,
        "launch": job.launch,
        "pack": pack,
        "container": container,
    }
    try:
        text = compiled.render(context)
    except jinja2.TemplateNotFound as exc:  # one it includes or extends
        searched = ", ".join(str(p) for p in template_search_path(template_dirs))
        raise ConfigError(ConfigProblem(f"template {exc.name!r} (used by {name!r}) not found (searched {searched})",
                                        key="template")) from None
    except RecursionError:
        raise _recursion_error(name, template_dirs) from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(ConfigProblem(f"template syntax error: {exc.message}", file=exc.filename or exc.name,
                                        line=exc.lineno)) from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(ConfigProblem(f"template {name!r} uses an undefined value: {exc.message}",
                                        key="template")) from None
    except UnencodableValueError as exc:
        raise ConfigError(ConfigProblem(f"template {name!r} quotes a value that cannot reach a job: {exc}",
                                        key="template")) from None
    return RenderedScript(job, text, name)


def detect_current_site(*, ask_scheduler: bool = False, refresh: bool = False) -> str:
    """The site of this machine: ``HPCJOBS_SITE``, host name and environment, the cluster name, discovery.

    The cluster name is read from local files (``slurm.conf``, ``pbs.conf``: see
    :mod:`hpcjobs.config.cluster_names`). A live scheduler is asked (site discovery, cached a day,
    again at once with ``refresh``) only with ``ask_scheduler``, which commands that submit set:
    rendering, listing and validating never wait on a controller that does not answer. Without it,
    a machine whose configuration names a cluster that no site file describes gets ``local`` with a
    warning, never silently. With ``ask_scheduler`` the site chosen and why is logged in one line.
    """
    name = detect_site()
    if name != DEFAULT_SITE:
        if ask_scheduler:
            log.warning("site %s (detected on this machine: HPCJOBS_SITE, host name or environment)", name)
        return name
    from hpcjobs.config.cluster_names import local_cluster_names

    clusters = local_cluster_names()
    for cluster in clusters:
        name = detect_site(cluster_name=cluster)
        if name != DEFAULT_SITE:
            if ask_scheduler:
                log.warning("site %s (detected from cluster %s in this machine's scheduler configuration)",
                            name, cluster)
            return name
    from hpcjobs.sites.discover import discovered_site_for_this_machine, discovery_enabled

    found = discovered_site_for_this_machine(ask=ask_scheduler, refresh=refresh and ask_scheduler)
    if found is not None:
        return str(found.path)
    if clusters and not ask_scheduler and discovery_enabled():
        log.warning("site local: this machine's scheduler configuration names cluster %s, but no site file "
                    "describes it and no discovered site is cached (this command does not ask the scheduler); "
                    "pass --site, or run `hpcjobs site init`", clusters[0])
    return DEFAULT_SITE


def load_checked_site(path: str | Path, *, template_dirs: tuple[str, ...] = ()) -> SiteConfig:
    """Load a site file, refused when ``hpcjobs site validate`` would refuse it: the one place commands load sites.

    The schema, then every check of :data:`hpcjobs.sites.check.SITE_CHECKS` (each reads the file alone:
    ``default_qos`` against the partitions, the prologue and epilogue and a one-CPU job on every
    partition through ``bash -n``, rendered with ``template_dirs`` as the command renders). Each problem
    names the file as given and its line, as ``site validate`` names them.

    Raises:
        ConfigError: Unreadable file, bad YAML, a schema violation, or a problem a site check found.
        CommandError: bash could not be started.
    """
    from hpcjobs.sites.check import site_problems

    doc = read_yaml(path)
    site = validate_document(SiteConfig, doc)
    problems = site_problems(site, doc, str(path), lambda job: render_job(job, template_dirs=template_dirs).text,
                             require_bash=False)
    if problems:
        raise ConfigError(problems)
    return site


def load_checked_site_named(name: str, *, template_dirs: tuple[str, ...] = ()) -> SiteConfig:
    """:func:`load_checked_site` of the site called ``name`` on the search path (or a site file's path).

    Raises:
        ConfigError: No such site, or one ``site validate`` refuses.
    """
    return load_checked_site(find_site(name), template_dirs=template_dirs)


def load_site_for(experiment: Experiment, site_override: str | None = None, *, ask_scheduler: bool = False,
                  refresh_site: bool = False, template_dirs: tuple[str, ...] = ()) -> tuple[SiteConfig, str]:
    """The site config an experiment runs on (``--site`` > the file's ``site:`` > detected) and its path.

    ``ask_scheduler``: detection may ask a live scheduler, and the site chosen is logged with the
    reason in one line (commands that submit, and ``sweep --dry-run``, which shows what they do).
    ``refresh_site``: discover the cluster again even when a discovered site is cached. The site is
    loaded by :func:`load_checked_site`: one ``site validate`` refuses is refused here too.
    """
    if site_override or experiment.site:
        name = str(site_override or experiment.site)
        if ask_scheduler:
            log.warning("site %s (%s)", name, "--site" if site_override else "the experiment's site: key")
    else:
        name = detect_current_site(ask_scheduler=ask_scheduler, refresh=refresh_site)
    path = find_site(name)
    return load_checked_site(path, template_dirs=template_dirs), str(path)


def render_experiment(
    path: str | Path,
    *,
    site: str | None = None,
    overrides: tuple[str, ...] = (),
    template_dirs: tuple[str, ...] = (),
    ask_scheduler: bool = False,
    refresh_site: bool = False,
) -> RenderedScript:
    """Load, resolve and render an experiment file as one job (``hpcjobs render`` calls :mod:`hpcjobs.render.api`).

    Raises:
        ConfigError: Anything wrong with the experiment, the site, or the request against the site.
    """
    experiment, doc = load_experiment(path, overrides)
    site_config, site_file = load_site_for(experiment, site, ask_scheduler=ask_scheduler, refresh_site=refresh_site,
                                           template_dirs=template_dirs)
    job = resolve(experiment, site_config, doc=doc, site_file=site_file)
    return render_job(job, template=experiment.template, template_dirs=template_dirs, doc=doc)
