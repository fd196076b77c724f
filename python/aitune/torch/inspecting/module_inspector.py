"""Discovery of the ``nn.Module`` instances reachable from an object, and forward timing hooks
(docs/reference/api.md#top-level-names ``ait.inspect``).

The traversal is breadth-first from ``obj`` over instance attributes (``vars()`` and
``__slots__``), dict values, list/tuple items and an ``nn.Module``'s children, down to
``max_depth``. Every module is registered once, under the shortest path that reaches it
(the first reference found wins). Paths read like Python: ``text_encoder.layers[0]``,
``heads[1]``, ``blocks['proj']``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import types
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from aitune.torch.module.wrapper import Module

logger = logging.getLogger("aitune")

_NONE = object()  # a module without a forward of its own (the class forward)
DEBUG_ENV = "AITUNE_INSPECT_DEBUG"
DEBUG_RAISE_ENV = "AITUNE_INSPECT_DEBUG_RAISE"

# Leaves: never descended into.
_LEAF_TYPES = (
    str,
    bytes,
    bytearray,
    int,
    float,
    complex,
    bool,
    type(None),
    range,
    slice,
    torch.Tensor,
    torch.dtype,
    torch.device,
    torch.Size,
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    types.CodeType,
    types.FrameType,
    types.GeneratorType,
    set,
    frozenset,
)


def unwrap(module: object) -> object:
    """The ``nn.Module`` behind an ``ait.Module`` proxy (the module itself otherwise)."""
    return module.__wrapped__ if isinstance(module, Module) else module


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Location:
    """Where a value lives: ``container[key]`` (``kind`` "item") or ``container.key`` ("attr")."""

    kind: str  # "root" | "attr" | "item"
    container: object
    key: object


@dataclass
class FoundModule:
    """One discovered module: its path, depth and the modules above it on that path."""

    name: str
    module: torch.nn.Module
    depth: int
    location: Location
    ancestors: tuple[int, ...]  # ids of the modules on the path from the root, outermost first


def _join(prefix: str, kind: str, key: object) -> str:
    if kind == "attr":
        return f"{prefix}.{key}" if prefix else str(key)
    return f"{prefix}[{key!r}]" if not isinstance(key, int) else f"{prefix}[{key}]"


def _root_name(obj: object) -> str:
    return type(obj).__name__ if isinstance(obj, torch.nn.Module) else ""


def _is_leaf(value: object) -> bool:
    if isinstance(value, _LEAF_TYPES):
        return True
    module = type(value).__module__ or ""
    if module == "builtins" and not isinstance(value, (Mapping, list, tuple)):
        return True
    try:
        import numpy as np

        if isinstance(value, (np.ndarray, np.generic)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return False


def _module_children(module: torch.nn.Module) -> Iterator[tuple[str, object, object]]:
    """``(kind, key, value)`` for an ``nn.Module``: its children, then its public plain attributes."""
    indexed = isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential))
    for child_name, child in module.named_children():
        if indexed and child_name.isdigit():
            yield "item", int(child_name), child
        elif isinstance(module, torch.nn.ModuleDict):
            yield "item", child_name, child
        else:
            yield "attr", child_name, child
    # Plain attributes (e.g. a Python list of modules) are not children; nn.Module's own
    # bookkeeping (_modules, _parameters, hooks, ...) starts with "_" and is skipped.
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr == "training":
            continue
        yield "attr", attr, value


def _object_children(obj: object) -> Iterator[tuple[str, object, object]]:
    if isinstance(obj, Mapping):
        for key, value in list(obj.items()):
            yield "item", key, value
        return
    if isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            yield "item", index, value
        return
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, Mapping):
        for attr, value in list(attrs.items()):
            if attr.startswith("__"):
                continue
            yield "attr", attr, value
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for attr in (slots,) if isinstance(slots, str) else slots:
            if attr.startswith("__") or attr in ("__dict__", "__weakref__"):
                continue
            try:
                value = getattr(obj, attr)
            except AttributeError:
                continue  # an unset slot
            yield "attr", attr, value


def find_modules(obj: object, max_depth: int = 5) -> list[FoundModule]:
    """All ``nn.Module`` instances reachable from ``obj`` within ``max_depth`` steps, breadth first."""
    debug, debug_raise = _env_flag(DEBUG_ENV), _env_flag(DEBUG_RAISE_ENV)
    found: dict[int, FoundModule] = {}
    seen: set[int] = set()
    # (value, display name, path prefix for its children, depth, location, module ancestors);
    # the root is named by its class, and paths below it start from its attributes.
    queue: deque = deque([(obj, _root_name(obj), "", 0, Location("root", None, None), ())])
    while queue:
        value, name, prefix, depth, location, ancestors = queue.popleft()
        is_module = isinstance(value, torch.nn.Module)
        key = id(unwrap(value)) if is_module else id(value)
        if key in seen:
            if debug:
                logger.info("inspect: %s already visited; skipping", name or "<root>")
            continue
        seen.add(key)
        if is_module:
            found[key] = FoundModule(name, value, depth, location, ancestors)
            if debug:
                logger.info("inspect: found module %s (%s) at depth %d", name or "<root>", type(value).__name__, depth)
            ancestors = ancestors + (key,)
        if depth >= max_depth:
            continue
        try:
            children = list(_module_children(value) if is_module else _object_children(value))
        except Exception as error:  # e.g. a custom Mapping or descriptor that raises
            if debug_raise:
                raise
            if debug:
                logger.info(
                    "inspect: cannot traverse %s (%s: %s); skipping", name or "<root>", type(error).__name__, error
                )
            continue
        for kind, child_key, child in children:
            if _is_leaf(child):
                continue
            child_location = Location(kind, value, child_key)
            child_name = _join(prefix, kind, child_key)
            if debug:
                logger.debug("inspect: visiting %s (%s) at depth %d", child_name, type(child).__name__, depth + 1)
            queue.append((child, child_name, child_name, depth + 1, child_location, ancestors))
    return list(found.values())


@dataclass
class ModuleStats:
    calls: int = 0
    top_calls: int = 0  # calls made while no other inspected module was running
    total_time: float = 0.0
    input_types: list[dict[str, object]] = field(default_factory=list)  # one per measured call
    output_types: list[dict[str, object]] = field(default_factory=list)


def _type_name(value: object) -> str:
    return type(value).__name__


def describe_inputs(args: tuple, kwargs: dict) -> dict[str, object]:
    """AITune's record of one call's argument types: {"args": [...], "kwargs": {...}}."""
    return {"args": [_type_name(a) for a in args], "kwargs": {k: _type_name(v) for k, v in kwargs.items()}}


def describe_output(output: object) -> dict[str, object]:
    """AITune's record of one call's output type; sequences also list their elements' types."""
    if isinstance(output, (tuple, list)):
        return {"type": _type_name(output), "elements": [_type_name(x) for x in output]}
    return {"type": _type_name(output)}


