"""Rebuilding call structures with some tensors replaced (make_batch, min/max runs), walking
the same containers as the native flattener and addressing leaves by semantic key tuple."""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Callable, TypeVar

import torch

from aitune.torch.graph.locator import Locator

KeyPath = tuple  # the keys of a leaf's path, e.g. ("x",) or ("options", "mask")
T = TypeVar("T")


def map_tensors(obj: T, fn: Callable[[KeyPath, torch.Tensor], torch.Tensor], path: KeyPath = ()) -> T:
    """Returns `obj` with every tensor t at key path p replaced by fn(p, t); containers are
    rebuilt, other values are shared."""
    if isinstance(obj, torch.Tensor):
        return fn(path, obj)
    if isinstance(obj, tuple):
        items = [map_tensors(v, fn, path + (i,)) for i, v in enumerate(obj)]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, list):
        return type(obj)(map_tensors(v, fn, path + (i,)) for i, v in enumerate(obj))
    if isinstance(obj, dict):
        out = copy.copy(obj)
        for k, v in obj.items():
            out[k] = map_tensors(v, fn, path + (k,))
        return out
    rule, fields = Locator._classify(type(obj))
    if rule == 2 and isinstance(obj, collections.UserDict):
        out = copy.copy(obj)
        out.data = {k: map_tensors(v, fn, path + (k,)) for k, v in obj.data.items()}
        return out
    if rule == 3 and dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **{f: map_tensors(getattr(obj, f), fn, path + (f,)) for f in fields})
    if rule == 4:
        out = copy.copy(obj)
        for name in Locator._user_type_attributes(obj):
            setattr(out, name, map_tensors(getattr(obj, name), fn, path + (name,)))
        return out
    return obj


def canonical_call(params: list, bound: dict) -> tuple[tuple, dict]:
    """(args, kwargs) from bound arguments: positional parameters positionally while no gap,
    *args appended, the rest by keyword (docs/reference/recording.md#binding-flattening-and-names canonical layout)."""
    args: list = []
    kwargs: dict = {}
    positional_open = True
    for name, kind, _ in params:
        if name not in bound:
            if kind in (0, 1):
                positional_open = False
            continue
        value = bound[name]
        if kind == 0 or (kind == 1 and positional_open):
            args.append(value)
        elif kind == 2:
            args.extend(value)
        elif kind == 4:
            kwargs.update(value)
        else:
            kwargs[name] = value
    return tuple(args), kwargs
