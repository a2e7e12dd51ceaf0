"""Slurm QOS and association limits for ``site init``: ``sacctmgr`` argv and pure parsers of its output.

Both queries keep ``sacctmgr``'s header line (``--parsable2`` without ``--noheader``) and the parsers
find columns by name, so a column order or an extra column never shifts a value. ``sacctmgr``
prints its own short names in the header (``MaxSubmitPU`` for ``MaxSubmitJobsPerUser``, ``MaxTRES``
for ``MaxTRESPerJob``, ``Def QOS`` for ``DefaultQOS``); see https://slurm.schedmd.com/sacctmgr.html
("SPECIFICATIONS FOR QOS", "LIST/SHOW ASSOCIATION FORMAT OPTIONS") and
https://slurm.schedmd.com/resource_limits.html for what each limit does.

A job above its QOS's ``MaxWall`` is accepted by ``sbatch`` and then pends for ever with reason
``QOSMaxWallDurationPerJobLimit`` unless the QOS has the ``DenyOnLimit`` flag (seen on Slurm 22.05):
hpcjobs refuses such a request before ``sbatch`` (``qos_limits`` in the site file).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hpcjobs.config.discover_model import DiscoveredSite, Sourced
from hpcjobs.units import format_walltime_slurm, is_ascii_digits, parse_walltime

QOS_FIELDS = ("Name", "MaxSubmitJobsPerUser", "MaxWall", "MaxTRESPerJob", "GrpTRES", "Flags")
QOS_ARGV = ["sacctmgr", "--parsable2", "show", "qos", "format=" + ",".join(QOS_FIELDS)]
ASSOC_FIELDS = ("Cluster", "Account", "Partition", "QOS", "DefaultQOS", "MaxSubmitJobs", "GrpSubmitJobs", "MaxWall")

QSRC = "sacctmgr show qos"
ASRC = "sacctmgr show associations"

#: The header spellings ``sacctmgr`` prints for a format field (the field name itself is accepted too).
_HEADERS: dict[str, tuple[str, ...]] = {
    "MaxSubmitJobsPerUser": ("MaxSubmitPU", "MaxSubmitJobsPerUser"),
    "MaxTRESPerJob": ("MaxTRES", "MaxTRESPerJob"),
    "DefaultQOS": ("Def QOS", "DefaultQOS"),
    "MaxSubmitJobs": ("MaxSubmit", "MaxSubmitJobs"),
    "GrpSubmitJobs": ("GrpSubmit", "GrpSubmitJobs"),
}


def assoc_argv(user: str) -> list[str]:
    """``sacctmgr`` query of ``user``'s associations (``where`` and the condition are separate words).

    Given as one word, ``"where user=root"`` makes sacctmgr exit 1 with ``Unknown condition``.
    """
    return ["sacctmgr", "--parsable2", "show", "associations", "where", f"user={user}",
            "format=" + ",".join(ASSOC_FIELDS)]


def parse_parsable2(text: str) -> list[dict[str, str]]:
    """``sacctmgr --parsable2`` output with its header line → one dict per row, keyed by header name."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or "|" not in lines[0]:
        return []
    header = [h.strip() for h in lines[0].split("|")]
    return [dict(zip(header, (v.strip() for v in line.split("|")), strict=False)) for line in lines[1:]]


def field(row: Mapping[str, str], name: str) -> str:
    """The value of format field ``name`` in ``row``, whichever header spelling ``sacctmgr`` used."""
    for header in _HEADERS.get(name, (name,)):
        if header in row:
            return row[header]
    return ""


def count(text: str | None) -> int | None:
    """A positive whole number, else ``None`` (blank means "no limit" in ``sacctmgr`` output)."""
    t = (text or "").strip()
    return int(t) if is_ascii_digits(t) and int(t) > 0 else None


def wall_seconds(text: str | None) -> int | None:
    """Seconds of a ``MaxWall`` (``00:10:00``, ``1-00:00:00``), ``None`` when blank, ``UNLIMITED`` or unreadable."""
    t = (text or "").strip()
    if not t or t.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    try:
        return parse_walltime(t) or None
    except ValueError:
        return None


def tres_count(text: str | None, kind: str) -> int | None:
    """The ``cpu`` or GPU count in a TRES list (``cpu=4,gres/gpu=1``; typed GPUs ``gres/gpu:a100=2`` add up).

    ``gres/gpu`` alone is the total; typed entries count only when it is absent.
    """
    items = dict(item.split("=", 1) for item in (text or "").split(",") if "=" in item)
    if kind == "cpu":
        return count(items.get("cpu"))
    if "gres/gpu" in items:
        return count(items["gres/gpu"])
    typed = [count(v) for k, v in items.items() if re.fullmatch(r"gres/gpu:[^=]+", k)]
    if not typed:
        return None
    return sum(v for v in typed if v) or None


