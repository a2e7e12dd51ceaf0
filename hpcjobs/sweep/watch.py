"""What ``hpcjobs watch`` shows of a running sweep: one :class:`WatchView` per poll.

Each :meth:`Watcher.poll` makes one batched scheduler call (:func:`hpcjobs.sweep.api.sweep_status`, as
``status`` does) and then reads only local files:

- the points per state for each **job shape** (the values of the parameters that set a key of the
  experiment, :func:`hpcjobs.sweep.points.shapes.experiment_keys`; one group when none does), from
  one grouped query of the ledger, made again only when the ledger changed (about 1.4 s for a
  million points with shape parameters; without them the ledger's own counts);
- **throughput** (points finished per minute over the last :data:`RATE_WINDOW_S` of polls, or since the
  sweep was created at the first poll) and the **estimated finish** (the points left at that rate);
- the **running points** (a page of them): their host and start from the header each attempt writes
  at the top of its ``stderr.log`` (:func:`hpcjobs.sweep.logs.point_log_preamble`), and the last
  sample of the job's GPU sampler file (``<output_dir>/<job name>-<job id>.gpu.csv``, written by
  ``launch: {gpu_sampler: true}``) where there is one;
- the **latest failures** with the tail of their logs.

Files are read bounded and never through a link out of the sweep's folders (:func:`read_regular`).
This module does not import pandas or rich; :mod:`hpcjobs.commands.watch` draws the view.
"""

from __future__ import annotations

import calendar
import csv
import io
import os
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcjobs import states
from hpcjobs.errors import ConfigError, UnsafePathError
from hpcjobs.safe_files import read_regular
from hpcjobs.sweep.logs import LOG_ERR, LOG_OUT

#: Seconds of poll history the throughput is measured over.
RATE_WINDOW_S = 600.0
#: Bytes read from the end of a log for its tail and its last start header.
TAIL_BYTES = 64 * 1024
#: Bytes read from the end of a GPU sampler file.
GPU_TAIL_BYTES = 16 * 1024

_HEADER_RE = re.compile(r"^=== hpcjobs: job (?P<job>\S+) on (?P<host>\S+) at "
                        r"(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) ===$", re.M)


@dataclass(frozen=True)
class GpuUse:
    """The last sample of a job's GPU sampler: mean utilisation and memory over the job's GPUs."""

    gpus: int
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


@dataclass(frozen=True)
class RunningPoint:
    """A running point: where and since when (from its log's header), and its GPUs' last sample."""

    index: int
    point_id: str
    job_id: str | None
    host: str | None
    started: float | None
    gpu: GpuUse | None
    log_err: Path
    log_out: Path


@dataclass(frozen=True)
class FailedPoint:
    """One of the latest failures, with the end of its stderr (or stdout, when stderr is empty)."""

    index: int
    point_id: str
    state: str
    exit_code: int | None
    job_id: str | None
    ended: float
    tail: str
    log_err: Path
    log_out: Path


@dataclass(frozen=True)
class ShapeCounts:
    """Points per state of one job shape (``label``: ``resources.gpus_per_node=2``, or ``all points``)."""

    label: str
    counts: dict[str, int]


