"""Helpers the pure parsers of every scheduler folder share (``<name>/formats.py``).

The parsers turn recorded text into plain Python values; nothing runs a command and nothing
imports pandas, so status polling on a login node stays light.
"""

from __future__ import annotations

from collections.abc import Iterator


def lines_from_end(text: str) -> Iterator[str]:
    """The non-blank lines of ``text`` (as :meth:`str.splitlines` cuts them), stripped, last first.

    Lazy: the answer of a submit command is on its last line, and finding it must not split a
    huge output into millions of strings.
    """
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        for line in reversed(text[start:end].splitlines()):
            if line.strip():
                yield line.strip()
        end = start - 1
