"""Helpers over nested call structures (tuples, lists, dicts) of tensors."""

from __future__ import annotations

from typing import Any

import torch


def to_device(obj: Any, device: torch.device) -> Any:
    """`obj` with every tensor in nested tuples/lists/dicts moved to `device`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        items = [to_device(v, device) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, list):
        return type(obj)(to_device(v, device) for v in obj)
    if isinstance(obj, dict):
        out = obj.copy()
        for k, v in obj.items():
            out[k] = to_device(v, device)
        return out
    return obj
