"""MkDocs hooks of the manual (``hooks:`` in mkdocs.yml).

Links from a page to a file of the repository outside ``docs/`` (``../tests/slurm/README.md``,
``../examples/hello.yaml``) are not pages of the site, and MkDocs would report them as not found. Such
a link is checked here instead: when the file exists in the checkout it becomes a link to it on the
repository's web page (``repo_url`` in mkdocs.yml, when set) or, without one, the link text with the
path in code; when the file does not exist, it is a warning, which ``mkdocs build --strict`` turns into
a failure, as for a broken link between pages.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repo_links")

_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _rewrite_line(line: str, page_src: str, docs_dir: Path, root: Path, repo_url: str | None) -> str:
    spans = [(m.start(), m.end()) for m in _CODE_SPAN.finditer(line)]

    def replace(match: re.Match[str]) -> str:
        if any(start <= match.start() < end for start, end in spans):
            return match.group(0)
        target = match.group("target")
        if _SCHEME.match(target) or target.startswith(("#", "/")):
            return match.group(0)
        path, _, anchor = target.partition("#")
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(page_src), path))
        if not inside.startswith("../"):
            return match.group(0)  # a page or file of the manual: MkDocs checks it
        file = (docs_dir / posixpath.dirname(page_src) / path).resolve()
        try:
            rel = file.relative_to(root).as_posix()
        except ValueError:
            log.warning("%s links to %r, which is outside the repository", page_src, target)
            return match.group(0)
        if not file.exists():
            log.warning("%s links to %r: there is no %s in the repository", page_src, target, rel)
            return match.group(0)
        text = match.group("text")
        if repo_url:
            kind = "tree" if file.is_dir() else "blob"
            url = f"{repo_url.rstrip('/')}/{kind}/HEAD/{rel}" + (f"#{anchor}" if anchor else "")
            return f"[{text}]({url})"
        shown = text.strip("`")
        return f"`{rel}`" if shown == rel else f"{text} (`{rel}`)"

    return _LINK.sub(replace, line)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Check and rewrite the page's links to repository files outside ``docs/``."""
    docs_dir = Path(config["docs_dir"]).resolve()
    root = Path(config["config_file_path"]).resolve().parent
    repo_url = config.get("repo_url")
    out, fence = [], None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line.lstrip())
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None:
            line = _rewrite_line(line, page.file.src_uri, docs_dir, root, repo_url)
        out.append(line)
    return "\n".join(out)
