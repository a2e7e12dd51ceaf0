"""The one encoder for every value hpcjobs writes into a job's bash script.

:func:`shell_word` turns any text into **one bash word that is printable ASCII on one line**
and that bash reads back as exactly the UTF-8 bytes of the text. Because the word has no line
break, no control character and no non-ASCII character, nothing that later handles the script
line by line (``str.splitlines``, an editor, a mail gateway, a ``#`` comment filter, a locale
change) can split it or change its meaning.

Three forms, the first that fits:

* **bare**: non-empty text made only of ASCII letters, digits and ``@%+=:,./-_`` (the set
  :func:`shlex.quote` leaves alone) is written as it is: ``adam``, ``0.1``, ``cuda/12.2``;
* **single quotes**: other printable ASCII text (``0x20``-``0x7e``) is written as
  :func:`shlex.quote` writes it: ``'a b'``, ``'$(x)'``, ``'it'"'"'s'``;
* **ANSI-C quotes** ``$'...'``: anything else. Inside, printable ASCII other than ``\\`` and
  ``'`` stands for itself, ``\\\\`` is a backslash, ``\\'`` a single quote, ``\\n`` a newline,
  ``\\t`` a tab, and ``\\xHH`` (always two lowercase hex digits) is the byte ``HH``. Every other
  character (controls, DEL, every non-ASCII character) is written as the ``\\xHH`` escapes of
  its UTF-8 bytes.

Decoder semantics, from the GNU Bash Reference Manual, section "ANSI-C Quoting": a word
``$'string'`` expands to ``string`` with backslash escapes replaced, the result then treated as if
single-quoted; ``\\\\``, ``\\'``, ``\\n`` and ``\\t`` are backslash, single quote, newline and tab,
and ``\\xHH`` is "the eight-bit character whose value is the hexadecimal value HH (one or two hex
digits)". The escape yields that byte whatever the locale, so a value decodes to the same bytes
under ``LANG=C`` and ``LANG=C.UTF-8``. ``\\uHHHH`` is deliberately not used: bash converts it
through the current locale and prints it literally (or as ``?``) when the locale cannot represent
it. Two hex digits are always written, so a following literal hex digit is never absorbed.

NUL cannot be encoded (a bash variable or argument cannot hold it): :func:`shell_word` raises
:class:`UnencodableValueError`, and values are refused with a configuration error where they enter hpcjobs
(experiment ``environment``/``params``, sweep values, ``--set``, sweep arguments).
"""

from __future__ import annotations

import re

__all__ = ["UnencodableValueError", "decode_ansi_c", "shell_word", "shell_word_path"]


class UnencodableValueError(ValueError):
    """A value no bash word can hold: it contains NUL, or is not valid Unicode."""

_BARE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
_PRINTABLE_ASCII = re.compile(r"[ -~]*")
_SHORT_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t"}


def _ansi_c_char(char: str) -> str:
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    if " " <= char <= "~":
        return char
    return "".join(f"\\x{b:02x}" for b in char.encode("utf-8"))


def shell_word(value: object) -> str:
    """``str(value)`` as one bash word, printable ASCII on one line, that bash reads back verbatim.

    Args:
        value: Any value; it is converted with ``str``.

    Returns:
        A bare word, a single-quoted word, or an ANSI-C quoted ``$'...'`` word (see the module
        documentation for which and how bash decodes it).

    Raises:
        UnencodableValueError: The text contains NUL, or an unpaired surrogate (not encodable as UTF-8).
    """
    text = str(value)
    if _BARE.fullmatch(text):
        return text
    if _PRINTABLE_ASCII.fullmatch(text):
        return "'" + text.replace("'", "'\"'\"'") + "'"
    if "\x00" in text:
        raise UnencodableValueError(f"value {text!r} contains a NUL character, which no bash word can hold")
    try:
        return "$'" + "".join(map(_ansi_c_char, text)) + "'"
    except UnicodeEncodeError:
        raise UnencodableValueError(f"value {text!r} is not valid Unicode text (unpaired surrogate)") from None


def shell_word_path(value: object) -> str:
    """A path as one bash word, keeping a leading ``~/`` (or a lone ``~``) meaning the home directory.

    Raises:
        UnencodableValueError: As :func:`shell_word`.
    """
    text = str(value)
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        return '"$HOME"/' + shell_word(text[2:])
    return shell_word(text)


_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|.)", re.S)
_DECODED = {"\\": b"\\", "'": b"'", "n": b"\n", "t": b"\t", '"': b'"', "?": b"?", "a": b"\a", "b": b"\b",
            "e": b"\x1b", "E": b"\x1b", "f": b"\f", "r": b"\r", "v": b"\v"}


def decode_ansi_c(word: str) -> bytes:
    """The bytes bash gives a word :func:`shell_word` wrote (a reference decoder, for tests and tools).

    Only the three forms :func:`shell_word` writes are understood.

    Raises:
        ValueError: ``word`` is not in one of those forms.
    """
    if word.startswith("$'") and word.endswith("'") and len(word) >= 3:
        def one(m: re.Match[str]) -> str:
            esc = m[1]
            raw = bytes([int(esc[1:], 16)]) if esc[0] == "x" else _DECODED.get(esc)
            if raw is None:
                raise ValueError(f"escape \\{esc} is not one shell_word writes")
            return raw.decode("latin-1")
        return _ESCAPE.sub(one, word[2:-1]).encode("latin-1")
    if _BARE.fullmatch(word):
        return word.encode("ascii")
    if word.startswith("'") and word.endswith("'") and len(word) >= 2:
        return word[1:-1].replace("'\"'\"'", "'").encode("ascii")
    raise ValueError(f"{word!r} is not a word shell_word writes")