@dataclass(frozen=True)
class WatchView:
    """One poll of a sweep, as ``hpcjobs watch`` shows it."""

    sweep_id: str
    site: str
    scheduler: str
    polled_at: float
    poll_seconds: float
    counts: dict[str, int]
    total: int  # points of the sweep, removed ones left out (SweepStatus.total)
    finished: int  # points in a terminal state (SweepStatus.finished)
    done: bool  # every point has finished (SweepStatus.done)
    shapes: list[ShapeCounts]
    running: list[RunningPoint]
    failures: list[FailedPoint]
    points_per_minute: float | None
    finish_at: float | None
    remote: bool = False
    changed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The view as JSON-ready data (``hpcjobs watch --json`` prints one per poll)."""
        def point(p: Any) -> dict[str, Any]:
            data = {k: v for k, v in p.__dict__.items()}
            for k in ("log_err", "log_out"):
                data[k] = str(data[k])
            if isinstance(data.get("gpu"), GpuUse):
                data["gpu"] = data["gpu"].__dict__
            return data

        return {"sweep_id": self.sweep_id, "site": self.site, "scheduler": self.scheduler,
                "polled_at": self.polled_at, "poll_seconds": self.poll_seconds, "counts": self.counts,
                "total": self.total, "finished": self.finished, "done": self.done,
                "shapes": [{"shape": s.label, "counts": s.counts} for s in self.shapes],
                "points_per_minute": self.points_per_minute, "finish_at": self.finish_at,
                "running": [point(p) for p in self.running], "failures": [point(p) for p in self.failures]}


# ------------------------------------------------------------------------------------ the files


def tail_text_of(path: Path, inside: Path, max_bytes: int = TAIL_BYTES) -> str:
    """The end of a file (at most ``max_bytes``, decoded), or empty when it cannot be read or leaves ``inside``."""
    try:
        return read_regular(path, max_bytes, tail=True, inside=inside).decode("utf-8", "replace")
    except (OSError, UnsafePathError):
        return ""


def last_start(stderr_text: str) -> tuple[str, str, float] | None:
    """``(job id, host, start)`` of the last attempt's header in a point's ``stderr.log`` text, or ``None``."""
    found = None
    for match in _HEADER_RE.finditer(stderr_text):
        found = match
    if found is None:
        return None
    started = calendar.timegm(time.strptime(found["at"], "%Y-%m-%dT%H:%M:%SZ"))
    return found["job"], found["host"], float(started)


def _number(text: str) -> float | None:
    text = text.strip().split(" ")[0]
    try:
        return float(text)
    except ValueError:
        return None  # [N/A], [Not Supported], blank


def latest_gpu_use(path: Path, inside: Path) -> GpuUse | None:
    """The last sample (each GPU's last row) of a GPU sampler file, or ``None``.

    The file is ``nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,
    memory.used,memory.total,power.draw --format=csv,nounits -l N`` output (see
    :mod:`hpcjobs.accounting.sources.gpu`): memory in MiB, a header at each start of the sampler.
    """
    text = tail_text_of(path, inside, GPU_TAIL_BYTES)
    lines = [line for line in text.splitlines() if line.strip()]
    if text and not text.endswith("\n") and lines:
        lines.pop()  # a line being written
    fields = ["timestamp", "index", "uuid", "utilization.gpu", "utilization.memory", "memory.used",
              "memory.total", "power.draw"]
    rows: list[dict[str, str]] = []
    for cells in csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True):
        if cells and cells[0].strip() == "timestamp":
            fields = [c.split(" [")[0].strip() for c in cells]
            rows = []
            continue
        if len(cells) == len(fields):
            rows.append(dict(zip(fields, cells, strict=True)))
    if not rows:
        return None
    latest: dict[str, dict[str, str]] = {}  # each GPU's last row (one sample's rows differ by a millisecond)
    for r in rows:
        latest[r.get("index", "0").strip()] = r
    last = list(latest.values())
    util = [u for u in (_number(r.get("utilization.gpu", "")) for r in last) if u is not None]
    used = [u for u in (_number(r.get("memory.used", "")) for r in last) if u is not None]
    total = [u for u in (_number(r.get("memory.total", "")) for r in last) if u is not None]
    return GpuUse(len(last), sum(util) / len(util) if util else None,
                  int(sum(used) * 2**20) if used else None, int(sum(total) * 2**20) if total else None)


def _gpu_file(folder: Path | None, job_id: str) -> Path | None:
    """The GPU sampler file of job ``job_id`` in the jobs' log folder (``<name>-<job id>.gpu.csv``)."""
    if folder is None:
        return None
    suffix = f"-{job_id}.gpu.csv"
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(suffix):
                    return Path(entry.path)
    except OSError:
        return None
    return None


# ------------------------------------------------------------------------------------ the watcher


@dataclass
class Watcher:
    """Polls one sweep and builds its :class:`WatchView`, keeping the poll history for the throughput.

    Args:
        sweep: Sweep id, name, unique prefix or folder.
        root: Folder of sweep folders.
        running_limit: Running points shown at most.
        failures_limit: Latest failures shown at most.
        tail_lines: Lines of each failure's log kept.
        clock: The time (for tests).
    """

    sweep: str | Path
    root: str | Path | None = None
    running_limit: int = 20
    failures_limit: int = 5
    tail_lines: int = 5
    clock: Callable[[], float] = time.time
    _history: deque[tuple[float, int]] = field(default_factory=deque)
    _shape_keys: list[str] | None = None
    _folder: Path | None = None
    _log_dir: Path | None = None
    _shapes_at: tuple[float, list[ShapeCounts]] | None = None

    def poll(self, *, client: Any = None) -> WatchView:
        """One batched scheduler call, then the ledger and the points' files."""
        from hpcjobs.sweep.api import sweep_status
        from hpcjobs.sweep.ledger import Ledger

        started = time.monotonic()
        st = sweep_status(self._folder or self.sweep, root=self.root, points_limit=0, client=client)
        seconds = time.monotonic() - started
        self._folder = folder = st.folder
        now = self.clock()
        with Ledger.open(folder, allow_read_only=True) as ledger:
            meta = ledger.meta
            if self._shape_keys is None:
                from hpcjobs.sweep.points.shapes import experiment_keys

                try:
                    self._shape_keys = experiment_keys(ledger.param_names())
                except ConfigError:  # a name that cannot vary was refused at submission: no shapes
                    self._shape_keys = []
                self._log_dir = self._jobs_log_dir(folder, meta.extra)
            changed_at = ledger.last_change()
            if self._shapes_at is None or self._shapes_at[0] != changed_at:  # one pass over the points, when
                self._shapes_at = (changed_at, self._shapes(ledger.counts_by_params(self._shape_keys)))  # changed
            shapes = self._shapes_at[1]
            running = ledger.points([states.RUNNING], limit=self.running_limit)
            failed = ledger.recent_points(sorted(states.FAILURE_STATES), self.failures_limit)
        remote = bool(meta.extra.get("remote"))
        rate = self._rate(now, st.finished, meta.created_at)
        left = st.total - st.finished
        finish_at = now + left / rate * 60 if rate and left > 0 else (now if left <= 0 else None)
        return WatchView(st.sweep_id, st.site, st.scheduler, now, seconds, dict(st.counts), st.total, st.finished,
                         st.done, shapes,
                         [self._running(folder, p) for p in running],
                         [self._failed(folder, p) for p in failed], rate, finish_at, remote, st.changed)

    def _rate(self, now: float, finished: int, created_at: float) -> float | None:
        """Points finished per minute over the last :data:`RATE_WINDOW_S` of polls (since the sweep was
        created, before there is history)."""
        history = self._history
        history.append((now, finished))
        while len(history) > 2 and now - history[1][0] >= RATE_WINDOW_S:
            history.popleft()
        first_t, first_n = history[0]
        if len(history) >= 2 and now - first_t >= 1 and finished > first_n:
            return (finished - first_n) / (now - first_t) * 60
        if finished and now - created_at >= 1:
            return finished / (now - created_at) * 60
        return None

    def _shapes(self, rows: Sequence[tuple[tuple[Any, ...], str, int]]) -> list[ShapeCounts]:
        keys = self._shape_keys or []
        groups: dict[tuple[Any, ...], dict[str, int]] = {}
        for values, state, n in rows:
            if state == "REMOVED":
                continue
            groups.setdefault(values, {})[state] = groups.get(values, {}).get(state, 0) + n
        out = []
        for values, counts in groups.items():
            label = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True) if v not in (None, "null"))
            out.append(ShapeCounts(label or "all points", counts))
        return out

    @staticmethod
    def _jobs_log_dir(folder: Path, extra: dict[str, Any]) -> Path | None:
        """The jobs' log folder (where GPU sampler files go): ``output_dir`` under the submit folder."""
        from hpcjobs.config.results import read_results_spec

        if extra.get("remote"):
            return None  # on the login node: hpcjobs logs fetches them
        _sources, output_dir = read_results_spec(folder)
        submit_dir = extra.get("submit_dir")
        if not output_dir:
            return None
        base = Path(submit_dir) if isinstance(submit_dir, str) else None
        path = Path(output_dir)
        return path if path.is_absolute() else (base / path if base is not None else None)

    def _running(self, folder: Path, p: Any) -> RunningPoint:
        run_dir = folder / "points" / p.point_id
        head = last_start(tail_text_of(run_dir / LOG_ERR, folder))
        job, host, started = head if head is not None else (None, None, None)
        gpu = None
        if job is not None and self._log_dir is not None:
            path = _gpu_file(self._log_dir, job)
            gpu = latest_gpu_use(path, self._log_dir) if path is not None else None
        return RunningPoint(p.index, p.point_id, p.job_id, host, started, gpu, run_dir / LOG_ERR, run_dir / LOG_OUT)

    def _failed(self, folder: Path, p: Any) -> FailedPoint:
        run_dir = folder / "points" / p.point_id
        text = ""
        for name in (LOG_ERR, LOG_OUT):
            lines = [line for line in tail_text_of(run_dir / name, folder).splitlines()
                     if line.strip() and not line.startswith("=== hpcjobs: job ")]
            if lines:
                text = "\n".join(lines[-self.tail_lines:])
                break
        return FailedPoint(p.index, p.point_id, p.state, p.exit_code, p.job_id, p.updated_at, text,
                           run_dir / LOG_ERR, run_dir / LOG_OUT)


