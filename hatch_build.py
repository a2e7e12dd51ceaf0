"""Hatch build hook: compile the optional C scanner for sacct text (``hpcjobs.accounting.sacct._scan``).

The package is complete without it -- the pyarrow reader parses the same text, more slowly -- so a
machine without a C compiler or Python headers still builds and installs hpcjobs (a warning says
so). ``HPCJOBS_PURE_PYTHON=1`` skips the compiler on purpose. Editable installs (``pip install -e .``)
build the module in place next to its sources; wheels carry it and are tagged for the platform.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

EXTENSION = "hpcjobs.accounting.sacct._scan"
SOURCE = "hpcjobs/accounting/sacct/_scan.c"


class CompileScannerHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles :data:`SOURCE` with setuptools' ``build_ext``; a failure leaves a pure-Python build."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("HPCJOBS_PURE_PYTHON", "") not in ("", "0"):
            return
        editable = version == "editable"
        try:
            built = self._compile(inplace=editable)
        except Exception as exc:  # no compiler, no headers: the pure-Python reader does the work
            self.app.display_warning(f"hpcjobs: the C sacct scanner was not built ({exc}); "
                                     "sacct text is read by the pure-Python (pyarrow) path")
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:
            build_data["force_include"][str(built)] = "hpcjobs/accounting/sacct/" + built.name

    def _compile(self, *, inplace: bool) -> Path:
        from setuptools import Distribution, Extension

        root = Path(self.root)
        ext = Extension(EXTENSION, [SOURCE], extra_compile_args=["-O2"] if os.name != "nt" else [])
        dist = Distribution({"name": "hpcjobs", "ext_modules": [ext], "script_name": "hatch_build.py"})
        cmd = dist.get_command_obj("build_ext")
        cmd.inplace = inplace
        cmd.build_lib = tempfile.mkdtemp(prefix="hpcjobs-build-")
        cmd.build_temp = tempfile.mkdtemp(prefix="hpcjobs-build-temp-")
        cwd = os.getcwd()
        os.chdir(root)  # setuptools resolves the source and the in-place target from the working directory
        try:
            cmd.ensure_finalized()
            cmd.run()
            outputs = [Path(p) for p in cmd.get_outputs()]
        finally:
            os.chdir(cwd)
        built = outputs[0] if outputs[0].is_absolute() else root / outputs[0]
        if not built.exists():
            raise FileNotFoundError(built)
        return built
