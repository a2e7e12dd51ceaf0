"""A sweep's identity: its id and the folder of sweep folders (:mod:`hpcjobs.sweep.find` finds one).

**The id** is ``<name>-<8 hex>``, the hex being a SHA-256 of what the sweep *means*: the validated
experiment (``--set`` applied) dumped as canonical JSON (sorted keys, every default filled in), the
command-line sweep arguments as parsed (``lr=0.1,0.01`` and ``lr=0.1, 0.01`` are the same grid) and
the site's name. Comments, key order, quoting style and blank lines of the file do not change it,
so re-running the same command after such an edit continues the same sweep.

Sweeps planned by earlier versions have ids hashed from the file's bytes (:func:`legacy_sweep_id`);
such a folder, when it exists, is still found and continued: recorded ids never change.

**A name already in use.** Running the same command (same overrides and sweep arguments) after the
experiment's content changed finds sweeps of the same name with other content: that is refused
(:func:`settle_identity`) unless the user says what they want: ``new`` starts another sweep,
``force`` continues the newest existing one with the new content.

**The root** (the folder holding sweep folders) is found like Git finds ``.git``
(:func:`find_sweep_root`): an explicit ``--root``, else the nearest ``hpcjobs-sweeps/`` in the
current folder or one of its parents, else ``$HPCJOBS_SWEEP_ROOT``, else ``./hpcjobs-sweeps``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from hpcjobs.config.experiment import Experiment
    from hpcjobs.sweep.prepare import PreparedSweep

#: Where sweep folders go unless told otherwise (relative to the submit directory).
DEFAULT_SWEEP_ROOT = "hpcjobs-sweeps"
#: The ledger file that marks a sweep folder.
_LEDGER = "ledger.sqlite"
#: ``meta.extra["identity"]`` of ledgers whose change check hashes the experiment's meaning.
IDENTITY_SCHEME = "meaning-v1"
_SUFFIX_RE = re.compile(r"-[0-9a-f]{8}(?:-[0-9]+)?$")


# ----------------------------------------------------------------------------------------- the root


@dataclass(frozen=True)
class SweepRoot:
    """The folder of sweep folders and how it was chosen.

    Attributes:
        path: The folder (absolute; it may not exist yet).
        how: ``--root``, ``found`` (an ``hpcjobs-sweeps/`` in the current folder or above),
            ``$HPCJOBS_SWEEP_ROOT`` or ``default``.
        start: The folder the upward search started from.
    """

    path: Path
    how: str
    start: Path

    def describe(self) -> str:
        """Where sweeps were looked for, in words (for "no sweep" messages)."""
        if self.how == "--root":
            return f"{self.path} (--root)"
        if self.how == "found":
            return f"{self.path} (the nearest {DEFAULT_SWEEP_ROOT}/ above {self.start})"
        searched = f"no {DEFAULT_SWEEP_ROOT}/ in {self.start} or its parents"
        if self.how == "$HPCJOBS_SWEEP_ROOT":
            return f"{self.path} ($HPCJOBS_SWEEP_ROOT; {searched})"
        return f"{self.path} ({searched}, $HPCJOBS_SWEEP_ROOT not set)"


def find_sweep_root(root: str | Path | None = None, *, start: str | Path | None = None) -> SweepRoot:
    """The folder holding sweep folders: ``root``, else the nearest ``hpcjobs-sweeps/`` upward, else
    ``$HPCJOBS_SWEEP_ROOT``, else ``./hpcjobs-sweeps``.

    Args:
        root: An explicit root (``--root``).
        start: Where the upward search starts (default: the current folder).
    """
    here = Path(start or Path.cwd()).resolve()
    if root:
        return _usable(SweepRoot(_absolute(root, "--root"), "--root", here))
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_SWEEP_ROOT
        if candidate.is_dir():
            return SweepRoot(candidate, "found", here)
    env = os.environ.get("HPCJOBS_SWEEP_ROOT")
    if env:
        return _usable(SweepRoot(_absolute(env, "$HPCJOBS_SWEEP_ROOT"), "$HPCJOBS_SWEEP_ROOT", here))
    return _usable(SweepRoot(here / DEFAULT_SWEEP_ROOT, "default", here))


def _absolute(path: str | Path, what: str) -> Path:
    """``path`` made absolute (links resolved as far as they exist), its file system errors typed."""
    from hpcjobs.safe_files import user_path_errors

    with user_path_errors(path, what=what, doing="use"):
        return Path(path).resolve()


def _usable(where: SweepRoot) -> SweepRoot:
    """``where``, once its path is known to be a folder, or nothing yet (then it can be made).

    Raises:
        ConfigError: The path (or a folder above it) is a file, a FIFO or a device, or a name in it is too
            long: named with how the root was chosen (``--root``, ``$HPCJOBS_SWEEP_ROOT``).
        FileSystemError: It cannot be looked up (permission denied).
    """
    from hpcjobs.safe_files import user_folder

    what = {"default": f"the sweep folder ./{DEFAULT_SWEEP_ROOT}"}.get(where.how, where.how)
    user_folder(where.path, what=what, create=False)
    return where


def sweep_root(root: str | Path | None = None) -> Path:
    """The folder holding sweep folders (see :func:`find_sweep_root`)."""
    return find_sweep_root(root).path


def sweep_folders(base: Path) -> list[str]:
    """Names of the sweep folders (those holding a ledger) directly under ``base``, sorted."""
    from hpcjobs.safe_files import user_path_errors

    with user_path_errors(base, what="the sweep root", doing="list"):
        if not base.is_dir():
            return []
        entries = list(base.iterdir())
    return sorted(d.name for d in entries if holds_ledger(d))


def holds_ledger(folder: str | Path) -> bool:
    """Whether ``folder`` holds a regular ledger file (``False`` for a path that cannot even be looked up:
    too long, a NUL byte, no permission)."""
    try:
        return (Path(folder) / _LEDGER).is_file()
    except (OSError, ValueError):
        return False


def broken_ledger(folder: str | Path) -> str | None:
    """Why ``folder``'s ``ledger.sqlite`` is no ledger file when something else is there (a FIFO, a folder,
    a device, a link): the message; ``None`` when it is a regular file or nothing is there."""
    from hpcjobs.safe_files import file_kind

    path = Path(folder) / _LEDGER
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    kind = file_kind(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            kind += f" (to {os.readlink(path)})"
    return (f"{path} is {kind}, not a ledger file: the record of sweep {Path(folder).name} cannot be read there; "
            "put the sweep's ledger.sqlite back (a regular file), or move the folder away")


def name_of(sweep_id: str) -> str:
    """The experiment name part of a sweep id: ``big-1a2b3c4d`` → ``big`` (``big-1a2b3c4d-2`` too)."""
    return _SUFFIX_RE.sub("", sweep_id)


# ------------------------------------------------------------------------------------------- the id


#: Keys added to the experiment after sweeps were first identified, left out of the digest while unset
#: (empty or null), so that adding them to the schema does not change the id of any existing sweep.
OMITTED_WHEN_UNSET: tuple[str, ...] = ("after", "notify", "pack", "container", "tracking")


def experiment_digest(experiment: Experiment) -> str:
    """SHA-256 of the experiment's meaning: the validated model as canonical JSON (sorted keys)."""
    data = experiment.model_dump(mode="json")
    for key in OMITTED_WHEN_UNSET:
        if data.get(key) in (None, [], {}):
            data.pop(key, None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical_sweep_args(sweep_args: Sequence[str]) -> Any:
    """The parsed command-line grid (order of keys kept: it orders the points)."""
    if not sweep_args:
        return []
    from hpcjobs.sweep.points.overrides import parse_overrides

    return [[k, [[type(v).__name__, v] for v in vs]] for k, vs in parse_overrides(sweep_args).items()]


def make_sweep_id(experiment: Experiment, sweep_args: Sequence[str], site: str) -> str:
    """``<name>-<first 8 hex of sha256(experiment's meaning, parsed sweep arguments, site)>``."""
    payload = json.dumps([experiment_digest(experiment), _canonical_sweep_args(sweep_args), site],
                         sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{experiment.name}-{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:8]}"


def legacy_sweep_id(name: str, experiment_text: str, overrides: Sequence[str], sweep_args: Sequence[str],
                    site: str) -> str:
    """The id earlier versions gave: a hash of the file's bytes, the raw overrides and the site."""
    h = hashlib.sha256()
    for part in (experiment_text, "\0".join(overrides), "\0".join(sweep_args), site):
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return f"{name}-{h.hexdigest()[:8]}"


def ledger_digest(prepared: PreparedSweep) -> str:
    """What the ledger's ``experiment_sha256`` holds for this sweep: the meaning digest, or for a
    ledger planned by an earlier version, the SHA-256 of the file's text (what it recorded)."""
    from hpcjobs.sweep.ledger.store import Ledger, experiment_sha256

    if (prepared.folder / _LEDGER).is_file():
        try:
            with Ledger.open(prepared.folder, allow_read_only=True) as ledger:
                if ledger.meta.extra.get("identity") != IDENTITY_SCHEME:
                    return experiment_sha256(prepared.experiment_text)
        except Exception:  # an unreadable ledger is reported by whoever opens it for real
            pass
    return experiment_digest(prepared.experiment)


# -------------------------------------------------------------------------------------- a name in use


def _same_command(folder: Path, overrides: Sequence[str], sweep_args: Sequence[str]) -> float | None:
    """When the sweep in ``folder`` was started with these overrides and sweep arguments: its creation
    time; else (or when its ledger cannot be read) ``None``."""
    from hpcjobs.sweep.ledger.store import Ledger

    try:
        with Ledger.open(folder, allow_read_only=True) as ledger:
            meta = ledger.meta
    except Exception:
        return None
    if meta.extra.get("kind") == "function":
        return None
    if list(meta.extra.get("overrides", [])) != list(overrides):
        return None
    if list(meta.extra.get("sweep_args", [])) != list(sweep_args):
        return None
    return float(meta.created_at or 0.0)


def settle_identity(prepared: PreparedSweep, *, overrides: Sequence[str] = (), sweep_args: Sequence[str] = (),
                    new: bool = False, force: bool = False, strict: bool = True) -> PreparedSweep:
    """Choose the sweep a run continues or starts, given the sweeps already under the root.

    - ``new``: always a new sweep (``<id>``, or ``<id>-2``, ``-3``... when that folder is taken).
    - The sweep with this id exists: continue it. So does one with the id an earlier version
      gave the same file, overrides and site (:func:`legacy_sweep_id`).
    - No sweep of this name was started by the same command (the same ``--set`` overrides and sweep
      arguments): start it. Another command line is a deliberate new sweep (``trial=3``).
    - Sweeps of this name were started by the same command, so the experiment's content changed:
      ``force`` continues the newest of them (its id kept, its ledger re-planned); otherwise a
      :class:`ConfigError` names them and says what to do (``strict=False``, for dry runs: the new
      id is kept and nothing is raised).

    Raises:
        ConfigError: The name is in use by a sweep with different content, and neither ``new`` nor
            ``force`` was given.
    """
    base = prepared.folder.parent

    def moved(sweep_id: str) -> PreparedSweep:
        return dataclasses.replace(prepared, sweep_id=sweep_id, folder=base / sweep_id)

    existing = set(sweep_folders(base))
    if new:
        if prepared.sweep_id not in existing:
            return prepared
        n = 2
        while f"{prepared.sweep_id}-{n}" in existing:
            n += 1
        return moved(f"{prepared.sweep_id}-{n}")
    if prepared.sweep_id in existing:
        return prepared
    legacy = legacy_sweep_id(prepared.experiment.name, prepared.experiment_text, overrides, sweep_args,
                             prepared.site.name)
    if legacy in existing:
        return moved(legacy)
    started = {s: _same_command(base / s, overrides, sweep_args) for s in existing
               if name_of(s) == prepared.experiment.name}
    same_name = sorted((s for s, t in started.items() if t is not None), key=lambda s: started[s] or 0.0)
    if not same_name:
        return prepared
    if force:
        return moved(same_name[-1])
    if not strict:
        return prepared
    listed = ", ".join(same_name)
    raise ConfigError(ConfigProblem(
        f"a sweep named {prepared.experiment.name!r} already exists with different content ({listed} in {base}); "
        f"this experiment would be sweep {prepared.sweep_id}. Run with --new to start it as another sweep, or "
        f"with --force to continue {same_name[-1]} with the new content",
        file=str(prepared.experiment_path), key="name", choices=tuple(same_name)))


__all__ = ["DEFAULT_SWEEP_ROOT", "IDENTITY_SCHEME", "SweepRoot", "experiment_digest",
           "find_sweep_root", "ledger_digest", "legacy_sweep_id", "make_sweep_id", "name_of", "settle_identity",
           "sweep_folders", "sweep_root"]
