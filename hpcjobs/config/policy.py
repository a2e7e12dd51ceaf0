"""Site policy on raw directives, and names that look like secrets.

A site's ``forbidden_directives`` lists option and resource names it must not receive
(``mem``, ``partition``, ``A``). A raw directive can spell the same request many ways:

* Slurm (``sbatch`` man page, OPTIONS): long options with ``=`` or a space (``--mem=4G``,
  ``--mem 4G``), unique abbreviations of long options (``getopt_long`` accepts them:
  ``--parti=x``) and short options (``-p x``, ``-px``, ``-A acct``);
* PBS Pro / Torque (``qsub`` man pages): options with the value attached or apart
  (``-lmem=4gb``, ``-l mem=4gb``, ``-qbig``), ``-l`` resource lists separated by commas
  (``-l walltime=1:00:00,mem=4gb``), and chunk specifications inside ``select=`` (chunks joined by
  ``+``, resources by ``:``, e.g. ``select=2:ncpus=4:mem=4gb+1:ncpus=1``) or Torque's
  ``nodes=1:ppn=4:gpus=1``.

:func:`directive_names` lists every name a directive line sets, so that none of those
spellings slips past the list; several options on one line are all read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from hpcjobs.config import scheduler_names

#: ``-l`` resources whose value is itself a ``:``-separated chunk list (PBS ``select``, Torque ``nodes``).
_CHUNK_RESOURCES = frozenset({"select", "nodes"})
_LONG_RE = re.compile(r"--([A-Za-z][A-Za-z0-9_-]*)")
_SHORT_RE = re.compile(r"-([A-Za-z])(.*)", re.S)
_RESOURCE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _words(directive: str) -> list[str]:
    try:
        return shlex.split(directive)
    except ValueError:  # an unbalanced quote: the scheduler splits on blanks
        return directive.split()


def resource_names(resource_list: str) -> set[str]:
    """Resource names in a PBS/Torque ``-l`` list: ``walltime=1:00:00,select=1:mem=4gb`` → {walltime, select, mem}."""
    names: set[str] = set()
    for item in resource_list.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if _RESOURCE_NAME_RE.fullmatch(name):
            names.add(name)
        elif not sep:
            continue
        if name in _CHUNK_RESOURCES:
            for chunk in value.split("+"):
                for part in chunk.split(":"):
                    key, has_value, _ = part.partition("=")
                    key = key.strip()
                    if has_value and _RESOURCE_NAME_RE.fullmatch(key):
                        names.add(key)
                    elif not has_value and name == "nodes" and _RESOURCE_NAME_RE.fullmatch(key):
                        names.add(key)  # a Torque node property (``nodes=1:ppn=4:bigmem``)
    return names


def directive_names(directive: str, scheduler: str | None = None) -> set[str]:
    """Every option and resource name a raw directive line sets.

    ``--mem=4G`` → {mem}; ``-l select=1:mem=4gb`` → {l, select, mem}; ``-lmem=4gb`` → {l, mem};
    where the scheduler names the long option a short one stands for (its backend's ``short_options``),
    that name too (Slurm: ``-p x`` → {p, partition}).

    Args:
        directive: The text after ``#SBATCH``/``#PBS``.
        scheduler: The site's scheduler family; its short options add their long names.
    """
    names: set[str] = set()
    facts = scheduler_names.facts_of(scheduler) if scheduler else None
    short_options = facts.short_options if facts is not None else {}
    words = _words(directive)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        long = _LONG_RE.match(word)
        if long:
            names.add(long.group(1))
            continue
        short = _SHORT_RE.fullmatch(word)
        if not short:
            continue
        letter, attached = short.group(1), short.group(2)
        names.add(letter)
        if letter in short_options:
            names.add(short_options[letter])
        if letter == "l":
            value = attached
            if not value and i < len(words) and not words[i].startswith("-"):
                value = words[i]
                i += 1
            names |= resource_names(value)
    return names


def forbidden_in(directive: str, forbidden: Iterable[str], scheduler: str | None = None) -> set[str]:
    """The forbidden names ``directive`` sets, counting unique abbreviations of Slurm long options.

    ``--me=4G`` is refused when ``mem`` is forbidden: sbatch either reads it as ``--mem`` or
    rejects it as ambiguous, so refusing it costs nothing.
    """
    banned = set(forbidden)
    if not banned:
        return set()
    names = directive_names(directive, scheduler)
    hits = names & banned
    for word in _words(directive):
        long = _LONG_RE.match(word)
        if long and len(long.group(1)) >= 2:
            hits |= {b for b in banned if len(b) > 1 and b.startswith(long.group(1))}
    return hits


#: Endings of variable names that usually hold a credential.
_SECRET_NAME_RE = re.compile(r"(TOKEN|KEY|PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIALS?)\Z", re.IGNORECASE)


def looks_like_secret(name: str) -> bool:
    """Whether a variable name reads like a credential (``HF_TOKEN``, ``WANDB_API_KEY``, ``DB_PASSWORD``)."""
    return bool(_SECRET_NAME_RE.search(name))


def slurm_exports_environment(directives: Iterable[str]) -> bool:
    """Whether Slurm still passes the submitter's environment to the job given these directives.

    ``sbatch --export`` defaults to ``ALL``; ``--export=NONE`` or a list of names without ``ALL``
    stops the submitter's other variables reaching the job (sbatch man page, ``--export``).
    """
    for d in directives:
        words = _words(d)
        for i, word in enumerate(words):
            name, sep, value = word.partition("=")
            if name != "--export":
                continue
            if not sep:
                value = words[i + 1] if i + 1 < len(words) else ""
            if "ALL" not in [v.strip() for v in value.split(",")]:
                return False
    return True
