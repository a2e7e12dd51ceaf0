"""A report table as the page's JSON: display text, numeric sort keys, and links to a sweep's logs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Rows a table may bring into the page; a longer one (``--jobs`` of a big period) keeps its first rows,
#: in the table's order, and says so (``--csv`` prints every row).
MAX_ROWS = 20_000


def _numeric(series: pd.Series) -> bool:
    return (pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)) or \
        pd.api.types.is_timedelta64_dtype(series) or pd.api.types.is_datetime64_any_dtype(series)


def _keys(series: pd.Series) -> list[float | None]:
    """Sort keys of a numeric, duration or time column (seconds), ``None`` where missing."""
    if pd.api.types.is_timedelta64_dtype(series):
        values = series.dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
    elif pd.api.types.is_datetime64_any_dtype(series):
        from hpcjobs.accounting.reports.page.charts import epoch_seconds

        values = epoch_seconds(series)
    else:
        values = pd.to_numeric(series, errors="coerce").astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    return [None if math.isnan(v) or math.isinf(v) else round(float(v), 6) for v in values]


def table_spec(name: str, heading: str, df: pd.DataFrame, *, log_folder: Path | None = None) -> dict[str, Any]:
    """``df`` as the page draws it: every row up to :data:`MAX_ROWS`, text as the terminal shows it.

    Args:
        name: The table's name (``data-table`` in the page).
        heading: Its heading.
        df: The table.
        log_folder: For a sweep's points table (``point_id`` column): the sweep folder on this machine;
            the rows get ``stdout``/``stderr`` links to each point's log files that exist there.
    """
    from hpcjobs.accounting.reports.html import SHORT_NAMES, format_cell

    shown = df.head(MAX_ROWS)
    numeric = [_numeric(shown[c]) for c in shown.columns]
    columns = [{"name": str(c), "label": SHORT_NAMES.get(str(c), str(c)), "numeric": n}
               for c, n in zip(shown.columns, numeric, strict=True)]
    cells = [[format_cell(v, str(c)) for v in shown[c].tolist()] for c in shown.columns]
    key_cols = [_keys(shown[c]) if n else None for c, n in zip(shown.columns, numeric, strict=True)]
    rows = [[None if col[i] == "–" else col[i] for col in cells] for i in range(len(shown))]
    keys = [[kc[i] if kc is not None else None for kc in key_cols] for i in range(len(shown))] if any(numeric) else []
    spec: dict[str, Any] = {"name": name, "heading": heading, "columns": columns, "rows": rows, "keys": keys}
    if len(df) > MAX_ROWS:
        spec["note"] = (f"the first {MAX_ROWS:,} of {len(df):,} rows, in the table's order; "
                        "hpcjobs report --csv prints them all")
    if log_folder is not None and "point_id" in shown.columns:
        _add_log_links(spec, shown, log_folder)
    return spec


def _add_log_links(spec: dict[str, Any], shown: pd.DataFrame, folder: Path) -> None:
    """Two columns, ``stdout`` and ``stderr``, linking the run folder's log files of each point."""
    from hpcjobs.sweep.logs import LOG_ERR, LOG_OUT

    base = len(spec["columns"])
    spec["columns"] += [{"name": "stdout", "label": "stdout", "numeric": False},
                        {"name": "stderr", "label": "stderr", "numeric": False}]
    links: list[list[str | None] | None] = []
    for row, point in zip(spec["rows"], shown["point_id"].astype("string").tolist(), strict=True):
        found: list[str | None] = [None] * (base + 2)
        for j, (label, log) in enumerate((("stdout", LOG_OUT), ("stderr", LOG_ERR))):
            path = folder / "points" / str(point) / log if point is not pd.NA and point else None
            ok = path is not None and _regular_inside(path, folder)
            row.append(label if ok else None)
            found[base + j] = path.resolve().as_uri() if ok and path is not None else None
        links.append(found if any(found) else None)
        if spec["keys"]:
            spec["keys"][len(links) - 1] += [None, None]
    spec["links"] = links


def _regular_inside(path: Path, folder: Path) -> bool:
    """A regular file whose real path stays in ``folder`` (a planted link out of the sweep is not linked)."""
    try:
        real = path.resolve(strict=True)
        return real.is_file() and real.is_relative_to(folder.resolve(strict=True))
    except (OSError, RuntimeError):
        return False
