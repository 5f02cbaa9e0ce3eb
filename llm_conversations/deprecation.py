"""Warnings for names kept for one release after they were renamed or moved."""

from __future__ import annotations

import warnings

__all__ = ["deprecated_method"]


def deprecated_method(old: str, new: str) -> None:
    """Warn that the method ``old`` is deprecated in favour of ``new``.

    Called from inside the deprecated method, so the warning names its caller.
    """
    warnings.warn(f"{old} is deprecated; use {new}.", DeprecationWarning, stacklevel=3)
