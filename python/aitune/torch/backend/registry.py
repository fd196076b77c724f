"""The backend registry: stable names <-> Backend classes (docs/reference/backends.md#backend-names).

A checkpoint names its backends by these names, never by a Python class path, so moving a
backend's file breaks no saved checkpoint, and a file cannot choose what gets imported: a name is
resolved only among classes already registered, i.e. defined in a module the program imported.

- aitune's own backends register with one line, `@register_backend("torch_inductor_aot")`.
- Any other Backend subclass registers itself when its class statement runs, under
  `custom:<module>.<qualname>` (Backend.__init_subclass__); `@register_backend` gives it a
  shorter name instead.

This module imports nothing from aitune but the native extension (the format-1 table): backend.py
imports it."""

from __future__ import annotations

import logging
from typing import Callable, TypeVar

from aitune._native import _C

T = TypeVar("T", bound=type)

logger = logging.getLogger("aitune")

CUSTOM_PREFIX = "custom:"

_BY_NAME: dict[str, type] = {}
_AUTOMATIC: set[str] = set()  # names given by class definition, not by @register_backend


class BackendRegistryError(ValueError):
    """Two different classes claim one backend name."""


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_backend(name: str) -> Callable[[T], T]:
    """Class decorator: registers a Backend subclass under a stable name (a non-empty string
    without spaces). A name already held by another class is refused (BackendRegistryError);
    registering the same class again is a no-op."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise BackendRegistryError(f"A backend name must be a non-empty string without spaces, got {name!r}")

    def decorate(cls: T) -> T:
        held = _BY_NAME.get(name)
        if held is not None and held is not cls and name not in _AUTOMATIC:
            raise BackendRegistryError(
                f"Backend name '{name}' is already registered to {class_path(held)}; {class_path(cls)} needs "
                "another name"
            )
        automatic = cls.__dict__.get("_registry_name")
        if automatic is not None and automatic in _AUTOMATIC and _BY_NAME.get(automatic) is cls:
            del _BY_NAME[automatic]  # the class statement registered it as custom:...; this name replaces that
            _AUTOMATIC.discard(automatic)
        _BY_NAME[name] = cls
        _AUTOMATIC.discard(name)
        cls._registry_name = name
        return cls

    return decorate


def register_automatically(cls: type) -> None:
    """Called for every Backend subclass when it is defined: `custom:<module>.<qualname>`. A class
    defined again under the same path (a module reloaded, a class defined in a function called
    twice) replaces the earlier one; an explicitly registered name is never replaced."""
    name = CUSTOM_PREFIX + class_path(cls)
    held = _BY_NAME.get(name)
    if held is not None and name not in _AUTOMATIC:
        raise BackendRegistryError(f"Backend name '{name}' is already registered to {class_path(held)}")
    _BY_NAME[name] = cls
    _AUTOMATIC.add(name)
    cls._registry_name = name


def name_of(cls: type) -> str:
    """The stable name a class is registered under (written to the manifest)."""
    name = cls.__dict__.get("_registry_name")
    if name is None or _BY_NAME.get(name) is not cls:
        raise BackendRegistryError(f"{class_path(cls)} is not a registered backend")
    return name


def lookup(name: str) -> type | None:
    """The class registered under `name`, or None. Imports nothing."""
    return _BY_NAME.get(name)


def registered_names() -> list[str]:
    return sorted(_BY_NAME)


def format1_class_for_name(name: str) -> str:
    """The class path a format-1 file stores for a stable name, used when writing format 1 (while
    the native manifest validator reads format 1 only). aitune's own backends: the inverse of the
    one table of format-1 class paths, the C++ core's (`_C.LEGACY_BACKEND_NAMES`,
    docs/reference/checkpoint.md#format-versions), which readers map back through."""
    if name.startswith(CUSTOM_PREFIX):
        return name[len(CUSTOM_PREFIX) :]
    for path, builtin in _C.LEGACY_BACKEND_NAMES.items():
        if builtin == name:
            return path
    return class_path(_BY_NAME[name])
