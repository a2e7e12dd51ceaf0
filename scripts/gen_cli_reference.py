#!/usr/bin/env python3
"""Write docs/reference/cli.md from the click command tree of ``hpcjobs.cli:main``.

    python scripts/gen_cli_reference.py           # rewrite docs/reference/cli.md
    python scripts/gen_cli_reference.py --check   # exit 1 when the committed file is stale

Each command gets its usage line, its help text and a table of its options (type, choices or range,
default). The output depends only on the commands' declarations: commands are sorted by name, options
keep the order they are declared in, and nothing of the terminal (width, colour) is read.
``tests/docs/test_cli_reference.py`` fails when the committed file differs from what this prints.

Only ``hpcjobs.cli`` is imported by name; the commands living in other modules are reached through the
group's own ``get_command``, as click does when it runs them.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reference" / "cli.md"
PROG = "hpcjobs"
REGENERATE = "python scripts/gen_cli_reference.py"

#: click 8.3+ marks an option without a default with a sentinel, older versions with None
_UNSET = getattr(click.core, "UNSET", None)

_MARKDOWN_SPECIAL = re.compile(r"([\\*_<>|\[\]])")
_CODE_SPAN = re.compile(r"(`[^`]*`)")


def _escape(text: str) -> str:
    """Markdown-escape ``text`` outside its backtick code spans (which stay as written)."""
    parts = _CODE_SPAN.split(text)
    return "".join(part if part.startswith("`") and part.endswith("`") and len(part) > 1
                   else _MARKDOWN_SPECIAL.sub(r"\\\1", part) for part in parts)


def _cell(text: str) -> str:
    """One table cell: escaped, on one line."""
    return _escape(" ".join(text.split())) if text else ""


def _help_paragraphs(text: str | None) -> list[str]:
    """A command's help as paragraphs, click's ``\\b`` (no-rewrap) markers and the ``\\f`` tail removed."""
    if not text:
        return []
    text = inspect.cleandoc(text).split("\f", 1)[0]
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.splitlines() if line.strip() != "\b"]
        if not lines:
            continue
        if block.lstrip().startswith("\b"):  # kept as the author broke it: one line each
            paragraphs.append("  \n".join(_escape(line.strip()) for line in lines))
        else:
            paragraphs.append(_escape(" ".join(line.strip() for line in lines)))
    return paragraphs


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _type_text(param: click.Parameter, ctx: click.Context) -> str:
    """What a parameter takes: flag, count, choices, a range, a path, or click's type name."""
    kind = param.type
    if isinstance(param, click.Option) and param.count:
        text = "count"
    elif isinstance(param, click.Option) and param.is_flag:
        text = "flag"
    elif isinstance(kind, click.Choice):
        text = "one of " + ", ".join(f"`{choice}`" for choice in kind.choices)
    elif isinstance(kind, click.IntRange | click.FloatRange):
        base = "integer" if isinstance(kind, click.IntRange) else "number"
        low, high = kind.min, kind.max
        # an upper bound as large as count_range's stands for none
        if high is not None and high >= 10**15:
            high = None
        bounds = []
        if low is not None:
            bounds.append(f"≥ {_number(low)}" if not kind.min_open else f"> {_number(low)}")
        if high is not None:
            bounds.append(f"≤ {_number(high)}" if not kind.max_open else f"< {_number(high)}")
        text = f"{base} {', '.join(bounds)}" if bounds else base
    elif isinstance(kind, click.Path):
        what = "file" if not kind.dir_okay else "directory" if not kind.file_okay else "path"
        text = f"existing {what}" if kind.exists else what
    elif isinstance(kind, click.File):
        text = "file"
    else:
        text = kind.name
    if getattr(param, "multiple", False):
        text += ", repeatable"
    if getattr(param, "nargs", 1) == -1:
        text += ", any number"
    return text


def _default_text(param: click.Option) -> str:
    """The default as declared (nothing for an unset one, a flag that is off or a computed one)."""
    if param.show_default is False:
        return ""
    default = param.default
    if default is _UNSET:
        return ""
    if callable(default):
        return "(computed)"
    if default is None or default is False or default == () or (param.count and default == 0):
        return ""
    if param.is_flag and default is True:
        return "on"
    if isinstance(default, list | tuple):
        return ", ".join(f"`{item}`" for item in default)
    return f"`{default}`"


