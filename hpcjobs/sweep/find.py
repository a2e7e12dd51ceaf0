"""Finding a sweep, or a single job of ``hpcjobs submit``, from what a person typed.

:func:`find_sweep` takes a sweep folder, a sweep's full id or experiment name, a single job's job id,
request id or name (:func:`hpcjobs.sweep.singles_read.find_single`), or a unique prefix of an id,
under the root :func:`hpcjobs.sweep.identity.find_sweep_root` finds. Every command that names a
sweep or a job (``status``, ``logs``, ``cancel``, ``resubmit``, ``results``, ``report --sweep``) goes
through it.
"""

from __future__ import annotations

from pathlib import Path

from hpcjobs.errors import ConfigError, ConfigProblem, LedgerError
from hpcjobs.ids import MIN_PREFIX, check_id_argument, match_prefix
from hpcjobs.sweep.identity import broken_ledger, find_sweep_root, holds_ledger, name_of, sweep_folders
from hpcjobs.sweep.singles_read import find_single, sweep_job_hint


def find_sweep(name: str | Path, root: str | Path | None = None) -> Path:
    """The folder of a sweep given by folder path, full id, experiment name, or a unique prefix of an id;
    or of a single job (``hpcjobs submit``) given by its job id, request id or name.

    An exact id beats a name, a sweep's name beats a single job's id (then request id, then name),
    and all of them beat a prefix: with ``big-1a2b3c4d`` and ``bigger-5e6f7a8b`` under the root,
    ``big`` is the first (:func:`hpcjobs.sweep.singles_read.find_single` for single jobs). A prefix
    needs :data:`hpcjobs.ids.MIN_PREFIX` characters; an empty or blank ``name`` names nothing (not
    the current folder, which ``Path('')`` is).

    Raises:
        IdArgumentError: ``name`` is empty or blank, or a prefix too short or ambiguous (with the candidates).
        ConfigError: No such sweep or job (saying where it looked), or an ambiguous name (with the candidates).
        LedgerError: The sweep folder it names holds a ``ledger.sqlite`` that is not a regular file (a FIFO,
            a folder, a device, a link).
    """
    if not isinstance(name, Path):
        check_id_argument(name, what="sweep")
    p = Path(name)
    if holds_ledger(p):
        return p.resolve()
    where = find_sweep_root(root)
    base = where.path
    candidates = sweep_folders(base)
    text = str(name)
    for rule in (lambda c: c == text, lambda c: name_of(c) == text):
        matches = [c for c in candidates if rule(c)]
        if len(matches) == 1:
            return base / matches[0]
        if matches:
            raise ConfigError(ConfigProblem(f"ambiguous sweep {text!r} in {base}: give one of the ids",
                                            key="sweep", choices=tuple(matches)))
    single = find_single(text, base)  # between a sweep's exact name and a prefix: a single job
    if single is not None:
        return single
    prefixed = match_prefix(text, candidates, what="sweep", key="sweep", where=f" in {base}")
    if prefixed is not None:
        return base / prefixed
    _refuse_broken(text, p, base)
    hint = sweep_job_hint(text, base)
    raise ConfigError(ConfigProblem(f"no sweep {text!r} in {where.describe()}, and no job of `hpcjobs submit` "
                                    "with that id or name" + (f"; {hint}" if hint else ""), key="sweep",
                                    choices=tuple(candidates)))


def _refuse_broken(text: str, given: Path, base: Path) -> None:
    """When no sweep answers to ``text``: refuse a sweep folder it names (as a path, or as a folder of ``base``
    by id, name or prefix) whose ``ledger.sqlite`` is no regular file, said so rather than "no sweep".

    Raises:
        LedgerError: Its ``ledger.sqlite`` is a FIFO, a folder, a device or a link.
    """
    problem = broken_ledger(given)
    if problem is None:
        try:
            folders = sorted(d.name for d in base.iterdir() if d.is_dir() and broken_ledger(d) is not None)
        except (OSError, ValueError):
            folders = []
        named = ([f for f in folders if f == text] or [f for f in folders if name_of(f) == text]
                 or [f for f in folders if f.startswith(text) and len(text) >= MIN_PREFIX])
        problem = broken_ledger(base / named[0]) if len(named) == 1 else None
    if problem is not None:
        raise LedgerError(problem)


__all__ = ["find_sweep"]
