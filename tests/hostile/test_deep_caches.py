"""JSON nested past Python's recursion limit in the files hpcjobs keeps for itself: read as absent, never a crash.

``results-cache.json`` and ``results-spec.json`` in a sweep folder and the scheduler-limits cache are
written by hpcjobs, but a tarball, a shared folder or a full disk can leave anything there. Each depth
and shape below goes past ``json``'s recursion limit (or stays just inside it); the reader must give
"nothing cached" (and the command asks again), never a ``RecursionError``. ``metrics.json`` and
``report --from-file`` have their own tests (``test_metric_files.py``, ``test_report_input.py``).
"""

from __future__ import annotations

import json
import time

import pytest

from hpcjobs.config.results import RESULTS_SPEC_FILE, read_results_spec
from hpcjobs.schedulers import limits_cache
from hpcjobs.sweep.results import RESULTS_CACHE_FILE, ResultSource, results_frame


def _nested(shape: str, depth: int) -> bytes:
    if shape == "list":
        return b"[" * depth + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'{"limits": ' + b"[" * depth + b"]" * depth + b', "fetched_at": ' + str(time.time()).encode() + b"}"


CASES = [(shape, depth) for shape in ("list", "object", "inside") for depth in (900, 5_000, 100_000)]


@pytest.mark.parametrize(("shape", "depth"), CASES)
def test_a_deep_limits_cache_is_asked_again(tmp_path, monkeypatch, shape, depth):
    monkeypatch.setenv("HPCJOBS_CACHE_DIR", str(tmp_path))
    key = limits_cache.cache_key("slurm", "deep", "/usr/bin/scontrol", "me")
    assert key is not None
    (tmp_path / "limits").mkdir()
    (tmp_path / "limits" / key).write_bytes(_nested(shape, depth))
    assert limits_cache.load(key) is None


@pytest.mark.parametrize(("shape", "depth"), CASES)
def test_a_deep_results_spec_is_no_spec(tmp_path, shape, depth):
    (tmp_path / RESULTS_SPEC_FILE).write_bytes(_nested(shape, depth))
    assert read_results_spec(tmp_path) == ((), None)


@pytest.mark.parametrize(("shape", "depth"), CASES)
def test_a_deep_results_cache_is_read_again_from_the_points(tmp_path, shape, depth):
    folder = tmp_path / "sweep"
    (folder / "points" / "p1").mkdir(parents=True)
    (folder / "points" / "p1" / "metrics.json").write_text(json.dumps({"loss": 0.5}))
    (folder / RESULTS_CACHE_FILE).write_bytes(_nested(shape, depth))
    frame = results_frame(folder, ["p1"], sources=[ResultSource(file="metrics.json")], cache=True)
    assert list(frame["point_id"]) == ["p1"] and float(frame["loss"].iloc[0]) == 0.5
