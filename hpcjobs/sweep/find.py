"""Finding a sweep, or a single job of ``hpcjobs submit``, from what a person typed.

:func:`find_sweep` takes a sweep folder, a sweep's full id or experiment name, a single job's job id,
request id or name (:func:`hpcjobs.sweep.singles_read.find_single`), or a unique prefix of an id,
under the root :func:`hpcjobs.sweep.identity.find_sweep_root` finds. Every command that names a
sweep or a job (``status``, ``logs``, ``cancel``, ``resubmit``, ``results``, ``report --sweep``) goes
through it.
"""

from __future__ import annotations

from pathlib import Path

from hpcjobs.errors import ConfigError, ConfigProblem
from hpcjobs.ids import check_id_argument, match_prefix
from hpcjobs.sweep.identity import find_sweep_root, name_of, sweep_folders
from hpcjobs.sweep.ledger.schema import LEDGER_FILE
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
    """
    if not isinstance(name, Path):
        check_id_argument(name, what="sweep")
    p = Path(name)
    if _is_sweep_folder(p):
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
    hint = sweep_job_hint(text, base)
    raise ConfigError(ConfigProblem(f"no sweep {text!r} in {where.describe()}, and no job of `hpcjobs submit` "
                                    "with that id or name" + (f"; {hint}" if hint else ""), key="sweep",
                                    choices=tuple(candidates)))


def _is_sweep_folder(path: Path) -> bool:
    """Whether ``path`` holds a sweep ledger (``False`` for a name the file system cannot even look up)."""
    try:
        return (path / LEDGER_FILE).is_file()
    except (OSError, ValueError):  # too long, or a NUL byte
        return False


__all__ = ["find_sweep"]
