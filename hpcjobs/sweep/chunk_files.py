"""Each chunk's ``.ids`` and ``.env`` files, written in one pass over the sweep's points.

``chunks/<n>.ids`` lists the point ids of chunk ``n``, array index ``i`` on line ``i + 1``;
``chunks/<n>.env`` is a bash ``case`` on the array index that exports the parameters of that index's
point (:func:`env_file_text`), which the array task sources. The points are streamed from the
expansion (:meth:`hpcjobs.sweep.points.stream.SweepPoints.env_arms`): only the chunks not yet complete are
held, and with points in order that is one chunk at a time, so writing the files of a million
points needs no more memory than those of one chunk (plus the map from point id to chunk).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcjobs.errors import LedgerError
from hpcjobs.output import atomic_write_text
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.sweep.chunks import Chunk

__all__ = ["env_file_text", "write_chunk_files"]


def env_file_text(sweep_id: str, arms: Iterable[Sequence[str]]) -> str:
    """The text of a chunk's ``.env`` file: one ``case`` arm per array index, from each point's export lines.

    Args:
        sweep_id: The sweep (named in the header comment).
        arms: Each array index's lines, in index order (:func:`hpcjobs.sweep.points.point.point_env_lines`:
            single lines of printable ASCII, so any value arrives as exactly its bytes).
    """
    return _file_text(sweep_id, ("".join(f"    {ln}\n" for ln in lines) for lines in arms))


def _file_text(sweep_id: str, bodies: Iterable[str]) -> str:
    """:func:`env_file_text` from each arm's body (its lines indented, each ended by a newline)."""
    parts = [f"# hpcjobs sweep {shell_word(sweep_id)}: parameters by array index (generated; do not edit)\n"
             'case "$HPCJOBS_ARRAY_INDEX" in\n']
    for index, body in enumerate(bodies):
        parts.append(f"{index})\n{body}    ;;\n")
    parts.append('*) echo "hpcjobs: no sweep point for array index $HPCJOBS_ARRAY_INDEX" >&2; exit 2;;\nesac\n')
    return "".join(parts)


def _bodies(points: Any, wanted: Mapping[str, int]) -> Iterator[tuple[str, str]]:
    """``(point_id, arm body)`` of the wanted points, in expansion order."""
    if hasattr(points, "env_bodies"):
        yield from points.env_bodies(wanted)
        return
    from hpcjobs.sweep.points.point import point_env_lines

    for p in points:
        if p.point_id in wanted:
            yield p.point_id, "".join(f"    {ln}\n" for ln in point_env_lines(p))


def write_chunk_files(prepared: Any, chunks: Sequence[Chunk]) -> None:
    """Write ``chunks/<n>.ids`` and ``chunks/<n>.env`` of every chunk (each atomically) in one pass.

    Args:
        prepared: The sweep (:class:`hpcjobs.sweep.prepare.PreparedSweep`: ``sweep_id``, ``folder``, ``points``).
        chunks: The chunks about to be submitted.

    Raises:
        ConfigError: A value that cannot reach a job (NUL).
        LedgerError: A chunk's point is not among the sweep's points as expanded now.
    """
    if not chunks:
        return
    starts: list[int] = []
    wanted: dict[str, int] = {}
    at = 0
    for chunk in chunks:
        starts.append(at)
        for pid in chunk.point_ids:
            wanted[pid] = at
            at += 1
    open_arms: dict[int, list[str | None]] = {}
    left = [c.size for c in chunks]
    folder = Path(prepared.folder) / "chunks"
    for pid, body in _bodies(prepared.points, wanted):
        slot = wanted[pid]
        c = bisect.bisect_right(starts, slot) - 1
        arms = open_arms.get(c)
        if arms is None:
            arms = open_arms[c] = [None] * chunks[c].size
        arms[slot - starts[c]] = body
        left[c] -= 1
        if left[c] == 0:
            _write(folder, prepared.sweep_id, chunks[c], arms)
            del open_arms[c]
    missing = [c for c, n in enumerate(left) if n]
    if missing:
        chunk = chunks[missing[0]]
        arms = open_arms.get(missing[0], [None] * chunk.size)
        pid = next(p for p, a in zip(chunk.point_ids, arms, strict=True) if a is None)
        raise LedgerError(f"point {pid} of chunk {chunk.number} is not among the sweep's points as expanded now "
                          "(did the experiment change? plan it again with --force)")


def _write(folder: Path, sweep_id: str, chunk: Chunk, arms: Sequence[str | None]) -> None:
    atomic_write_text(folder / f"{chunk.number}.env", _file_text(sweep_id, (a or "" for a in arms)),
                      below=folder.parent)
    atomic_write_text(folder / f"{chunk.number}.ids", "".join(f"{p}\n" for p in chunk.point_ids),
                      below=folder.parent)
