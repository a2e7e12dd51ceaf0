"""``hpcjobs metrics``: sweeps' state as OpenMetrics text: printed, written for node_exporter, or served."""

from __future__ import annotations

import click

from hpcjobs.cli import echo, handle_errors


@click.command("metrics")
@click.argument("sweeps", nargs=-1, metavar="[SWEEP]...")
@click.option("--root", type=click.Path(file_okay=False), help="Sweeps root folder (default: ./hpcjobs-sweeps).")
@click.option("--poll", is_flag=True, help="Ask the schedulers for the live jobs first (one batched call per "
              "scheduler and login node; the time it took is a metric).")
@click.option("--efficiency", is_flag=True, help="Add the finished points' CPU, memory and wall-time efficiency "
              "histograms, from the scheduler's accounting (one cached sacct query per sweep).")
@click.option("--textfile", type=click.Path(dir_okay=False), metavar="FILE.prom",
              help="Write the metrics to FILE.prom atomically, for node_exporter's textfile collector.")
@click.option("--listen", metavar="HOST:PORT", help="Serve GET /metrics on HOST:PORT (e.g. 127.0.0.1:9464; port 0: "
              "any free one) until interrupted, a fresh reading per scrape.")
@handle_errors
def metrics(sweeps: tuple[str, ...], root: str | None, poll: bool, efficiency: bool, textfile: str | None,
            listen: str | None) -> None:
    """Per-sweep point counts by state, submissions by outcome, resubmissions, creation and last-change
    times (with --poll the poll's duration, with --efficiency the points' efficiency histograms), as
    OpenMetrics text for Prometheus."""
    from hpcjobs.errors import ConfigError, ConfigProblem
    from hpcjobs.sweep.metrics import serve_metrics, sweep_metrics, write_textfile
    from hpcjobs.units import is_ascii_digits

    efficiencies = None
    if efficiency:
        from hpcjobs.analysis import point_efficiencies as efficiencies

    if listen:
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not is_ascii_digits(port) or int(port) > 65535:
            raise ConfigError(ConfigProblem(f"--listen {listen!r}: give HOST:PORT", key="--listen",
                                            expected="127.0.0.1:9464"))
        serve_metrics(host.strip("[]"), int(port),
                      lambda: sweep_metrics(root, sweeps, poll=poll, efficiency=efficiencies),
                      ready=lambda h, p: echo(f"serving http://{h}:{p}/metrics (Ctrl-C stops)", err=True))
        return
    text = sweep_metrics(root, sweeps, poll=poll, efficiency=efficiencies)
    if textfile:
        echo(f"wrote {write_textfile(textfile, text)}", err=True)
    else:
        click.echo(text, nl=False)
