"""``ait.wrap``: replace selected modules inside an object with ``ait.Module``
(docs/reference/api.md#top-level-names)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Iterable, Union

import torch

from aitune.exceptions import AITuneUserInputError, InvalidTypeError, InvalidValueError
from aitune.torch import module_registry
from aitune.torch.inspecting.module_info import InspectedModule, InspectedModulesInfo
from aitune.torch.inspecting.module_inspector import FoundModule, Location, find_modules, unwrap
from aitune.torch.logging_utils import setup_logging
from aitune.torch.module.wrapper import Module, Strategies
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

logger = logging.getLogger("aitune")

# What ait.wrap takes as `modules`: handles from inspect, torch modules, or a mapping or iterable of them.
Modules = Union[InspectedModulesInfo, InspectedModule, torch.nn.Module, Mapping[str, object], Iterable[object]]

# How deep wrap looks for modules passed as plain nn.Module objects.
_SEARCH_DEPTH = 16


def _read(location: Location) -> object:
    if location.kind == "attr":
        return getattr(location.container, location.key)
    return location.container[location.key]


def _write(location: Location, value: object) -> bool:
    """Put ``value`` at ``location``; False when the container cannot be changed (a tuple)."""
    container, key = location.container, location.key
    if location.kind == "attr":
        setattr(container, key, value)  # nn.Module.__setattr__ keeps a proxy registered as a child
        return True
    if isinstance(container, tuple):
        return False
    container[key] = value
    return True


def _as_list(modules: Modules) -> list[torch.nn.Module | InspectedModule]:
    if isinstance(modules, InspectedModulesInfo):
        return modules.get_modules()
    if isinstance(modules, (torch.nn.Module, InspectedModule)):
        return [modules]
    if isinstance(modules, Mapping):
        return list(modules.values())
    if isinstance(modules, Iterable):
        return list(modules)
    raise InvalidTypeError(
        f"modules must be a list of modules (from InspectedModulesInfo.get_modules() or torch modules), "
        f"got {type(modules).__name__}."
    )


def wrap(
    obj: object,
    modules: Modules,
    strategy: TuneStrategy | None = None,
    strategies: Strategies | None = None,
    *,
    fallback_policy: str | None = None,
) -> object:
    """Clear the module registry and replace each of ``modules`` inside ``obj`` with an ``ait.Module``.

    ``modules`` holds handles from ``InspectedModulesInfo.get_modules()`` or ``nn.Module`` objects
    reachable from ``obj``. Each is replaced where it lives (attribute, list index or dict key) and
    named by its path in ``obj``. If ``obj`` itself is listed, it is returned wrapped; otherwise
    ``obj`` is returned, updated in place.
    """
    setup_logging()
    if strategy is not None and strategies is not None:
        raise ValueError("Only one of strategy or strategies should be provided")
    if fallback_policy is not None and fallback_policy not in ("raise", "eager"):
        raise InvalidValueError(f"fallback_policy must be 'raise' or 'eager', got {fallback_policy!r}")
    items = _as_list(modules)
    for item in items:
        if not isinstance(item, (torch.nn.Module, InspectedModule)):
            raise AITuneUserInputError(
                f"Only torch modules are supported. ait.wrap got a {type(item).__module__}.{type(item).__qualname__}."
            )
    module_registry.clear()

    def make(module: torch.nn.Module, name: str) -> Module:
        logger.info("🎁 Wrapping module `%s` (%s)", name, type(unwrap(module)).__name__)
        return Module(module, name=name, strategy=strategy, strategies=strategies, fallback_policy=fallback_policy)

    root = unwrap(obj) if isinstance(obj, torch.nn.Module) else None
    for item in items:
        module = unwrap(item.module if isinstance(item, InspectedModule) else item)
        if module is root:
            if len(items) > 1:
                logger.warning(
                    "The root module is listed for wrapping; the other %d module(s) are not wrapped separately.",
                    len(items) - 1,
                )
            name = item.name if isinstance(item, InspectedModule) else type(module).__name__
            return make(obj, name)

    found_by_id: dict[int, FoundModule] | None = None
    seen: set[int] = set()
    for item in items:
        handle = item if isinstance(item, InspectedModule) else None
        module = unwrap(handle.module if handle else item)
        if id(module) in seen:
            continue
        seen.add(id(module))
        location, name = None, None
        if handle is not None and handle.location is not None and handle.location.kind != "root":
            try:
                if unwrap(_read(handle.location)) is module:
                    location, name = handle.location, handle.name
            except Exception:  # the container changed since inspect; search again below
                location = None
        if location is None:
            if found_by_id is None:
                found_by_id = {id(unwrap(f.module)): f for f in find_modules(obj, _SEARCH_DEPTH)}
            found = found_by_id.get(id(module))
            if found is None or found.location.kind == "root":
                label = handle.name if handle else type(module).__name__
                raise AITuneUserInputError(f"Module '{label}' was not found in {type(obj).__name__}; cannot wrap it.")
            location, name = found.location, (handle.name if handle else found.name)
        wrapped = make(module, name)
        if not _write(location, wrapped):
            # Calls through the original object still reach the proxy: ait.Module routes its forward.
            logger.info("Module `%s` lives in a tuple; it stays there and is intercepted through its forward.", name)
    return obj
