"""One form for CompilationSettings values in which the real class's defaults and those of aitune's
stand-in and the fake compare: Torch-TensorRT's `dtype.f32` and torch's `torch.float32` are the same
precision, an enum is its name, a set is a sorted list."""

from __future__ import annotations

import enum
from typing import Any

import torch


def normal_form(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return str(value)
    to = getattr(value, "to", None)
    if isinstance(value, enum.Enum) and callable(to) and type(value).__name__ == "dtype":
        return str(to(torch.dtype))  # torch_tensorrt's dtype enum
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (set, frozenset, list, tuple)):
        return sorted((normal_form(v) for v in value), key=repr)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"<{type(value).__name__}>"
