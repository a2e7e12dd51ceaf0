"""Memory sizes and wall times: parsing what people write, formatting what schedulers read.

Memory is held as a whole number of bytes (binary units: ``1G`` = 1024³ bytes,
as Slurm and PBS both read them). Wall time is held as whole seconds.
"""

from __future__ import annotations

import re
from decimal import Decimal

_MEM_RE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KMGTP]?)(?:I?B)?\s*$", re.IGNORECASE)
_MEM_FACTORS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}

MEMORY_EXAMPLES = "a size with a unit, such as 512M, 16G, 16GB or 1.5T"
WALLTIME_EXAMPLES = "HH:MM:SS, D-HH:MM:SS, MM:SS, or a number with a unit such as 90m, 2h, 1d"

#: Largest memory size accepted: 1 EiB (1024P), far above any node, far below what overflows.
MAX_MEMORY_BYTES = 1024**6
#: Longest wall time accepted: 100 years of 365 days (sites mean "unlimited" long before that).
MAX_WALLTIME_SECONDS = 100 * 365 * 86400
#: Most digits in one number of a size or a time (more is a typo or an attack, never a request).
_MAX_DIGITS = 20


def _shown(text: object) -> str:
    """``repr(text)``, cut short when very long (a hostile value must not flood the message)."""
    r = repr(text)
    return r if len(r) <= 40 else f"{r[:30]}...({len(r)} characters)"


def _check_digits(number: str, text: object) -> None:
    digits = max((len(run) for run in re.findall(r"\d+", number)), default=0)
    if digits > _MAX_DIGITS:
        raise ValueError(f"a number with {digits} digits in {_shown(text)} is over the limit of {_MAX_DIGITS}")


