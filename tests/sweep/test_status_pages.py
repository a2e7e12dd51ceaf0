"""``hpcjobs status --points`` lists a page of points (a sweep may have a million), counts come from the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import invoke

EXPERIMENT = """\
name: pages
command: 'test "$x" != 3 || exit 4'
sweep:
  grid:
    x: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
"""




@pytest.fixture
def sweep_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    code, out = invoke("sweep", "exp.yaml", "--json", "--workers", "2")
    assert code == 0, out
    return str(json.loads(out)["sweep_id"])


def test_status_pages_through_the_points(sweep_id: str) -> None:
    st = json.loads(invoke("status", sweep_id, "--json")[1])
    assert st["counts"] == {"COMPLETED": 11, "FAILED": 1} and len(st["points"]) == 12
    page = json.loads(invoke("status", sweep_id, "--json", "--offset", "4", "--limit", "3")[1])
    assert [p["index"] for p in page["points"]] == [4, 5, 6] and page["points_offset"] == 4
    assert page["counts"] == st["counts"]  # the counts are the whole sweep's
    failed = json.loads(invoke("status", sweep_id, "--json", "--state", "FAILED")[1])
    assert [(p["params"]["x"], p["exit_code"]) for p in failed["points"]] == [(3, 4)]
    code, out = invoke("status", sweep_id, "--points", "--limit", "5")
    assert code == 0 and "points 0-4" in out and "more: --offset 5" in out
    code, out = invoke("status", sweep_id, "--points", "--offset", "10")
    assert code == 0 and "points 10-11" in out and "more:" not in out
    code, out = invoke("status", sweep_id)
    assert code == 0 and "11/12 finished" not in out and "12/12 finished" in out
