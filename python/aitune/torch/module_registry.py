"""The ordered registry of wrapped modules: ait.tune tunes them in registration order."""

from __future__ import annotations

import logging
from collections import OrderedDict

logger = logging.getLogger("aitune")


class ModuleRegistry(OrderedDict):
    """Name -> ait.Module, in registration order. `.modules` is AITune's view of the same
    mapping (`MODULE_REGISTRY.modules.values()`, docs/guide.md "Coming from AITune")."""

    @property
    def modules(self) -> ModuleRegistry:
        return self


MODULE_REGISTRY: ModuleRegistry = ModuleRegistry()


def register(name: str, module: object) -> None:
    if name in MODULE_REGISTRY and MODULE_REGISTRY[name] is not module:
        logger.warning("A module named '%s' was already registered; the new one replaces it.", name)
    MODULE_REGISTRY[name] = module


def clear() -> None:
    MODULE_REGISTRY.clear()