class ForwardTimer:
    """Counts and times the forwards of ``modules``.

    Each module's ``forward`` is replaced, on the instance, by a timing wrapper, so a call is
    seen whether it goes through ``module(x)`` or straight to ``module.forward(x)`` (an
    inference function may call either; AITune counts both). Times are wall-clock
    ``perf_counter`` seconds, with ``torch.cuda.synchronize()`` on both sides of a forward when
    CUDA is in use. Use as a context manager: every module gets its own ``forward`` back on
    exit, also when the run raises.
    """

    def __init__(self, modules: list[torch.nn.Module]) -> None:
        self.modules = [unwrap(m) for m in modules]
        self.stats: dict[int, ModuleStats] = {id(m): ModuleStats() for m in self.modules}
        self.enabled = False
        self._stack: list[tuple[int, float, dict[str, object]]] = []
        self._saved: list[tuple[torch.nn.Module, object]] = []  # (module, its own instance forward or _NONE)
        self._sync = torch.cuda.is_available() and torch.cuda.is_initialized()

    def _synchronize(self) -> None:
        if self._sync or (torch.cuda.is_available() and torch.cuda.is_initialized()):
            self._sync = True
            torch.cuda.synchronize()

    def _pre_hook(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        inputs = describe_inputs(args, kwargs) if self.enabled else {}
        self._synchronize()
        self._stack.append((id(module), time.perf_counter(), inputs))

    def _post_hook(self, module: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> None:
        self._synchronize()
        end = time.perf_counter()
        # Pop this module's entry (the innermost one; tolerant of a forward that raised).
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == id(module):
                _, start, inputs = self._stack.pop(index)
                del self._stack[index:]
                break
        else:
            return
        if not self.enabled:
            return
        stats = self.stats[id(module)]
        stats.calls += 1
        stats.total_time += end - start
        stats.input_types.append(inputs)
        stats.output_types.append(describe_output(output))
        if not self._stack:
            stats.top_calls += 1

    def reset(self) -> None:
        for stats in self.stats.values():
            stats.calls = stats.top_calls = 0
            stats.total_time = 0.0
            stats.input_types.clear()
            stats.output_types.clear()

    def _timed(self, module: torch.nn.Module, forward: Callable) -> Callable:
        @functools.wraps(forward)
        def timed_forward(*args: object, **kwargs: object) -> object:
            self._pre_hook(module, args, kwargs)
            output = None
            try:
                output = forward(*args, **kwargs)
                return output
            finally:
                self._post_hook(module, args, kwargs, output)

        return timed_forward

    def __enter__(self) -> "ForwardTimer":
        try:
            for module in self.modules:
                own = module.__dict__.get("forward", _NONE)
                self._saved.append((module, own))
                module.forward = self._timed(module, module.forward)
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        for module, own in reversed(self._saved):
            if own is _NONE:
                module.__dict__.pop("forward", None)
            else:
                module.forward = own
        self._saved.clear()
        self._stack.clear()
