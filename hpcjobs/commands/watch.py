"""``hpcjobs watch SWEEP``: a live view of a running sweep (rich Live), plain lines when not a terminal.

The view (:class:`hpcjobs.sweep.watch.WatchView`) is polled every ``--interval`` seconds, one batched
scheduler call per poll. In a terminal, keys act at once: ``1``-``9`` show the log of that row (the
running points are numbered first, then the failures), ``o``/``e`` switch between its stdout and
stderr, ``x`` closes it, ``r`` polls now, ``q`` quits. Without a terminal each poll prints one line,
and each new failure a line of its own; ``--json`` prints one JSON object per poll.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import Any

import click

from hpcjobs.cli import console, echo, echo_json, handle_errors, new_table
from hpcjobs.units import is_ascii_digits

STATE_STYLE = {"COMPLETED": "green", "FAILED": "red", "TIMEOUT": "red", "OUT_OF_MEMORY": "red",
               "NODE_FAIL": "red", "CANCELLED": "yellow", "RUNNING": "cyan", "PENDING": "blue",
               "SUBMITTED": "blue", "PLANNED": "dim"}
#: Lines of a point's log the log pane shows.
LOG_LINES = 15


def _duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    return f"{s // 86400}d{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}" if s >= 86400 else \
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f}"


def render_view(view: Any, selected: tuple[str, Any] | None, which: str, now: float) -> Any:
    """The rich renderable of one poll (and the log pane of the selected row)."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    from hpcjobs.errors import terminal_text

    parts: list[Any] = []
    rate = f"{view.points_per_minute:.2f} points/min" if view.points_per_minute else "rate: not yet known"
    if view.done:
        finish = "all finished"
    elif view.finish_at is not None:
        at = time.strftime("%H:%M", time.localtime(view.finish_at))
        finish = f"finish ~{at} (in {_duration(view.finish_at - now)})"
    else:
        finish = "finish: not yet known"
    head = (f"[bold]{escape(view.sweep_id)}[/] on {escape(view.site)} ({escape(view.scheduler)}): "
            f"{view.finished:,}/{view.total:,} finished · {rate} · {finish} · polled "
            f"{time.strftime('%H:%M:%S', time.localtime(view.polled_at))} ({view.poll_seconds:.1f} s)")
    parts.append(Text.from_markup(head))
    width = 50
    filled = int(width * view.finished / view.total) if view.total else width
    parts.append(Text.assemble(("━" * filled, "green"), ("━" * (width - filled), "grey30"),
                               f" {100 * view.finished / max(1, view.total):.0f}%"))
    order = [s for s in ("PLANNED", "SUBMITTED", "PENDING", "RUNNING", "COMPLETED", "FAILED")
             if any(s in sh.counts for sh in view.shapes)]
    order += sorted({s for sh in view.shapes for s in sh.counts} - set(order))
    shapes = new_table("shape", *order, box=None, title="points by job shape", title_justify="left")
    for sh in view.shapes:
        shapes.add_row(sh.label, *(str(sh.counts.get(s, "")) for s in order))
    parts.append(shapes)
    n = 0
    if view.running:
        table = new_table("key", "point", "index", "job", "host", "elapsed", "GPUs", "GPU util", "GPU mem GiB",
                          box=None, title=f"running ({view.counts.get('RUNNING', 0):,})", title_justify="left")
        for p in view.running:
            n += 1
            gpu = p.gpu
            table.add_row(str(n) if n <= 9 else "", p.point_id, str(p.index), p.job_id or "-", p.host or "-",
                          _duration(now - p.started if p.started else None),
                          str(gpu.gpus) if gpu else "-",
                          f"{gpu.utilization_pct:.0f}%" if gpu and gpu.utilization_pct is not None else "-",
                          f"{_gib(gpu.memory_used_bytes)}/{_gib(gpu.memory_total_bytes)}" if gpu else "-")
        parts.append(table)
    if view.failures:
        table = new_table("key", "point", "index", "state", "exit", "job", "last line", box=None,
                          title="latest failures", title_justify="left")
        for f in view.failures:
            n += 1
            last = f.tail.splitlines()[-1] if f.tail else "(no output)"
            table.add_row(str(n) if n <= 9 else "", f.point_id, str(f.index),
                          f"[{STATE_STYLE.get(f.state, 'white')}]{escape(f.state)}[/]",
                          "" if f.exit_code is None else str(f.exit_code), f.job_id or "-", last[:120])
        parts.append(table)
    if selected is not None:
        label, point = selected
        path = point.log_out if which == "out" else point.log_err
        from hpcjobs.sweep.watch import TAIL_BYTES, tail_text_of

        text = "\n".join(tail_text_of(path, path.parent.parent.parent, TAIL_BYTES).splitlines()[-LOG_LINES:])
        parts.append(Panel(Text(terminal_text(text or "(empty)", keep="\n")),
                           title=Text(terminal_text(f"{label} · {path}", keep="")), title_align="left"))
    keys = "keys: 1-9 a row's log · o/e stdout/stderr · x close · r poll now · q quit"
    if view.done:
        keys = "all points finished · " + keys
    parts.append(Text(keys, style="dim"))
    from hpcjobs.commands.terminal import stacked

    return stacked(*parts)


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """Single key presses from the terminal (cbreak mode, restored after); ``None`` without a terminal."""
    if not sys.stdin.isatty():
        yield None
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _read_key(fd: int | None, timeout: float) -> str | None:
    if fd is None:
        time.sleep(max(0.0, timeout))
        return None
    ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
    if not ready:
        return None
    data = os.read(fd, 32)
    return data.decode("utf-8", "replace")[:1] if data else "q"


