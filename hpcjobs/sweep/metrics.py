"""``hpcjobs metrics``: the sweeps' state as OpenMetrics text, for Prometheus.

One family per fact, one sample per sweep (and state), read from the ledgers; with ``poll`` the live
jobs are first asked of their schedulers in one batched call per scheduler and login node
(:func:`hpcjobs.sweep.listing.list_sweeps`), and the time that took is a metric of its own. The text
follows the OpenMetrics exposition format (https://prometheus.io/docs/specs/om/open_metrics_spec/):
``# TYPE``/``# HELP``/``# UNIT`` lines, counters' samples ending in ``_total``, label values escaped
(``\\``, ``"`` and line feeds), and ``# EOF`` last.

:func:`write_textfile` writes it for node_exporter's textfile collector (a ``.prom`` file, replaced
atomically so the collector never reads half of it); :func:`serve_metrics` answers ``GET /metrics`` on an
address of this machine, with a fresh reading for every scrape.

With ``efficiency`` the finished points' CPU, memory and wall-time efficiency come from the scheduler's
accounting (:func:`hpcjobs.analysis.point_efficiencies`: one windowed, cached ``sacct`` query per sweep;
pandas) as one **histogram** per sweep and measure, not a sample per point: a sweep may have a million
points, and a Prometheus series per point would be a million series.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs.errors import ConfigError, ConfigProblem, LedgerError
from hpcjobs.sweep.ledger.store import Ledger

log = logging.getLogger("hpcjobs.metrics")

#: The ``Content-Type`` of OpenMetrics text.
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass
class Family:
    """One metric family: its name, type, help, unit and samples (labels, value)."""

    name: str
    type: str
    help: str
    unit: str = ""
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


#: The upper bounds of the efficiency histograms' buckets (``+Inf`` added): a ratio, 1 is all of what was asked.
EFFICIENCY_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
#: Accounting column → metric name stem of its histogram.
EFFICIENCY_COLUMNS: dict[str, str] = {"cpu_efficiency": "cpu", "mem_efficiency": "memory",
                                      "time_efficiency": "walltime"}
#: The label key that names a sample's suffix (``_bucket``, ``_count``, ``_sum``), taken off by :func:`exposition`.
SUFFIX = "__suffix__"


def histogram_samples(labels: dict[str, str], values: Sequence[float],
                      buckets: Sequence[float] = EFFICIENCY_BUCKETS) -> list[tuple[dict[str, str], float]]:
    """The samples of one OpenMetrics histogram of ``values``: cumulative ``_bucket`` counts (``le``), ``_count``,
    ``_sum``."""
    out = [({**labels, "le": repr(float(b)), SUFFIX: "_bucket"}, sum(1 for v in values if v <= b)) for b in buckets]
    out.append(({**labels, "le": "+Inf", SUFFIX: "_bucket"}, len(values)))
    out.append(({**labels, SUFFIX: "_count"}, len(values)))
    out.append(({**labels, SUFFIX: "_sum"}, round(sum(values), 9)))
    return out


def exposition(families: Sequence[Family]) -> str:
    """``families`` as OpenMetrics text, ending in ``# EOF``."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# TYPE {fam.name} {fam.type}")
        if fam.unit:
            lines.append(f"# UNIT {fam.name} {fam.unit}")
        lines.append(f"# HELP {fam.name} {_escape(fam.help)}")
        for labels, value in fam.samples:
            suffix = labels.get(SUFFIX, "_total" if fam.type == "counter" else "")
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items() if k != SUFFIX)
            lines.append(f"{fam.name}{suffix}{{{text}}} {_number(value)}" if text else
                         f"{fam.name}{suffix} {_number(value)}")
    return "\n".join([*lines, "# EOF"]) + "\n"


