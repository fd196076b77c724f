"""Typed readers for aitune's environment variables (docs/reference/configuration.md).

Variables are read on demand rather than at import, so ``AITuneConfig.reset_to_defaults()``
and tests that change the environment see the current values.
"""

from __future__ import annotations

import os
from typing import Optional

from aitune.exceptions import InvalidValueError

__all__ = ["TRUE_VALUES", "env_bool", "env_float", "env_int", "env_str"]

# Exactly the spellings the reference accepts; anything else (including "TRUE" or "on") is false.
TRUE_VALUES = frozenset({"1", "true", "True", "yes", "Yes", "YES"})


def env_bool(name: str, default: bool) -> bool:
    """Return ``True`` only for the accepted true spellings; ``default`` when unset."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value in TRUE_VALUES


def env_int(name: str, default: int) -> int:
    """Return the variable as an ``int``; ``default`` when unset or empty.

    A value that is not an integer raises rather than being ignored, because a
    silently dropped setting is harder to diagnose than an error naming it.
    """
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidValueError(f"Environment variable {name} must be an integer, got {value!r}.") from None


def env_float(name: str, default: Optional[float]) -> Optional[float]:
    """Return the variable as a ``float``; ``default`` when unset or empty; a non-number raises."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value.strip())
    except ValueError:
        raise InvalidValueError(f"Environment variable {name} must be a number, got {value!r}.") from None


def env_str(name: str, default: Optional[str] = None) -> Optional[str]:
    """Return the variable's text; ``default`` when unset or empty.

    An empty value counts as unset (as XDG does for ``XDG_CACHE_HOME``), so
    ``AITUNE_CACHE_DIR=`` does not turn the current directory into the cache.
    """
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value
