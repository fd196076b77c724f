"""The regions ait.profile attributes time to (docs/guide.md, "Profiling a call"):

* one per wrapped module in the registry (`ait.Module`), named by its registry name;
* the topmost untuned modules under the profiled object: its children (an nn.Module) or its
  module attributes (a pipeline), descending through ModuleList/ModuleDict (never called
  themselves) and through modules that contain a wrapped or JIT-patched module.

Each region's forwards run inside a `torch.profiler.record_function` named
`aitune.performance.aot_module:<name>` or `aitune.performance.untuned_module:<path>`, opened and
closed by forward hooks (so an ait.Module takes nn.Module.__call__ while profiled)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from aitune.torch.jit.state import get_patched
from aitune.torch.module_registry import MODULE_REGISTRY

AOT_PREFIX = "aitune.performance.aot_module:"
UNTUNED_PREFIX = "aitune.performance.untuned_module:"
RUN_MARKER = "aitune.performance.profiled_run"
AOT_KIND = "aot_managed_module"
UNTUNED_KIND = "untuned_module"


def qualified_type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclasses.dataclass(frozen=True)
class Region:
    name: str  # registry name (AOT) or attribute path (untuned)
    module: torch.nn.Module
    kind: str
    state: str | None = None  # the wrapper's state, AOT regions only

    @property
    def label(self) -> str:
        return (AOT_PREFIX if self.kind == AOT_KIND else UNTUNED_PREFIX) + self.name

    @property
    def region_id(self) -> str:
        return region_id(self.kind, self.name)


def region_id(kind: str, name: str) -> str:
    return f"{'aot_module' if kind == AOT_KIND else 'untuned_module'}:{name}"


def _managed_ids() -> set[int]:
    """Every wrapped module and its submodules, and every JIT-patched module."""
    ids: set[int] = set()
    for wrapper in MODULE_REGISTRY.values():
        ids.add(id(wrapper))
        ids.update(id(m) for m in getattr(wrapper, "__wrapped__", wrapper).modules())
    return ids


def _is_jit_patched(module: torch.nn.Module) -> bool:
    return get_patched(module) is not None


def _untuned_under(module: torch.nn.Module, path: str, managed: set[int]) -> list[Region]:
    if id(module) in managed or _is_jit_patched(module):
        return []  # its time belongs to the wrapper's region (or to JIT tuning)
    contains_managed = any(id(m) in managed or _is_jit_patched(m) for m in module.modules() if m is not module)
    if not isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict)) and not contains_managed:
        return [Region(path, module, UNTUNED_KIND)]
    out: list[Region] = []
    for name, child in module.named_children():
        out += _untuned_under(child, f"{path}.{name}", managed)
    return out


def discover_regions(obj: object) -> list[Region]:
    regions = [
        Region(name, getattr(wrapper, "__wrapped__", wrapper), AOT_KIND, wrapper.state.value)
        for name, wrapper in MODULE_REGISTRY.items()
    ]
    if isinstance(obj, torch.nn.Module):
        roots = list(obj.named_children())
    else:
        roots = (
            [(name, value) for name, value in vars(obj).items() if isinstance(value, torch.nn.Module)]
            if hasattr(obj, "__dict__")
            else []
        )
    managed = _managed_ids()
    seen: set[int] = set()
    for path, module in roots:
        for region in _untuned_under(getattr(module, "__wrapped__", module), path, managed):
            if id(region.module) not in seen:  # an alias of one module is one region
                seen.add(id(region.module))
                regions.append(region)
    return regions


class RegionHooks:
    """Opens each region's record_function when its forward starts and closes it when it ends
    (also when it raises); re-entrant calls of one module stay inside the outer record."""

    def __init__(self, regions: list[Region], label_of: Callable[[Region], str] | None = None) -> None:
        self.regions = regions
        self.label_of = label_of or (lambda region: region.label)
        self._open: dict[int, list] = {}  # id(module) -> [record_function, depth]
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def __enter__(self) -> RegionHooks:
        try:
            for region in self.regions:
                self._handles.append(region.module.register_forward_pre_hook(self._pre(region)))
                self._handles.append(region.module.register_forward_hook(self._post, always_call=True))
        except BaseException:
            self.__exit__()
            raise
        return self

    def _pre(self, region: Region) -> Callable[[torch.nn.Module, tuple], None]:
        def hook(module: torch.nn.Module, args: tuple) -> None:
            entry = self._open.get(id(module))
            if entry is not None:
                entry[1] += 1
                return
            record = torch.profiler.record_function(self.label_of(region))
            record.__enter__()
            self._open[id(module)] = [record, 1]

        return hook

    def _post(self, module: torch.nn.Module, args: tuple, output: object) -> None:
        entry = self._open.get(id(module))
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del self._open[id(module)]
            entry[0].__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for record, _ in self._open.values():
            record.__exit__(None, None, None)
        self._open.clear()
