"""The spellings of ``sacct`` text: delimiter, trailing delimiter, header line, and which fields are where.

``sacct`` prints its text in four spellings (sacct(1)): ``--parsable`` (``-p``) ends every line
with the delimiter, ``--parsable2`` (``-P``) does not; ``--delimiter=X`` replaces the default
``|``; ``--noheader`` drops the line of field names. Site scripts save all of them.
:func:`prepare` turns any of them into the one spelling the readers take (``--parsable2``,
``|``), and settles the field names: from the header line when there is one, else from the given
list, but only after checking the values against each field's type (:func:`check_fields`), so that
text saved with another ``--format`` order is refused instead of read with the wrong columns.

Lines whose number of fields differs from the rest (a job name or comment holding the delimiter
or a newline) are skipped and listed (:mod:`hpcjobs.skipped`), never dropped silently.

``sstat`` (live usage of running steps) prints the same kind of text with other fields; it is
recognised (:func:`is_sstat_header`, :data:`SSTAT_DEFAULT_FIELDS`) and named as such.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcjobs.errors import SchedulerOutputError
from hpcjobs.skipped import Skipped

#: Bytes that may stand in for a delimiter when the text holds ``|`` in its values (never in sacct text).
_STAND_INS = (b"\x1f", b"\x1e", b"\x1d", b"\x1c")
#: Lines checked against the field types, from the start and spread over the rest.
_CHECKED_LINES = 400

#: Fields ``sstat --parsable2`` prints without ``--format`` (Slurm 22.05, captured on a real cluster).
SSTAT_DEFAULT_FIELDS: tuple[str, ...] = (
    "JobID", "MaxVMSize", "MaxVMSizeNode", "MaxVMSizeTask", "AveVMSize", "MaxRSS", "MaxRSSNode", "MaxRSSTask",
    "AveRSS", "MaxPages", "MaxPagesNode", "MaxPagesTask", "AvePages", "MinCPU", "MinCPUNode", "MinCPUTask",
    "AveCPU", "NTasks", "AveCPUFreq", "ReqCPUFreqMin", "ReqCPUFreqMax", "ReqCPUFreqGov", "ConsumedEnergy",
    "MaxDiskRead", "MaxDiskReadNode", "MaxDiskReadTask", "AveDiskRead", "MaxDiskWrite", "MaxDiskWriteNode",
    "MaxDiskWriteTask", "AveDiskWrite", "TRESUsageInAve", "TRESUsageInMax", "TRESUsageInMaxNode",
    "TRESUsageInMaxTask", "TRESUsageInMin", "TRESUsageInMinNode", "TRESUsageInMinTask", "TRESUsageInTot",
    "TRESUsageOutAve", "TRESUsageOutMax", "TRESUsageOutMaxNode", "TRESUsageOutMaxTask", "TRESUsageOutMin",
    "TRESUsageOutMinNode", "TRESUsageOutMinTask", "TRESUsageOutTot",
)
#: Fields sacct has and sstat does not (sstat(1) --helpformat): a header without any of them is sstat's.
_SACCT_ONLY = frozenset({"state", "submit", "start", "end", "elapsed", "elapsedraw", "jobname", "user", "account",
                         "partition", "exitcode", "timelimit", "alloccpus", "nnodes", "jobidraw", "reqmem"})

_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?|\d{1,12}|Unknown|None"
_DURATION = r"(?:\d+-)?(?:\d+:)?\d+:\d+(?:\.\d+)?|UNLIMITED|Partition_Limit|INVALID"
_COUNT = r"\d+"
_MEMORY = r"\d+(?:\.\d+)?[KMGTPE]?[cn]?\??"
_TRES = r"[\w/:.\-]+=[^,=]*(?:,[\w/:.\-]+=[^,=]*)*"
#: What each typed field holds (sacct(1), as printed with ``SLURM_TIME_FORMAT=standard`` or ``%s``);
#: fields not here (names, partitions, node lists, comments) are free text and not checked.
FIELD_TYPES: dict[str, tuple[str, str]] = {
    "jobid": (r"\d+(?:_(?:\d+|\[[\d,%\-]+\]))?(?:\+\d+)?(?:\.[\w\-]+)?", "a job id"),
    "jobidraw": (r"\d+(?:\+\d+)?(?:\.[\w\-]+)?", "a job id"),
    "state": (r"[A-Z][A-Z_]*(?: by \d+)?\+?", "a Slurm state"),
    "exitcode": (r"\d+:\d+", "an exit code N:S"),
    "derivedexitcode": (r"\d+:\d+", "an exit code N:S"),
    **{f: (_TIME, "a time") for f in ("submit", "eligible", "start", "end")},
    **{f: (_DURATION, "a duration") for f in ("elapsed", "timelimit", "totalcpu", "usercpu", "systemcpu",
                                              "cputime", "avecpu", "mincpu")},
    **{f: (_COUNT, "a count") for f in ("elapsedraw", "nnodes", "alloccpus", "reqcpus", "ncpus", "ntasks",
                                        "allocnodes", "cputimeraw", "timelimitraw", "uid", "gid", "priority")},
    **{f: (_MEMORY, "a memory size") for f in ("reqmem", "maxrss", "averss", "maxvmsize", "avevmsize")},
    **{f: (_TRES, "a TRES list") for f in ("alloctres", "reqtres", "tresusageinave", "tresusageinmax",
                                           "tresusageintot", "tresusageinmin")},
}
_COMPILED = {k: re.compile(rf"(?:{p})\Z") for k, (p, _) in FIELD_TYPES.items()}


class SstatOutputError(SchedulerOutputError):
    """The text is ``sstat`` output (usage of running steps), given where ``sacct`` text is read."""


@dataclass
class Prepared:
    """sacct text in the readers' spelling, and what was learnt on the way.

    Attributes:
        source: ``--parsable2`` text with ``sep`` between fields (bytes), or the untouched file.
        names: Lower-cased field names, in order.
        header: The first line is a header line (to skip).
        sep: The delimiter the text now has (``|`` unless the values hold ``|``).
        skipped: Lines left out, with why.
    """

    source: bytes | os.PathLike[str]
    names: list[str]
    header: bool
    sep: str = "|"
    skipped: list[Skipped] = field(default_factory=list)


def as_source(source: str | bytes | os.PathLike[str]) -> str | bytes | os.PathLike[str]:
    """A ``str`` without a newline that names an existing file is that file; anything else is kept."""
    if isinstance(source, str) and "\n" not in source and source.strip() and len(source) < 4096:
        try:
            if Path(source).is_file():
                return Path(source)
        except (OSError, ValueError):
            pass
    return source


def is_sstat_header(names: Sequence[str]) -> bool:
    """Whether a header line's fields are sstat's (no field only sacct has, some usage field)."""
    low = {n.strip().lower() for n in names}
    return bool(low) and "jobid" in low and not (low & _SACCT_ONLY) and bool(
        low & {"maxrss", "avecpu", "ntasks", "mincpu", "maxvmsize", "averss", "tresusageinave", "tresusageintot"})


def sstat_message(names: Sequence[str] | None = None) -> str:
    """The refusal for sstat text given where sacct text is read."""
    shown = f" (fields {','.join(names[:6])}{',…' if len(names) > 6 else ''})" if names else ""
    return (f"this is sstat output{shown}: live usage of running job steps, not sacct accounting; save "
            "`sacct --parsable2` output (with its header line) for a report")


def first_line(source: bytes | os.PathLike[str]) -> bytes:
    """The first line of the text or file, without its end."""
    if isinstance(source, bytes):
        nl = source.find(b"\n")
        return (source if nl < 0 else source[:nl]).rstrip(b"\r")
    with open(source, "rb") as fh:
        return fh.readline().rstrip(b"\r\n")


def prepare(source: str | bytes | os.PathLike[str], fields: Sequence[str] | None, delimiter: str = "|") -> Prepared:
    """Find the spelling of sacct text and bring it to ``--parsable2`` with the names of its fields.

    Args:
        source: The text, or a path (a ``str`` path is taken when it names a file: :func:`as_source`).
        fields: The ``--format`` fields in order, or ``None`` to take them from the header line.
        delimiter: What separates the fields (``sacct --delimiter``; any non-empty text without a newline).

    Returns:
        The text to read, its field names and whether to skip its first line.

    Raises:
        SchedulerOutputError: The delimiter is empty, the text has no header and no fields were given, it is
            sstat output, its values do not fit the fields' types, or its lines do not have the fields' count.
    """
    if not delimiter or "\n" in delimiter or "\r" in delimiter:
        raise SchedulerOutputError(f"the sacct delimiter must be one or more characters, not {delimiter!r}")
    src = as_source(source)
    data_or_path: bytes | os.PathLike[str] = src.encode() if isinstance(src, str) else src
    d = delimiter.encode()
    head = first_line(data_or_path)
    cells = head.decode(errors="replace").split(delimiter)
    header = cells[0].strip().lower() == "jobid"
    trailing = len(cells) > 1 and cells[-1] == ""
    if header:
        names_here = [c.strip().lower() for c in (cells[:-1] if trailing else cells)]
        if is_sstat_header(names_here):
            raise SstatOutputError(sstat_message([c.strip() for c in cells if c.strip()]))
        names = [f.lower() for f in fields] if fields is not None else names_here
    elif fields is None:
        raise SchedulerOutputError("no field list given and the text has no sacct header line")
    else:
        names = [f.lower() for f in fields]
        trailing = trailing and len(cells) == len(names) + 1
        plain = cells[:-1] if cells and cells[-1] == "" and len(cells) == len(SSTAT_DEFAULT_FIELDS) + 1 else cells
        if len(plain) == len(SSTAT_DEFAULT_FIELDS) != len(names) and _fits_sstat(plain):
            raise SstatOutputError(sstat_message())
    if d == b"|" and not trailing:
        return Prepared(data_or_path, names, header)
    data = data_or_path if isinstance(data_or_path, bytes) else Path(data_or_path).read_bytes()
    return _respelled(data, d, trailing, names, header)


def _respelled(data: bytes, d: bytes, trailing: bool, names: list[str], header: bool) -> Prepared:
    """``data`` with its trailing delimiters removed and ``d`` replaced by ``|`` (or a stand-in byte)."""
    if trailing:
        data = data.replace(d + b"\r\n", b"\n").replace(d + b"\n", b"\n")
        if data.endswith(d):
            data = data[: -len(d)]
    sep = "|"
    if d != b"|":
        if b"|" in data:  # values hold |: keep a one-byte delimiter, else a byte the text does not have
            stand_in = d if len(d) == 1 else next((b for b in _STAND_INS if b not in data), None)
            if stand_in is None:
                raise SchedulerOutputError("the sacct text holds | and every stand-in byte; save it with "
                                           "--parsable2 and the default delimiter")
            sep = stand_in.decode()
            if stand_in != d:
                data = data.replace(d, stand_in)
        else:
            data = data.replace(d, b"|")
    return Prepared(data, names, header, sep)


def split_bad_lines(data: bytes, n: int, sep: str, header: bool) -> tuple[bytes, list[Skipped]]:
    """Drop the lines that do not have ``n`` fields, listing them (line numbers of ``data``).

    Raises:
        SchedulerOutputError: No line, or not the first data line, has ``n`` fields (the text is not
            in these fields at all).
    """
    lines = data.split(b"\n")
    s = sep.encode()
    keep: list[bytes] = []
    skipped: list[Skipped] = []
    start = 1 if header else 0
    if header:
        keep.append(lines[0])
    for i, line in enumerate(lines[start:], start=start + 1):
        if not line.strip(b"\r"):
            continue
        count = line.count(s) + 1
        if count == n:
            keep.append(line)
            continue
        if not skipped and len(keep) == start:
            raise SchedulerOutputError(
                f"sacct output does not have the {n} fields asked for: line {i} has {count} (the text was saved "
                "with another --format list or --delimiter; it cannot be read when its delimiter also appears "
                "inside values, as a comma does in TRES lists)")
        plural = "s" if count != 1 else ""
        skipped.append(Skipped(i, f"{count} field{plural}, not {n}", line.decode(errors="replace")))
    if len(keep) == start:
        raise SchedulerOutputError(f"sacct output does not have the {n} fields asked for: no line has them")
    return b"\n".join(keep) + b"\n", skipped


def sample_lines(data: bytes | os.PathLike[str], header: bool) -> list[tuple[int, str]]:
    """Up to :data:`_CHECKED_LINES` data lines (1-based numbers): the first ones and some spread over the rest."""
    if isinstance(data, bytes):
        text = data[: 1 << 20].decode(errors="replace")
        total = len(data)
    else:
        with open(data, "rb") as fh:
            text = fh.read(1 << 20).decode(errors="replace")
        total = os.path.getsize(data)
    lines = text.split("\n")
    if len(text.encode()) < total:
        lines = lines[:-1]  # cut in the middle
    start = 1 if header else 0
    picked = [(i + 1, ln.rstrip("\r")) for i, ln in enumerate(lines) if i >= start and ln.strip()]
    if len(picked) <= _CHECKED_LINES:
        return picked
    step = len(picked) // (_CHECKED_LINES // 2)
    return picked[: _CHECKED_LINES // 2] + picked[_CHECKED_LINES // 2 :: step]


def check_fields(lines: list[tuple[int, str]], names: Sequence[str], sep: str, *, given: bool,
                 shown: Sequence[str] | None = None) -> None:
    """Check headerless text's values against the types of the fields they are taken for.

    Args:
        lines: Numbered lines to check (:func:`sample_lines`).
        names: Lower-cased field names in order.
        sep: The delimiter.
        given: The caller gave the field list (else it is hpcjobs' default).
        shown: The field names as the caller spelled them, for the message (default ``names``).

    Raises:
        SchedulerOutputError: A value does not have its field's type: the message names the line, the field,
            the value and the field list to pass instead.
    """
    checks = [(i, n, _COMPILED[n]) for i, n in enumerate(names) if n in _COMPILED]
    for number, line in lines:
        cells = line.split(sep)
        if len(cells) != len(names):
            continue  # counted and skipped by the reader
        for i, name, pattern in checks:
            value = cells[i]
            if value and not pattern.match(value):
                if len(cells) == len(SSTAT_DEFAULT_FIELDS) and _fits_sstat(cells):
                    raise SstatOutputError(sstat_message())
                what = FIELD_TYPES[name][1]
                how = ("the field list given is not the one the text was saved with" if given else
                       "the text has no header line and is not in hpcjobs' default field order; pass the "
                       "--format list it was saved with (--sacct-fields F1,F2,... or fields=[...])")
                raise SchedulerOutputError(
                    f"line {number}: field {i + 1} holds {value[:40]!r}, which is not {what}, so it is not "
                    f"{(shown or names)[i]}: the columns are not {','.join(shown or names)}; {how}, or save the "
                    "text with its header line (sacct without --noheader)")


def _fits_sstat(cells: list[str]) -> bool:
    names = [f.lower() for f in SSTAT_DEFAULT_FIELDS]
    return all(not v or n not in _COMPILED or _COMPILED[n].match(v) for n, v in zip(names, cells, strict=True))


_ID_START = re.compile(r"\d+(?:_(?:\d+|\[[\d,%\-]+\]))?(?:\+\d+)?(?:\.[\w\-]+)?")


def guess_delimiter(line: str) -> str | None:
    """The delimiter of a line of sacct (or sstat) text, header or not; ``None`` when it is not such a line.

    A header line starts with ``JobID`` and the delimiter is what follows up to the next field name; a data
    line starts with a job id and the delimiter is the character after it.
    """
    if line[:5].lower() == "jobid":
        rest = line[5:]
        m = re.match(r"[^A-Za-z0-9_]+", rest)
        if m and rest[m.end():m.end() + 1].isalpha():
            return m.group()
        return None
    m = _ID_START.match(line)
    if not m or m.end() >= len(line):
        return None
    ch = line[m.end()]
    return ch if not (ch.isalnum() or ch in "_.+[]-:= \r") else None