def _option_names(param: click.Option) -> str:
    names = ", ".join(f"`{name}`" for name in param.opts)
    if param.secondary_opts:
        names += " / " + ", ".join(f"`{name}`" for name in param.secondary_opts)
    metavar = "" if param.is_flag or param.count else param.metavar
    if metavar:
        names += f" {_escape(metavar)}"
    return names


def _usage(command: click.Command, ctx: click.Context) -> str:
    return " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])


def _subcommands(command: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    if not isinstance(command, click.Group):
        return
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            yield name, sub


def _anchor(command_path: str) -> str:
    """The heading id MkDocs gives ``## hpcjobs site list`` (its ``toc`` slugify)."""
    return re.sub(r"[\s-]+", "-", re.sub(r"[^\w\s-]", "", command_path).strip().lower())


def _section(command: click.Command, ctx: click.Context, depth: int) -> list[str]:
    lines = [f"{'#' * min(depth + 1, 6)} {ctx.command_path}", ""]
    lines += ["```text", _usage(command, ctx), "```", ""]
    for paragraph in _help_paragraphs(command.help):
        lines += [paragraph, ""]
    if command.deprecated:
        lines += ["*Deprecated.*", ""]
    arguments = [p for p in command.get_params(ctx) if isinstance(p, click.Argument)]
    if arguments:
        lines += ["| Argument | Type | Required |", "|---|---|---|"]
        for arg in arguments:
            name = arg.make_metavar(ctx) if _takes_ctx(arg.make_metavar) else arg.make_metavar()
            lines.append(f"| `{name}` | {_cell(_type_text(arg, ctx))} | {'yes' if arg.required else 'no'} |")
        lines.append("")
    options = [p for p in command.get_params(ctx)
               if isinstance(p, click.Option) and not p.hidden and "--help" not in p.opts]
    if options:
        lines += ["| Option | Type | Default | Description |", "|---|---|---|---|"]
        for opt in options:
            help_text = opt.help or ""
            extra = []
            if opt.required:
                extra.append("Required.")
            if opt.envvar:
                envvars = [opt.envvar] if isinstance(opt.envvar, str) else list(opt.envvar)
                extra.append("Environment: " + ", ".join(f"`{e}`" for e in envvars) + ".")
            description = " ".join(filter(None, [_cell(help_text), *extra]))
            lines.append(f"| {_option_names(opt)} | {_cell(_type_text(opt, ctx))} | {_default_text(opt)} "
                         f"| {description} |")
        lines.append("")
    subs = list(_subcommands(command, ctx))
    if subs:
        lines += ["| Command | What it does |", "|---|---|"]
        for name, sub in subs:
            path = f"{ctx.command_path} {name}"
            lines.append(f"| [`{name}`](#{_anchor(path)}) | {_cell(sub.get_short_help_str(limit=300))} |")
        lines.append("")
    for name, sub in subs:
        with click.Context(sub, info_name=name, parent=ctx) as sub_ctx:
            lines += _section(sub, sub_ctx, depth + 1)
    return lines


def _takes_ctx(method: object) -> bool:
    """Whether a click method takes ``ctx`` (click 8.2 added it to ``make_metavar``)."""
    try:
        return "ctx" in inspect.signature(method).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def render() -> str:
    """The whole reference page, as text."""
    from hpcjobs.cli import main

    header = [
        "# Command-line reference",
        "",
        "<!-- Generated by scripts/gen_cli_reference.py from the click commands of hpcjobs.cli:main."
        f" Do not edit: run `{REGENERATE}`. -->",
        "",
        "Every command of `hpcjobs`, as its `--help` describes it: the usage line, the help text and the",
        "options with their types and defaults. Every command also takes `-h`/`--help`. This page is",
        f"generated from the commands themselves (`{REGENERATE}`), so it always matches the installed",
        "version; the guides explain what the commands are for.",
        "",
    ]
    with click.Context(main, info_name=PROG) as ctx:
        body = _section(main, ctx, 1)
    text = "\n".join(header + body)
    return text.rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's hpcjobs, whichever one is installed
    sys.exit(main())