def _rows(view: Any) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [(f"running point {p.index} ({p.point_id})", p) for p in view.running]
    rows += [(f"{f.state} point {f.index} ({f.point_id})", f) for f in view.failures]
    return rows[:9]


@click.command("watch")
@click.argument("sweep_name", metavar="SWEEP")
@click.option("--root", type=click.Path(file_okay=False), help="Folder of sweep folders.")
@click.option("--interval", type=click.FloatRange(min=0.5), default=10.0, show_default=True,
              help="Seconds between polls (each is one batched scheduler call).")
@click.option("--once", is_flag=True, help="Poll once, show the view and exit.")
@click.option("--running", "running_limit", type=click.IntRange(0, 500), default=20, show_default=True,
              help="Running points shown at most.")
@click.option("--failures", "failures_limit", type=click.IntRange(0, 100), default=5, show_default=True,
              help="Latest failures shown.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per poll (a line each), until finished.")
@handle_errors
def watch(sweep_name: str, root: str | None, interval: float, once: bool, running_limit: int,
          failures_limit: int, as_json: bool) -> None:
    """A live view of a sweep: states per job shape, throughput and estimated finish, running points with
    their elapsed time and GPU use, the latest failures and their logs. It ends when every point has
    finished (in a terminal: at q, so that the last failures' logs can still be read). Without a
    terminal: one line per poll, and one per new failure."""
    from hpcjobs.sweep.watch import Watcher, view_lines

    watcher = Watcher(sweep_name, root=root, running_limit=running_limit, failures_limit=failures_limit)
    view = watcher.poll()
    out = console(stderr=False)
    out.soft_wrap = False  # the live view wraps to the terminal's width
    if as_json or not out.is_terminal:
        previous = None
        while True:
            if as_json:
                echo_json(view.as_dict())
            else:
                for line in view_lines(view, previous):
                    echo(line)
            sys.stdout.flush()
            if once or view.done:
                return
            time.sleep(interval)
            previous, view = view, watcher.poll()
    from rich.live import Live

    selected: tuple[str, Any] | None = None
    which = "err"
    with _keys() as fd, Live(render_view(view, None, which, time.time()), console=out, auto_refresh=False,
                             transient=False, redirect_stderr=False) as live:
        live.refresh()
        next_poll = time.monotonic() + interval
        while not once and not (view.done and fd is None):
            key = _read_key(fd, min(1.0, max(0.0, next_poll - time.monotonic())))
            if key in ("q", "Q", "\x03"):
                break
            if key is not None and is_ascii_digits(key) and key != "0":
                rows = _rows(view)
                selected = rows[int(key) - 1] if int(key) <= len(rows) else selected
            elif key in ("o", "e"):
                which = "out" if key == "o" else "err"
            elif key == "x":
                selected = None
            if key == "r" or (not view.done and time.monotonic() >= next_poll):  # finished: no more polls
                view = watcher.poll()
                next_poll = time.monotonic() + interval
                if selected is not None:  # the same point, its newest record
                    pid = selected[1].point_id
                    selected = next(((lbl, p) for lbl, p in _rows(view) if p.point_id == pid), selected)
            live.update(render_view(view, selected, which, time.time()), refresh=True)
    if view.done:
        echo(f"{view.sweep_id}: all {view.total:,} point(s) finished "
             f"({', '.join(f'{s} {n}' for s, n in view.counts.items())})")
