"""A sweep's points on parallel axes: each parameter, then the fate figures, one line per point by state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: Points drawn on the parallel axes (a bigger sweep keeps its first ones, in index order, and says so).
MAX_LINES = 5000
#: Fate columns drawn after the parameters, with their axis names.
FATE_AXES = {"elapsed": "elapsed (min)", "wait": "wait (min)", "cpu_efficiency": "CPU eff",
             "mem_efficiency": "mem eff"}
#: Categories an axis of text values may list by name (more: only the first and the last are named).
MAX_NAMED = 12


def _axis(name: str, values: pd.Series) -> tuple[dict[str, Any], list[float | None], list[str | None]]:
    """One axis: its range and tick labels, each point's position on it and its text."""
    if pd.api.types.is_timedelta64_dtype(values):
        values = values.dt.total_seconds() / 60.0
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if not numeric:
        as_num = pd.to_numeric(values, errors="coerce")
        numeric = bool(as_num.notna().sum()) and bool((as_num.notna() | values.isna()).all())
        if numeric:
            values = as_num
    if numeric:
        arr = pd.to_numeric(values, errors="coerce").astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        finite = arr[np.isfinite(arr)]
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
        if hi == lo:
            lo, hi = lo - 0.5, hi + 0.5
        pos = [None if not np.isfinite(v) else round(float(v), 6) for v in arr]
        text = [None if p is None else f"{p:.4g}" for p in pos]
        return {"name": name, "min": lo, "max": hi}, pos, text
    labels = values.astype("string")
    cats = sorted(labels.dropna().unique().tolist(), key=str)
    where = {c: i for i, c in enumerate(cats)}
    pos = [None if v is pd.NA else float(where[v]) for v in labels.tolist()]
    named = cats if len(cats) <= MAX_NAMED else [cats[0], cats[-1]]
    ticks = [[float(where[c]), str(c)[:18]] for c in named]
    return ({"name": name, "min": -0.5, "max": max(0.5, len(cats) - 0.5), "labels": ticks}, pos,
            [None if v is pd.NA else str(v) for v in labels.tolist()])


def sweep_parallel(points: pd.DataFrame) -> dict[str, Any] | None:
    """Parallel coordinates of a sweep report's points table (``sweep_points``): its columns between
    ``index`` and ``attempts`` (parameters, and the result metrics when the page has them), then the fate."""
    if points.empty or "state" not in points:
        return None
    start = list(points.columns).index("index") + 1 if "index" in points.columns else 0
    stop = list(points.columns).index("attempts") if "attempts" in points.columns else len(points.columns)
    params = list(points.columns[start:stop])  # the parameters, then the result metrics (page.with_metrics)
    shown = points.head(MAX_LINES)
    axes, positions, texts = [], [], []
    for col in [*params, *[c for c in FATE_AXES if c in shown]]:
        axis, pos, text = _axis(FATE_AXES.get(col, col.removeprefix("param_")), shown[col])
        axes.append(axis)
        positions.append(pos)
        texts.append(text)
    if not axes:
        return None
    lines = []
    ids = shown["point_id"].astype("string").fillna("?") if "point_id" in shown else pd.Series(["?"] * len(shown))
    idx = shown["index"] if "index" in shown else pd.Series(range(len(shown)))
    for n, (pid, i, state) in enumerate(zip(ids, idx, shown["state"].astype("string").fillna("?"), strict=True)):
        lines.append({"label": f"point {i} ({pid})", "state": str(state), "values": [p[n] for p in positions],
                      "text": [t[n] for t in texts]})
    note = "one line per point, its colour the point's state; hover a line for its values"
    if len(points) > MAX_LINES:
        note += f"; the first {MAX_LINES:,} of {len(points):,} points"
    return {"kind": "parallel", "name": "sweep_parallel", "title": "Parameters against fate", "axes": axes,
            "lines": lines, "wide": True, "note": note}
