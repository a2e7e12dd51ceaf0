"""Container mount paths as docker's ``--mount`` and Kubernetes volume mounts take them.

A module of its own, importing nothing, so that the backends that build mount options check a path
without loading the site schema (pydantic).
"""

from __future__ import annotations


def mount_path(value: str) -> str:
    """``value`` if it is an absolute path docker's ``--mount`` syntax can carry.

    Raises:
        ValueError: It is relative, or holds a comma, a quote or a control character.
    """
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    bad = [c for c in value if c in ',"\'' or ord(c) < 0x20 or ord(c) == 0x7F]
    if bad:
        raise ValueError(f"{value!r} contains {bad[0]!r}, which docker's --mount syntax cannot carry")
    return value
