"""Output formats of the PBS stand-in's qstat, following openpbs/torque ``qstat.c``.

* :func:`prt_attr` is a transcription of ``prt_attr()`` (value tokenised on ``,`` like
  ``strtok``, line limit 78 for OpenPBS and 77 for Torque, ``\\n\\t`` continuations,
  mid-token breaks, the comma not counted in the column).
* :func:`render_json` follows ``generate_json()`` of pbs_json.c (4-space indentation,
  ``"key":value``, numbers inferred with ``strtod``, ``Jobs`` only when a job is printed).
* :func:`render_xml` follows Torque's ``create_full_job_xml()`` (one line, raw epoch times).
"""

from __future__ import annotations

import json
import re
from typing import Any

import standin_state as st

Attr = tuple[str, "str | None", str]


class Str(str):
    """A value that is always emitted as a JSON string (no number inference)."""


TIME_ATTRS = {"ctime", "etime", "stime", "mtime", "qtime", "obittime", "start_time", "comp_time"}

STRTOD_RE = re.compile(
    r"^\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+|inf(?:inity)?|nan)?\s*$",
    re.IGNORECASE,
)
JSON_NUMBER_RE = re.compile(r"^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$")


def prt_attr(name: str, resource: str | None, value: str, limit: int) -> str:
    """Format one ``qstat -f`` attribute exactly like ``prt_attr()`` (no final newline).

    Args:
        name: attribute name.
        resource: resource name for ``Resource_List.x`` style attributes.
        value: the value.
        limit: 78 (OpenPBS) or 77 (Torque).

    Returns:
        The attribute text, possibly spanning several lines.
    """
    head = f"    {name}" + (f".{resource}" if resource else "") + " = "
    out = [head]
    start = len(name) + 7 + (len(resource) + 1 if resource else 0)
    tokens = [tok for tok in value.split(",") if tok]
    first = True
    for number, token in enumerate(tokens):
        if len(token) + start < limit:
            out.append(token)
            start += len(token)
        else:
            if not first:
                out.append("\n\t")
                start = 9
            for char in token:
                out.append(char)
                start += 1
                if start > limit:
                    start = 8
                    out.append("\n\t")
        if number + 1 < len(tokens):
            first = False
            out.append(",")
    return "".join(out)


def unwrap(text: str) -> list[tuple[str, str]]:
    """Inverse of the ``-f`` layout for one job block: [(name, value)] (test helper)."""
    pairs: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("\t") and pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + line[1:])
        elif line.startswith("    ") and " = " in line:
            key, _, value = line[4:].partition(" = ")
            pairs.append((key, value))
    return pairs


def _display_value(name: str, value: Any, epoch_times: bool) -> str:
    if name in TIME_ATTRS and not epoch_times:
        return st.ctime_text(float(value))
    if name in TIME_ATTRS:
        return str(int(value))
    return str(value)


def render_full_text(jobs: list[tuple[str, list[Attr]]], flavor: str, one_line: bool = False) -> str:
    """Render ``qstat -f`` text: ``Job Id:`` line, attributes, one blank line per job."""
    limit = 78 if flavor == "pbspro" else 77
    chunks = []
    for jid, attrs in jobs:
        lines = [f"Job Id: {jid}"]
        for name, resource, value in attrs:
            shown = _display_value(name, value, epoch_times=False)
            if one_line:
                shown = shown.replace("\n", "\\n").replace("\f", "\\f")
                lines.append(f"    {name}" + (f".{resource}" if resource else "") + f" = {shown}")
            else:
                lines.append(prt_attr(name, resource, shown, limit))
        chunks.append("\n".join(lines) + "\n\n")
    return "".join(chunks)


def _infer(value: str, mode: str) -> str:
    """JSON text for a scalar: a number when ``strtod`` takes all of it, else a string."""
    if STRTOD_RE.match(value):
        if mode == "legacy":
            return value
        if JSON_NUMBER_RE.match(value.strip()):
            return value.strip()
    return json.dumps(value, ensure_ascii=False)


def _split_variables(value: str) -> list[tuple[str, str]]:
    pairs = []
    for item in re.split(r"(?<!\\),", value):
        if not item:
            continue
        key, _, val = item.partition("=")
        pairs.append((key, val.replace("\\,", ",")))
    return pairs


