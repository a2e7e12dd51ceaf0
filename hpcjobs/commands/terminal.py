"""The rich console and table every command prints with: values shown with their control characters escaped.

:class:`TerminalConsole` passes each text it prints through :func:`hpcjobs.errors.terminal_text`
(keeping the newlines of the message's layout) and :class:`TerminalTable` each title, header and
cell (keeping nothing: a cell is one line), before rich reads its markup. A value holding an escape
sequence, a carriage return or a bidi override (a parameter, a metric, a job name of a saved sacct
file) is then shown as ``\\x1b``, ``\\x0d``, ``\\u202e`` instead of acting on the terminal. Rich itself
drops a few controls (bell, backspace, carriage return) and keeps the others, so it cannot be left
to it. Machine output (``--json``, ``--csv``) is not printed through these and keeps the raw values.

Imported by :func:`hpcjobs.cli.console` and :func:`hpcjobs.cli.table` when a command prints, so
``hpcjobs --help`` does not import rich.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table

from hpcjobs.errors import terminal_text


def _shown(value: Any, keep: str) -> Any:
    """A text escaped for the terminal; anything else (a table, a rich ``Text``) as it is."""
    return terminal_text(value, keep=keep) if isinstance(value, str) else value


class TerminalConsole(Console):
    """A rich console whose printed texts have their control and format characters escaped (newlines kept)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """:meth:`rich.console.Console.print` of the objects, texts escaped by :func:`~hpcjobs.errors.terminal_text`."""
        super().print(*(_shown(o, "\n") for o in objects), **kwargs)


class TerminalTable(Table):
    """A rich table whose title, caption, headers and cells have their control and format characters escaped."""

    def __init__(self, *headers: Any, title: Any = None, caption: Any = None, **kwargs: Any) -> None:
        super().__init__(*headers, title=_shown(title, ""), caption=_shown(caption, ""), **kwargs)

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:
        """:meth:`rich.table.Table.add_column` with the header escaped."""
        super().add_column(_shown(header, ""), *args, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        """:meth:`rich.table.Table.add_row` with each text cell escaped (a cell is one line: newlines too)."""
        super().add_row(*(_shown(r, "") for r in renderables), **kwargs)


def stacked(*renderables: Any) -> Group:
    """Renderables drawn one under the other (a live view's parts); texts among them escaped as a console's are."""
    return Group(*(_shown(r, "\n") for r in renderables))
