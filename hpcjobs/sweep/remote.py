"""A sweep on a login node reached over SSH, as its ledger (here) records it.

The ledger stays on this machine and is the source of truth; the login node holds the copy jobs read and
the run folders they write (:class:`hpcjobs.transport.RemotePlaces`, recorded in the ledger's meta at
planning). Commands on a recorded sweep reconnect through :func:`use_recorded`; :func:`fetch_outputs`
brings back what jobs wrote, only what is new or changed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hpcjobs import transport
from hpcjobs.process import output_limits
from hpcjobs.render.pack import EXIT_FILE_PREFIX
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.transport import RemotePlaces

log = logging.getLogger("hpcjobs.sweep")

#: Folders of a sweep folder that jobs write and :func:`fetch_outputs` brings back.
JOB_OUTPUTS = ("points",)


def recorded_places(meta: Any) -> RemotePlaces | None:
    """Where the sweep of ledger meta ``meta`` lives on its login node (``None``: it runs here)."""
    data = (meta.extra or {}).get("remote")
    return RemotePlaces.from_dict(data) if isinstance(data, dict) else None


def use_recorded(meta: Any) -> RemotePlaces | None:
    """Send this scope's scheduler commands to the sweep's login node, if it has one (inside a transport scope)."""
    places = recorded_places(meta)
    if places is not None:
        transport.use(places.login)
    return places


def fetch_outputs(folder: Path, meta: Any, job_ids: Iterable[str] | None = None) -> int:
    """Bring the run folders and scheduler logs of a remote sweep here (new or changed files only).

    Run folders land in ``folder/points``; the jobs' output folders under the submit folder recorded at
    planning, as a local sweep has them. The output folder is shared by every sweep submitted from the
    same workdir: with ``job_ids`` (the sweep's jobs, from its ledger) only the log files whose names hold
    one of their numbers come (``train-1517_3.out``, ``train.o2000``); without, all of them. Returns the
    number of files fetched (0 for a local sweep).

    Raises:
        RemoteConnectionError: ssh could not reach the login node.
    """
    places = recorded_places(meta)
    if places is None:
        return 0
    from hpcjobs.config.results import read_results_spec
    from hpcjobs.transport.files import pull

    with transport.scope():
        session = transport.use(places.login)
        single = (meta.extra or {}).get("kind") == "job"  # a single job has no run folder: its logs only
        report = pull(session, places.folder, folder, () if single else JOB_OUTPUTS)
        fetched = len(report.fetched or [])
        output_dir = read_results_spec(folder)[1] or str((meta.extra or {}).get("output_dir") or "")
        submit_dir = (meta.extra or {}).get("submit_dir")
        if output_dir and submit_dir and not output_dir.startswith("/"):
            logs = pull(session, places.workdir, Path(str(submit_dir)), (output_dir,),
                        keep=None if job_ids is None else logs_of_jobs(job_ids))
            fetched += len(logs.fetched or [])
    if report.skipped_large:
        log.warning("left on %s (over the size fetched): %s", places.login.target, ", ".join(report.skipped_large[:10]))
    return fetched


def logs_of_jobs(job_ids: Iterable[str]) -> Callable[[str], bool]:
    """Whether a log file's name (its last path part) holds the number of one of ``job_ids`` as a whole number.

    ``1517``, ``1517_3`` (a Slurm array task) and ``2000[].server`` (a PBS array) all count by their leading number.
    """
    numbers = sorted({m.group(0) for j in job_ids if (m := re.match(r"[0-9]+", j))})
    if not numbers:
        return lambda _rel: False
    pattern = re.compile(r"(?<![0-9])(?:" + "|".join(numbers) + r")(?![0-9])")
    return lambda rel: pattern.search(rel.rsplit("/", 1)[-1]) is not None


_EXIT_LINE = re.compile(r"points/([0-9a-f]{1,64})/" + re.escape(EXIT_FILE_PREFIX) + r"([0-9a-f]{1,64}):(-?[0-9]{1,4})")


def remote_exit_reader(places: RemotePlaces) -> Callable[[Path, str], int | None]:
    """``read_exit`` for a packed sweep on a login node: every point's exit files there, read in one session.

    The session runs at the first question (a poll whose packed tasks have not started asks none).
    """
    found: dict[tuple[str, str], int] | None = None

    def exit_of(run_dir: Path, token: str) -> int | None:
        nonlocal found
        if found is None:
            found = _exit_codes(places)
        return found.get((run_dir.name, token))

    return exit_of


def _exit_codes(places: RemotePlaces) -> dict[tuple[str, str], int]:
    script = (f"{{\ncd -- {shell_word(places.folder)} 2>/dev/null || exit 0\n"
              f"[ -d points ] && [ ! -L points ] || exit 0\n"
              f"find points -mindepth 2 -maxdepth 2 -type f -name {shell_word(EXIT_FILE_PREFIX + '*')} -size -1024c "
              "-print0 | xargs -0 -r grep -H -m1 -s '' --\nexit 0\n}\n")
    with transport.scope(), output_limits(None):
        session = transport.use(places.login)
        out = session.run_script(script, shown=["grep", "-r", EXIT_FILE_PREFIX, places.folder]).stdout
    codes = {}
    for line in out.splitlines():
        m = _EXIT_LINE.fullmatch(line.strip())
        if m:
            codes[(m.group(1), m.group(2))] = int(m.group(3))
    return codes


__all__ = ["JOB_OUTPUTS", "fetch_outputs", "recorded_places", "remote_exit_reader", "use_recorded"]


def check_code_sync(site: Any, submit_dir: Path) -> None:
    """Refuse a ``remote.sync`` entry that is missing from ``submit_dir`` or is a link, before anything is written.

    Raises:
        ConfigError: One problem per entry (key ``remote.sync``).
    """
    from hpcjobs.errors import ConfigError, ConfigProblem
    from hpcjobs.transport.files import sync_problems

    remote = site.remote
    if remote is None or not remote.sync:
        return
    problems = sync_problems(submit_dir, remote.sync)
    if problems:
        raise ConfigError([ConfigProblem(f"site {site.name!r}: {text}", key="remote.sync") for text in problems])


def send_code(places: RemotePlaces, site: Any, submit_dir: Path, sent: dict[str, tuple[int, int]]) -> list[str]:
    """The site's ``remote.sync`` files, from ``submit_dir`` to the login node's workdir, where the jobs start.

    Only what changed since ``sent`` says (one session, none when nothing changed). Returns the paths sent.

    Raises:
        RemoteConnectionError, CommandError: The transfer failed.
    """
    from hpcjobs.transport.files import push, sync_filter

    remote = site.remote
    if remote is None or not remote.sync:
        return []
    skip = sync_filter(remote.sync, remote.sync_exclude)
    return push(transport.use(places.login), submit_dir, places.workdir, skip=skip, sent=sent)