def _emit(items: list[tuple[str, Any]], indent: int, mode: str) -> str:
    out = []
    for number, (key, value) in enumerate(items):
        out.append(",\n" if number else "\n")
        pad = " " * indent
        if isinstance(value, list):
            out.append(f'{pad}"{key}":{{')
            out.append(_emit(value, indent + 4, mode))
            out.append(f"\n{pad}}}")
        elif isinstance(value, int) and not isinstance(value, bool):
            out.append(f'{pad}"{key}":{value}')
        elif isinstance(value, Str):
            out.append(f'{pad}"{key}":{json.dumps(str(value), ensure_ascii=False)}')
        else:
            out.append(f'{pad}"{key}":{_infer(str(value), mode)}')
    return "".join(out)


def render_json(jobs: list[tuple[str, list[Attr]]], timestamp: int, version: str, server: str, mode: str) -> str:
    """Render ``qstat -f -F json`` like OpenPBS 23.06 (``mode`` ``legacy``: raw strtod numbers)."""
    top: list[tuple[str, Any]] = [
        ("timestamp", timestamp),
        ("pbs_version", Str(version)),
        ("pbs_server", Str(server)),
    ]
    if jobs:
        job_items: list[tuple[str, Any]] = []
        for jid, attrs in jobs:
            fields: list[tuple[str, Any]] = []
            for name, resource, value in attrs:
                shown = _display_value(name, value, epoch_times=False)
                if name == "Variable_List":
                    fields.append((name, _split_variables(shown)))
                elif resource:
                    if fields and fields[-1][0] == name and isinstance(fields[-1][1], list):
                        fields[-1][1].append((resource, shown))
                    else:
                        fields.append((name, [(resource, shown)]))
                else:
                    fields.append((name, shown))
            job_items.append((jid, fields))
        top.append(("Jobs", job_items))
    text = "{" + _emit(top[:1], 4, mode)
    rest = _emit(top[1:], 4, mode)
    return text + ("," + rest if rest else "") + "\n}\n"


def render_xml(jobs: list[tuple[str, list[Attr]]]) -> str:
    """Render Torque ``qstat -x``: XML declaration line plus one ``<Data>`` line."""
    parts = ["<Data>"]
    for jid, attrs in jobs:
        parts.append(f"<Job><Job_Id>{escape(jid)}</Job_Id>")
        open_group = None
        for name, resource, value in attrs:
            shown = escape(_display_value(name, value, epoch_times=True))
            if resource:
                if open_group != name:
                    if open_group:
                        parts.append(f"</{open_group}>")
                    parts.append(f"<{name}>")
                    open_group = name
                parts.append(f"<{resource}>{shown}</{resource}>")
            else:
                if open_group:
                    parts.append(f"</{open_group}>")
                    open_group = None
                parts.append(f"<{name}>{shown}</{name}>")
        if open_group:
            parts.append(f"</{open_group}>")
        parts.append("</Job>")
    parts.append("</Data>")
    return '<?xml version="1.0"?>\n' + "".join(parts) + "\n"


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` for XML element text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut_star(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "*"


def render_table(rows: list[dict[str, str]], flavor: str, header: bool) -> str:
    """Render the default ``qstat`` table (one row per job) for either flavour."""
    out = []
    if flavor == "pbspro":
        if header:
            out.append("Job id            Name             User              Time Use S Queue\n")
            out.append("----------------  ---------------- ----------------  -------- - -----\n")
        for row in rows:
            head, _, rest = row["id"].partition(".")
            jid = head + ("." + rest.split(".")[0] if rest else "")
            name = row["name"] if len(row["name"]) < 16 else row["name"][:15] + "*"
            out.append(
                f"{_cut_star(jid, 17):<17} {name:<16} {_cut_star(row['owner'], 16):<16}  "
                f"{_cut_star(row['timeu'], 8):>8} {row['state']:>1} {_cut_star(row['queue'], 16):<16}\n"
            )
    else:
        if header:
            out.append("Job ID                    Name             User            Time Use S Queue\n")
            out.append("------------------------- ---------------- --------------- -------- - -----\n")
        for row in rows:
            jid = row["id"] if len(row["id"]) <= 22 else row["id"][:28]
            out.append(
                f"{jid:<25} {row['name'][:16]:<16} {row['owner'][:15]:<15} "
                f"{row['timeu'][:8]:>8} {row['state']:>1} {row['queue'][:15]:<15}\n"
            )
    return "".join(out)
