"""Helpers over nested call structures (tuples, lists, dicts) of tensors."""

from __future__ import annotations

from typing import Callable, TypeVar

import torch

T = TypeVar("T")


def map_nested_tensors(obj: T, fn: Callable[[torch.Tensor], torch.Tensor]) -> T:
    """`obj` with fn applied to every tensor in nested tuples (named ones too), lists and dicts;
    containers are rebuilt with their own types, other values are shared."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        items = [map_nested_tensors(v, fn) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, list):
        return type(obj)(map_nested_tensors(v, fn) for v in obj)
    if isinstance(obj, dict):
        out = obj.copy()
        for k, v in obj.items():
            out[k] = map_nested_tensors(v, fn)
        return out
    return obj


def to_device(obj: T, device: torch.device | str) -> T:
    """`obj` with every nested tensor moved to `device`."""
    return map_nested_tensors(obj, lambda t: t.to(device))


def cast_floats(obj: T, dtype: torch.dtype) -> T:
    """`obj` with every nested floating-point tensor cast to `dtype` (autocast outputs back to
    the dtype eager returns)."""
    return map_nested_tensors(obj, lambda t: t.to(dtype) if t.is_floating_point() else t)