def sweep_metrics(root: str | Path | None = None, sweeps: Sequence[str] = (), *, poll: bool = False,
                  efficiency: Callable[[Path], dict[str, list[float]]] | None = None) -> str:
    """The metrics of ``sweeps`` (ids, names or prefixes; default: every sweep under the root) as OpenMetrics.

    ``efficiency``: the finished points' efficiencies of a sweep folder (accounting column → values), e.g.
    :func:`hpcjobs.analysis.point_efficiencies`; with it, the efficiency histograms are added.

    Raises:
        ConfigError: A named sweep is not under the root (exit 2).
    """
    from hpcjobs.sweep.listing import list_sweeps

    started = time.monotonic()
    listing = list_sweeps(root, poll=poll)
    poll_seconds = time.monotonic() - started
    chosen = _chosen(listing.sweeps, sweeps, listing.root.path)
    points = Family("hpcjobs_sweep_points", "gauge",
                    "Points of the sweep in each state (the ledger's, after the poll).")
    total = Family("hpcjobs_sweep_points_planned", "gauge", "Points the sweep has in all.")
    subs = Family("hpcjobs_sweep_submissions", "counter", "Submission attempts of the sweep's chunks, by outcome "
                  "(submitted, failed: refused or not sent, unknown: an ambiguous answer looked up later).")
    created = Family("hpcjobs_sweep_created_timestamp_seconds", "gauge", "When the sweep was planned.", "seconds")
    changed = Family("hpcjobs_sweep_last_change_timestamp_seconds", "gauge", "When a point of the sweep last changed.",
                     "seconds")
    as_of = Family("hpcjobs_sweep_as_of_timestamp_seconds", "gauge",
                   "When the counts were true (the poll, or the ledger's last change when not polled).", "seconds")
    resubmitted = Family("hpcjobs_sweep_point_resubmissions", "counter",
                         "Times the sweep's points were submitted again (hpcjobs resubmit; a scheduler's own "
                         "requeue keeps the job and is not counted).")
    hists = {column: Family(f"hpcjobs_sweep_point_{stem}_efficiency_ratio", "histogram",
                            f"The finished points' {stem} efficiency (used / asked, from the scheduler's "
                            "accounting; above 1: more than asked).", "ratio")
             for column, stem in EFFICIENCY_COLUMNS.items()}
    for summary in chosen:
        labels = {"sweep": summary.sweep_id, "site": summary.site, "scheduler": summary.scheduler}
        for state, n in summary.counts.items():
            points.samples.append(({**labels, "state": state}, n))
        total.samples.append((labels, sum(summary.counts.values())))
        created.samples.append((labels, summary.created_at))
        as_of.samples.append((labels, summary.as_of))
        try:
            with Ledger.open(summary.folder, allow_read_only=True) as ledger:
                changed.samples.append((labels, ledger.last_change()))
                by_state: dict[str, int] = {}
                for sub in ledger.submissions(with_points=False):
                    by_state[sub.state] = by_state.get(sub.state, 0) + 1
                resubmitted.samples.append((labels, ledger.resubmissions()))
        except LedgerError as exc:
            log.warning("sweep %s: %s", summary.sweep_id, exc)
            continue
        for state in ("submitted", "failed", "unknown", "submitting"):
            subs.samples.append(({**labels, "state": state}, by_state.get(state, 0)))
        if efficiency:
            for column, values in efficiency(summary.folder).items():
                if column in hists:
                    hists[column].samples.extend(histogram_samples(labels, values))
    families = [points, total, subs, created, changed, as_of, resubmitted]
    if efficiency:
        families += list(hists.values())
    if poll:
        families.append(Family("hpcjobs_poll_duration_seconds", "gauge",
                               "Seconds the poll of the sweeps' schedulers took (every sweep listed).", "seconds",
                               [({}, round(poll_seconds, 6))]))
        families.append(Family("hpcjobs_poll_scheduler_calls", "gauge", "Scheduler calls the poll made (one per "
                               "scheduler and login node).", "", [({}, listing.scheduler_calls)]))
    return exposition(families)


def _chosen(summaries: list, wanted: Sequence[str], root: Path) -> list:
    """The summaries of the sweeps named in ``wanted``, found as ``status`` finds them (:func:`find_sweep`)."""
    if not wanted:
        return summaries
    from hpcjobs.sweep.find import find_sweep

    folders = [find_sweep(name, root).resolve() for name in wanted]
    return [s for s in summaries if s.folder.resolve() in folders]


def write_textfile(path: str | Path, text: str) -> Path:
    """``text`` into ``path`` for node_exporter's textfile collector: atomically, never through a link.

    Raises:
        ConfigError: ``path`` does not end in ``.prom`` (the collector reads only those), or is a FIFO, a
            device or a folder.
    """
    from hpcjobs.output import write_user_file

    if not str(path).endswith(".prom"):
        raise ConfigError(ConfigProblem(f"{path}: node_exporter's textfile collector reads only files ending in "
                                        ".prom", key="--textfile", expected="a path such as "
                                        "/var/lib/node_exporter/textfile/hpcjobs.prom"))
    return write_user_file(path, text, what="--textfile", mode=0o644)


def serve_metrics(host: str, port: int, produce: Callable[[], str], *,
                  ready: Callable[[str, int], None] | None = None) -> None:
    """Answer ``GET /metrics`` on ``host:port`` with ``produce()`` until interrupted.

    Only addresses of this machine's loopback are served unless ``host`` names another interface on
    purpose; a scrape is answered with a fresh reading. ``ready`` is told the address bound (port 0: any).
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name for a GET
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is here")
                return
            try:
                body = produce().encode("utf-8")
            except Exception as exc:  # a scrape gets a 500 with the reason, the server stays
                self.send_error(500, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # http.server's signature
            log.debug("metrics: " + format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    try:
        if ready is not None:
            ready(*server.server_address[:2])
        server.serve_forever()
    finally:
        server.server_close()


__all__ = ["CONTENT_TYPE", "Family", "exposition", "serve_metrics", "sweep_metrics", "write_textfile"]
