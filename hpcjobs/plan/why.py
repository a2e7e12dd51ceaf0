"""``hpcjobs why``: why a sweep's jobs (or any job) wait, and what would change it.

The target is a sweep (or a job submitted with ``hpcjobs submit``) as ``status`` takes it, whose jobs come
from its ledger, or a scheduler job id. The scheduler's backend asks its scheduler in a fixed number of
calls (:meth:`~hpcjobs.schedulers.base.BaseBackend.explain_pending`: Slurm's ``squeue``, ``sprio``,
``sshare``, and for limit reasons ``sacctmgr`` and a second ``squeue``), over SSH for a sweep submitted
from a laptop. Each answer is kept for :data:`CACHE_SECONDS` (``<cache>/why/``, one file per command,
written atomically), so ``watch -n 2 hpcjobs why SWEEP`` asks the controller at most every few seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcjobs import process, transport
from hpcjobs.errors import ConfigError, ConfigProblem, HpcJobsError, IdArgumentError
from hpcjobs.schedulers.pending import PendingQuery
from hpcjobs.schedulers.registry import find_backend

log = logging.getLogger("hpcjobs.why")

#: Seconds a scheduler answer is reused by the next ``hpcjobs why``.
CACHE_SECONDS = 10.0
#: Seconds one query may take.
QUERY_TIMEOUT_S = 60.0
_JOB_ID = re.compile(r"[0-9]{1,12}(_[0-9]{1,9}|\[[0-9]{0,9}\])?(\.[A-Za-z0-9.-]{1,200})?")


@dataclass
class WhyReport:
    """What ``hpcjobs why`` found.

    Attributes:
        target: What was asked about (a sweep's id, or the job ids).
        scheduler: The scheduler asked.
        job_ids: The jobs asked about.
        query: The backend's answer (waiting jobs explained, the others' states, the commands run).
        cached: How many of the commands were answered from the cache.
        sweep_id: The sweep, when the target was one.
        plan: With ``plan``: ``hpcjobs plan``'s view of the sweep's experiment now (where it would start
            soonest), to compare with where its jobs wait.
        notes: What a person should know (a plan that could not be made).
    """

    target: str
    scheduler: str
    job_ids: list[str]
    query: PendingQuery
    cached: int = 0
    sweep_id: str | None = None
    notes: list[str] = field(default_factory=list)
    plan: Any = None


def explain_waiting(target: str, *, root: str | Path | None = None, site: str | None = None,
                    fresh: bool = False, cache_dir: str | Path | None = None, plan: bool = False) -> WhyReport:
    """Why ``target``'s jobs wait.

    Args:
        target: A sweep (id, name, unique prefix or folder) or a single job, as ``status`` takes it; else a
            scheduler job id (``1517``, ``1517_3``, ``2000.server``).
        root: Where sweeps are.
        site: For a job id: the site whose scheduler is asked (default: this machine's).
        fresh: Ask the scheduler even when the cache holds a recent answer.
        cache_dir: Where answers are cached (default: the accounting cache of this login node).
        plan: For a sweep: also ask where its experiment would start soonest now (:func:`plan_experiment`,
            its own calls: one start estimate per partition), without the accounting history.

    Raises:
        IdArgumentError: An empty or option-like target.
        ConfigError: No such sweep and not a job id, or a scheduler that does not explain waiting jobs (exit 2).
        CommandError: The scheduler's main query failed.
    """
    from hpcjobs.ids import check_id_argument

    check_id_argument(target, what="sweep or job", key="target")
    with transport.scope():
        sweep = _sweep_jobs(target, root)
        meta = None
        if sweep is not None:
            meta, job_ids = sweep
            sweep_id, scheduler = meta.sweep_id, meta.scheduler
        else:
            if not _JOB_ID.fullmatch(target):
                raise ConfigError(ConfigProblem(
                    f"no sweep or job {target!r} under the sweeps root, and it is not a scheduler job id",
                    key="target", expected="a sweep id, name or prefix; or a job id such as 1517 or 1517_3"))
            sweep_id, job_ids = None, [target]
            scheduler = _site_scheduler(site)
        backend = find_backend(scheduler)
        if backend is None or not backend.capabilities.explains_pending:
            raise ConfigError(ConfigProblem(f"hpcjobs why does not explain waiting jobs on {scheduler}",
                                            key="target", choices=_explaining()))
        if not job_ids:
            return WhyReport(sweep_id or target, scheduler, [], PendingQuery(notes=["nothing of it was submitted"]),
                             sweep_id=sweep_id)
        from hpcjobs.schedulers.client import SchedulerClient

        # through the scheduler's client: the backend's own executables (PBS's qstat, not a Slurm wrapper's)
        runner = _CachedRun(Path(cache_dir) if cache_dir else _default_cache(), fresh, SchedulerClient(backend))
        query = backend.explain_pending(job_ids, runner)
        report = WhyReport(sweep_id or target, scheduler, job_ids, query, runner.hits, sweep_id)
        if plan and meta is not None and query.pending:
            report.plan, note = _plan_of(meta)
            report.notes += [note] if note else []
    log.info("hpcjobs why asked %s %d time(s) (%d answered from the cache): %s", scheduler, len(query.calls),
             runner.hits, "; ".join(" ".join(a[:2]) for a in query.calls))
    return report


def _plan_of(meta: Any) -> tuple[Any, str | None]:
    """``hpcjobs plan`` of the sweep's experiment as its ledger (``meta``) recorded it, or why there is none."""
    from hpcjobs.plan.api import plan_experiment

    how = meta.extra or {}
    try:
        overrides = tuple(how.get("overrides", []))
        return plan_experiment(meta.experiment_path, site=how.get("site_arg"), overrides=overrides, history=False), None
    except HpcJobsError as exc:
        return None, f"no plan: {exc}"


def _explaining() -> tuple[str, ...]:
    from hpcjobs.schedulers.registry import BACKENDS

    return tuple(sorted(n for n, b in BACKENDS.items() if b.capabilities.explains_pending))


def _sweep_jobs(target: str, root: str | Path | None) -> tuple[Any, list[str]] | None:
    """The sweep's ledger meta and submitted job ids (its login node used), or ``None``: no such sweep."""
    from hpcjobs.sweep.find import find_sweep
    from hpcjobs.sweep.ledger.store import Ledger
    from hpcjobs.sweep.remote import use_recorded

    try:
        folder = find_sweep(target, root)
    except IdArgumentError:
        raise
    except ConfigError:
        return None
    with Ledger.open(folder, allow_read_only=True) as ledger:
        meta = ledger.meta
        job_ids = [s.job_id for s in ledger.submissions(with_points=False) if s.job_id and s.state == "submitted"]
    use_recorded(meta)
    return meta, list(dict.fromkeys(job_ids))


def _site_scheduler(site: str | None) -> str:
    from hpcjobs.config.sites import load_site
    from hpcjobs.render.script import detect_current_site
    from hpcjobs.sweep.request import site_login

    config = load_site(site or detect_current_site())
    transport.use(site_login(config))
    return config.scheduler


def _default_cache() -> Path:
    from hpcjobs.accounting.cache import accounting_cache_root

    return accounting_cache_root() / "why"


class _CachedRun:
    """Runs a query through the scheduler's client, reusing an answer younger than :data:`CACHE_SECONDS`."""

    def __init__(self, folder: Path, fresh: bool, client: Any) -> None:
        self.folder, self.fresh, self.hits, self.client = folder, fresh, 0, client

    def __call__(self, argv: list[str]) -> process.CommandResult:
        key = hashlib.sha256(json.dumps(argv).encode("utf-8", "surrogateescape")).hexdigest()[:32]
        path = self.folder / f"{key}.json"
        if not self.fresh:
            kept = self._read(path)
            if kept is not None:
                self.hits += 1
                return kept
        result: process.CommandResult = self.client.run(argv, timeout=QUERY_TIMEOUT_S, check=False)
        self._write(path, argv, result)
        return result

    @staticmethod
    def _read(path: Path) -> process.CommandResult | None:
        from hpcjobs.safe_files import read_regular

        try:
            data = json.loads(read_regular(path, 64 * 1024 * 1024))
        except (OSError, ValueError, HpcJobsError):
            return None
        if not isinstance(data, dict) or not 0 <= time.time() - float(data.get("at", 0)) < CACHE_SECONDS:
            return None
        return process.CommandResult(tuple(data["argv"]), int(data["returncode"]), str(data["stdout"]),
                                     str(data["stderr"]), 0.0)

    def _write(self, path: Path, argv: list[str], result: process.CommandResult) -> None:
        from hpcjobs.output import atomic_write_text
        from hpcjobs.safe_files import user_folder

        try:
            user_folder(self.folder, what="the why cache")
            atomic_write_text(path, json.dumps({"at": time.time(), "argv": argv, "returncode": result.returncode,
                                                "stdout": result.stdout, "stderr": result.stderr}),
                              mode=0o600, below=self.folder)
        except (OSError, HpcJobsError) as exc:  # a cache that cannot be written only costs the next call
            log.debug("why cache not written: %s", exc)


__all__ = ["CACHE_SECONDS", "WhyReport", "explain_waiting"]
