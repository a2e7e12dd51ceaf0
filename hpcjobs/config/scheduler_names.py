"""The schedulers a site file may name, and what each lets a site file say: the config layer's view.

The config layer sits below the scheduler backends and never imports them, yet a site's
``scheduler:`` must accept every backend there is (the built-in ones, those of the
``hpcjobs.schedulers`` entry points and those registered at run time) and the site schema's rules
depend on the backend (a ``swarm:`` section only on a Swarm site). The backends' registry answers
through a *catalog* plugged in here (:func:`set_catalog`), not through an import: the package's
top module (``hpcjobs/__init__.py``) plugs :func:`hpcjobs.schedulers.registry.site_catalog` in, so
it is there before any site file is read, and this module stays free of the schedulers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SiteRules:
    """What a site file of one scheduler may hold, and what the config layer needs to know of it.

    Attributes:
        name: The value of ``scheduler:`` (``slurm``).
        site_section: The settings section a site of this scheduler must have, named like a site
            key (``swarm``: ``swarm:``); no other scheduler's site may have it.
        site_fields: Site keys only schedulers listing them accept, each with what it holds in
            words (``{"qos_limits": "Slurm QOS limits"}``).
        partitions: Whether a site of this scheduler has partitions (the local runner has none).
        runs_here: Jobs run as processes of this machine: the site is never detected by host name.
        container_runtimes: The container runtimes a job on this scheduler can run in (a site's
            ``containers.runtimes`` may list only these).
        short_options: Short options of raw directives and the long option each stands for
            (``{"p": "partition"}``), so that a site's ``forbidden_directives`` catch both spellings.
    """

    name: str
    site_section: str | None = None
    site_fields: Mapping[str, str] = field(default_factory=dict)
    partitions: bool = True
    runs_here: bool = False
    container_runtimes: frozenset[str] = frozenset()
    short_options: Mapping[str, str] = field(default_factory=dict)


#: A catalog answers every scheduler it knows by name; ``everything=True`` also loads the plug-ins
#: (entry points), which only a name that is not known yet needs.
Catalog = Callable[[bool], Mapping[str, SiteRules]]

_catalog: Catalog | None = None


def set_catalog(catalog: Catalog) -> None:
    """Plug in the source of :class:`SiteRules` (done once, by the package's top module)."""
    global _catalog
    _catalog = catalog


def known(*, everything: bool = False) -> Mapping[str, SiteRules]:
    """Every scheduler known now, by name, in the catalog's order (``everything``: plug-ins loaded too)."""
    return {} if _catalog is None else _catalog(everything)


def facts_of(name: str) -> SiteRules | None:
    """What a site of scheduler ``name`` may hold, or ``None`` when no backend has that name (plug-ins included)."""
    found = known().get(name)
    if found is None:
        found = known(everything=True).get(name)
    return found


def scheduler_names(*, everything: bool = False) -> tuple[str, ...]:
    """The names ``scheduler:`` accepts (``everything``: with the plug-ins')."""
    return tuple(known(everything=everything))


def field_owners(key: str) -> tuple[list[str], str | None]:
    """The schedulers whose sites accept site key ``key`` (a section or a scheduler-only field), and what it
    holds in words (``None`` for a section); ``([], None)`` when every scheduler accepts it."""
    owners: list[str] = []
    what: str | None = None
    for facts in known().values():
        if facts.site_section == key:
            owners.append(facts.name)
        elif key in facts.site_fields:
            owners.append(facts.name)
            what = what or facts.site_fields[key]
    return owners, what