def default_qos(row: Mapping[str, str]) -> str | None:
    """The QOS a job of this association runs under when it names none.

    ``DefaultQOS`` when set; else ``normal`` when the association may use it (or lists no QOS), else its
    first allowed QOS (the rule of ``hpcjobs.schedulers.slurm.backend.SlurmBackend.parse_user_limits``).
    """
    allowed = [q.strip() for q in field(row, "QOS").split(",") if q.strip()]
    return field(row, "DefaultQOS") or ("normal" if "normal" in allowed or not allowed else allowed[0])


def parse_submit_limits(assoc_text: str, qos_text: str) -> tuple[int | None, str]:
    """The tightest per-user submit limit of the user's associations and their default QOS, with its source.

    Counted: each association's ``MaxSubmitJobs`` and ``GrpSubmitJobs`` and the ``MaxSubmitJobsPerUser``
    of the QOS its jobs run under when they name none (:func:`default_qos`). Other QOS's limits go
    to ``qos_limits`` (:func:`qos_limits`).

    Args:
        assoc_text: Output of :func:`assoc_argv`.
        qos_text: Output of :data:`QOS_ARGV`.
    """
    rows = parse_parsable2(assoc_text)
    qos = {r.get("Name", ""): r for r in parse_parsable2(qos_text)}
    best: tuple[int | None, str] = (None, "")
    for row in rows:
        for name, src in (("MaxSubmitJobs", "MaxSubmit"), ("GrpSubmitJobs", "GrpSubmit")):
            value = count(field(row, name))
            if value and (best[0] is None or value < best[0]):
                best = (value, f"{ASRC}: {src} (account {row.get('Account', '?')})")
        dq = default_qos(row)
        value = count(field(qos.get(dq or "", {}), "MaxSubmitJobsPerUser"))
        if value and (best[0] is None or value < best[0]):
            best = (value, f"{QSRC}: MaxSubmitPU of {dq} (the default QOS of account {row.get('Account', '?')})")
    return best


def user_qos_names(assoc_text: str) -> list[str]:
    """Every QOS the user's associations may use, in order of first appearance."""
    names: list[str] = []
    for row in parse_parsable2(assoc_text):
        for q in [*field(row, "QOS").split(","), field(row, "DefaultQOS")]:
            if q.strip() and q.strip() not in names:
                names.append(q.strip())
    return names


def qos_limits(qos_text: str, allowed: Sequence[str] | None = None) -> dict[str, dict[str, Sourced]]:
    """``qos_limits`` entries of the QOS in ``allowed`` (every QOS when ``None``) that set a limit.

    ``max_cpus_per_job``/``max_gpus_per_job`` are the smaller of ``MaxTRESPerJob`` and ``GrpTRES``:
    a job asking more than the QOS's whole group limit can never start either.
    """
    out: dict[str, dict[str, Sourced]] = {}
    for row in parse_parsable2(qos_text):
        name = row.get("Name", "")
        if not name or (allowed is not None and name not in allowed):
            continue
        entry: dict[str, Sourced] = {}
        wall = wall_seconds(row.get("MaxWall"))
        if wall:
            entry["max_walltime"] = Sourced(format_walltime_slurm(wall), f"{QSRC}: MaxWall={row['MaxWall']}")
        submit = count(field(row, "MaxSubmitJobsPerUser"))
        if submit:
            entry["max_submitted_jobs"] = Sourced(submit, f"{QSRC}: MaxSubmitPU={submit}")
        for key, kind in (("max_cpus_per_job", "cpu"), ("max_gpus_per_job", "gpu")):
            per_job, group = tres_count(field(row, "MaxTRESPerJob"), kind), tres_count(row.get("GrpTRES"), kind)
            values = [v for v in (per_job, group) if v]
            if values:
                src = (f"MaxTRES={field(row, 'MaxTRESPerJob')}" if min(values) == per_job
                       else f"GrpTRES={row['GrpTRES']}")
                entry[key] = Sourced(min(values), f"{QSRC}: {src}")
        if entry:
            out[name] = entry
    return out


def add_qos_limits(site: DiscoveredSite, assoc_text: str, qos_text: str) -> None:
    """Put the limits of the QOS the user may use into ``site.qos`` (with a note for those without any)."""
    allowed = user_qos_names(assoc_text)
    site.qos.update(qos_limits(qos_text, allowed or None))
    plain = [q for q in allowed if q not in site.qos]
    if plain:
        site.notes.append(f"qos_limits: {', '.join(plain)} set no MaxWall, MaxSubmitPU, MaxTRES or GrpTRES "
                          f"({QSRC})")
    defaults = sorted({d for d in (default_qos(r) for r in parse_parsable2(assoc_text)) if d})
    if defaults:
        site.notes.append(f"jobs that name no QOS run under {', '.join(defaults)} ({ASRC}: Def QOS, else normal); "
                          "hpcjobs checks qos_limits for the QOS a job names (qos:) or the site's default_qos")
