"""Where the shipped templates and site configs are.

In a wheel they live inside the package (``hpcjobs/_shipped/``, copied there
at build time from the top-level ``templates/`` and ``site-configs/``); in a
source checkout or editable install they are read from the repository.
"""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=4)
def shipped_dir(kind: str) -> Path:
    """Directory of shipped ``templates`` or ``site-configs``.

    Raises:
        FileNotFoundError: Neither the wheel layout nor the source layout has it.
    """
    for candidate in (_PACKAGE / "_shipped" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shipped {kind} not found beside {_PACKAGE}")
