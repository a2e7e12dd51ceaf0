"""What ``hpcjobs site validate`` checks: the schema, and that a small job renders on every partition."""

from __future__ import annotations

from collections.abc import Sequence

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.sites import load_site_file
from hpcjobs.errors import ConfigError, ConfigProblem


def check_site_files(files: Sequence[str]) -> list[ConfigProblem]:
    """Validate each site file and render a one-CPU job on each of its partitions.

    Returns:
        Every problem found, each naming its file (empty when all files are good).
    """
    from hpcjobs.render.script import render_job
    from hpcjobs.resolve import resolve

    problems: list[ConfigProblem] = []
    for f in files:
        try:
            site = load_site_file(f)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        partitions: list[str | None] = list(site.partitions) or [None]
        for partition in partitions:
            exp = Experiment(name="validate", command="true", partition=partition,
                             account=site.default_account or (site.accounts[0] if site.accounts else
                                                              ("validate" if site.account_required else None)))
            try:
                render_job(resolve(exp, site, site_file=f))
            except ConfigError as exc:
                for p in exc.problems:
                    p.file = p.file or f
                    p.message = f"test render on partition {partition!r}: {p.message}"
                problems.extend(exc.problems)
    return problems
