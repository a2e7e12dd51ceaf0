"""Fixtures for the accounting tests: run the sacct-text tests through each reader."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from hpcjobs.accounting.sacct import scan as sacct_scan


@pytest.fixture(scope="module", params=["scanner", "arrow"])
def sacct_reader(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which sacct text reader the module's tests use: the compiled scanner or the pure pyarrow path.

    The scanner hands text it does not know exactly to the pyarrow path, so under ``"scanner"`` both run;
    under ``"arrow"`` the scanner is switched off. Without the compiled module the ``"scanner"`` runs skip,
    except under ``CI=true``, where the build must have compiled it.
    """
    if request.param == "scanner" and not sacct_scan.AVAILABLE:
        if os.environ.get("CI"):
            pytest.fail("the C sacct scanner was not built (hatch_build.py); CI must build it")
        pytest.skip("the C sacct scanner is not built here")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "arrow":
            mp.setattr(sacct_scan, "_ext", None)
        yield request.param