def view_lines(view: WatchView, previous: WatchView | None = None) -> list[str]:
    """The plain lines ``hpcjobs watch`` prints per poll when its output is not a terminal: the counts,
    throughput and estimated finish, then each failure new since ``previous``."""
    counts = ", ".join(f"{s} {n}" for s, n in view.counts.items())
    rate = f"{view.points_per_minute:.2f} points/min" if view.points_per_minute else "rate unknown"
    finish = (time.strftime("finish ~%Y-%m-%d %H:%M:%S", time.localtime(view.finish_at))
              if view.finish_at is not None and not view.done else ("done" if view.done else "finish unknown"))
    stamp = time.strftime("%H:%M:%S", time.localtime(view.polled_at))
    lines = [f"{stamp} {view.sweep_id}: {view.finished}/{view.total} finished ({counts}); {rate}; {finish}"]
    seen = {(f.point_id, f.ended) for f in previous.failures} if previous is not None else set()
    for f in view.failures:
        if (f.point_id, f.ended) in seen:
            continue
        code = "" if f.exit_code is None else f" exit {f.exit_code}"
        last = f.tail.splitlines()[-1] if f.tail else "(no output)"
        lines.append(f"{stamp} point {f.index} ({f.point_id}) {f.state}{code}: {last}  [{f.log_err}]")
    return lines


__all__ = [
    "RATE_WINDOW_S",
    "FailedPoint",
    "GpuUse",
    "RunningPoint",
    "ShapeCounts",
    "WatchView",
    "Watcher",
    "last_start",
    "latest_gpu_use",
    "tail_text_of",
    "view_lines",
]


