"""The forward's output structure in JSON, saved with a TensorRT plan so a checkpoint loaded
without samples can still rebuild dict / tuple / list / namedtuple-free outputs. Other
containers (dataclasses, HF ModelOutput) come from the stored reference outputs instead."""

from __future__ import annotations

from typing import Any

import torch


def encode(template: Any) -> Any | None:
    """JSON form of `template` (tensors become {"tensor": true}); None when a container cannot
    be encoded."""
    if isinstance(template, torch.Tensor):
        return {"tensor": True}
    if type(template) in (tuple, list):
        items = [encode(v) for v in template]
        return None if any(i is None for i in items) else {type(template).__name__: items}
    if type(template) is dict and all(isinstance(k, str) for k in template):
        items = {k: encode(v) for k, v in template.items()}
        return None if any(i is None for i in items.values()) else {"dict": items}
    if template is None or isinstance(template, (bool, int, float, str)):
        return {"value": template}
    return None


def decode(data: Any) -> Any:
    if "tensor" in data:
        return torch.empty(0)
    if "tuple" in data:
        return tuple(decode(v) for v in data["tuple"])
    if "list" in data:
        return [decode(v) for v in data["list"]]
    if "dict" in data:
        return {k: decode(v) for k, v in data["dict"].items()}
    return data["value"]