def parse_memory(text: str | int) -> int:
    """Parse a memory size into bytes.

    Accepts ``512M``, ``16G``, ``16GB``, ``16GiB``, ``1.5T``, ``100B`` and plain
    byte counts given as integers (or ``123B``). A bare number in a string is
    refused: it is too often meant as megabytes or gigabytes.

    Raises:
        ValueError: The text is not a size with a unit.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected {MEMORY_EXAMPLES}, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"memory cannot be negative: {_shown(text)}")
        nbytes = text
    else:
        m = _MEM_RE.match(str(text))
        raw_has_unit = bool(re.search(r"[A-Za-z]", str(text)))
        if not m or not raw_has_unit:
            raise ValueError(f"expected {MEMORY_EXAMPLES}, got {_shown(text)}")
        _check_digits(m["num"], text)
        nbytes = round(Decimal(m["num"]) * _MEM_FACTORS[m["unit"].upper()])
    if nbytes > MAX_MEMORY_BYTES:
        raise ValueError(f"memory {_shown(text)} is over the maximum of 1024P (1 EiB)")
    return nbytes


def _scaled(nbytes: int, units: tuple[tuple[str, int], ...]) -> str:
    """Largest unit that divides ``nbytes`` exactly; falls back to the smallest unit, rounded up."""
    for suffix, factor in units:
        if nbytes % factor == 0 and nbytes >= factor:
            return f"{nbytes // factor}{suffix}"
    suffix, factor = units[-1]
    return f"{-(-nbytes // factor)}{suffix}"


def format_memory_slurm(nbytes: int) -> str:
    """Slurm ``--mem`` form: ``16G``, ``1536M`` (rounded up to whole MiB; Slurm's smallest unit)."""
    return _scaled(nbytes, (("T", 1024**4), ("G", 1024**3), ("M", 1024**2)))


def format_memory_pbs(nbytes: int) -> str:
    """PBS ``mem=`` form: ``16gb``, ``1536mb``, ``512kb`` (rounded up to whole KiB)."""
    return _scaled(nbytes, (("tb", 1024**4), ("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)))


def format_memory_human(nbytes: int) -> str:
    """Short form for people: ``16G``, ``1.5T``, ``512M``."""
    for suffix, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= factor:
            value = nbytes / factor
            return f"{value:.0f}{suffix}" if value == int(value) else f"{value:.1f}{suffix}"
    return f"{nbytes}B"


_CLOCK_RE = re.compile(r"^(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d{1,2}))?(?::(?P<c>\d{1,2}))?$")
_UNIT_RE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>s|sec|m|min|h|hr|hours?|d|days?)$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
                 "d": 86400, "day": 86400, "days": 86400}


def parse_walltime(text: str | int) -> int:
    """Parse a wall time into seconds.

    Accepts ``HH:MM:SS`` (hours may exceed 24), ``D-HH:MM:SS``, ``D-HH:MM``,
    ``D-HH``, ``MM:SS``, a unit form (``90m``, ``2h``, ``1.5d``, ``45s``) and an
    integer number of minutes (Slurm's convention for a bare number).

    Raises:
        ValueError: The text is not a wall time, or it is zero.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected {WALLTIME_EXAMPLES}, got {text!r}")
    if isinstance(text, int):
        seconds = text * 60
    else:
        s = str(text).strip()
        unit = _UNIT_RE.match(s)
        clock = _CLOCK_RE.match(s)
        if unit or clock:
            _check_digits(s, text)
        if unit:
            seconds = round(Decimal(unit["num"]) * _UNIT_SECONDS[unit["unit"].lower()])
        elif clock:
            days = int(clock["days"] or 0)
            parts = [int(p) for p in (clock["a"], clock["b"], clock["c"]) if p is not None]
            if clock["days"] is not None:
                # Slurm: D-HH, D-HH:MM, D-HH:MM:SS
                parts += [0] * (3 - len(parts))
                h, m, sec = parts
            elif len(parts) == 3:
                h, m, sec = parts
            elif len(parts) == 2:
                h, m, sec = 0, parts[0], parts[1]
            else:
                h, m, sec = 0, parts[0], 0
            if (len(parts) > 1 and m >= 60 and (clock["days"] is not None or len(parts) == 3)) or sec >= 60:
                raise ValueError(f"minutes and seconds must be below 60 in {s!r}")
            seconds = ((days * 24 + h) * 60 + m) * 60 + sec
        else:
            raise ValueError(f"expected {WALLTIME_EXAMPLES}, got {_shown(text)}")
    if seconds <= 0:
        raise ValueError(f"wall time must be positive, got {_shown(text)}")
    if seconds > MAX_WALLTIME_SECONDS:
        raise ValueError(f"wall time {_shown(text)} is over the maximum of {MAX_WALLTIME_SECONDS // 86400} days")
    return seconds


def format_walltime_slurm(seconds: int) -> str:
    """Slurm ``--time`` form: ``HH:MM:SS`` under a day, ``D-HH:MM:SS`` from one day on."""
    days, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if days:
        return f"{days}-{h:02d}:{m:02d}:{s:02d}"
    return f"{h:02d}:{m:02d}:{s:02d}"


def format_walltime_pbs(seconds: int) -> str:
    """PBS ``walltime=`` form: ``HH:MM:SS`` with hours past 24 (``72:00:00``)."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


def format_duration_short(seconds: float | None) -> str:
    """``25s``, ``12m``, ``1h05m``, ``2d03h`` (``-`` for none); a sign for a negative difference."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    s = round(abs(seconds))
    if s < 60:
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m"
    if s < 86400:
        return f"{sign}{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{sign}{s // 86400}d{s % 86400 // 3600:02d}h"


def is_ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the digits 0-9, and nothing else.

    ``str.isdigit`` is also true of superscripts and other scripts' digits (``"²"``, ``"٣"``), which
    ``int`` then refuses or reads as another number: every number hpcjobs reads from a scheduler, a
    file or the environment is checked with this instead.
    """
    return text.isascii() and text.isdigit()
