"""JSON skeletons of call structures (samples, output templates) with tensors stored apart
(safetensors): the checkpoint holds no pickle (docs/reference/recording.md#sample-storage,
docs/reference/checkpoint.md#layout-and-manifest).

Classes are recorded by qualified name and, on load, must be dataclasses, Mapping or Sequence
types (named tuples included) from modules the program already imported; nothing else is
reconstructed and nothing is imported."""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import math
import sys
from typing import Any, Union

import torch

from aitune.exceptions import UnsupportedCheckpointError


# A JSON value as json.loads returns it: what a skeleton node is.
JSON = Union[None, bool, int, float, str, list["JSON"], dict[str, "JSON"]]


class NotRepresentable(ValueError):
    """A value the JSON skeleton cannot hold (it stays in memory only)."""


def _qualname(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _import(qualname: str) -> type:
    """The class a skeleton names, from a module the program has already imported: nothing is
    imported or run because a checkpoint names it (docs/guide.md "Threat model"). Lookups are
    static (no module or class __getattr__ runs)."""
    module_name, _, attr_path = qualname.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        raise UnsupportedCheckpointError(
            f"A stored sample uses the type {qualname}, whose module '{module_name}' is not imported: import it "
            "before ait.load (aitune never imports a module that a checkpoint names)"
        )
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            raise UnsupportedCheckpointError(
                f"A stored sample uses the type {qualname}, which '{module_name}' does not define"
            ) from None
    if not isinstance(obj, type):
        raise UnsupportedCheckpointError(f"A stored sample names {qualname}, which is not a class")
    return obj


def encode(value: Any, tensors: dict[str, torch.Tensor]) -> JSON:
    """JSON-able skeleton of `value`; tensors are put into `tensors` under fresh keys."""
    if isinstance(value, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = value.detach().to("cpu").contiguous()
        return {"tensor": key}
    if value is None or isinstance(value, (bool, int, str)):
        return {"value": value}
    if isinstance(value, float):
        return {"float": repr(value)} if not math.isfinite(value) else {"value": value}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"namedtuple": _qualname(type(value)), "items": [encode(v, tensors) for v in value]}
    if type(value) in (tuple, list):
        return {type(value).__name__: [encode(v, tensors) for v in value]}
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise NotRepresentable(f"dict key {k!r} is neither str nor int")
            items.append([k, encode(v, tensors)])
        if type(value) is dict:
            return {"dict": items}
        return {"mapping": _qualname(type(value)), "items": items}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "dataclass": _qualname(type(value)),
            "fields": {f.name: encode(getattr(value, f.name), tensors) for f in dataclasses.fields(value) if f.init},
        }
    raise NotRepresentable(f"a {type(value).__module__}.{type(value).__qualname__} value cannot be stored as JSON")


def decode(node: JSON, tensors: dict[str, torch.Tensor]) -> Any:
    if "tensor" in node:
        return tensors[node["tensor"]]
    if "value" in node:
        return node["value"]
    if "float" in node:
        return float(node["float"])
    if "tuple" in node:
        return tuple(decode(v, tensors) for v in node["tuple"])
    if "list" in node:
        return [decode(v, tensors) for v in node["list"]]
    if "dict" in node:
        items = node["dict"]
        # [[key, value], ...]; a JSON object in TensorRT io.json files of format-1/2 checkpoints.
        pairs = items.items() if isinstance(items, dict) else items
        return {k: decode(v, tensors) for k, v in pairs}
    if "namedtuple" in node:
        cls = _import(node["namedtuple"])
        if not (issubclass(cls, tuple) and hasattr(cls, "_fields")):
            raise TypeError(f"{node['namedtuple']} is not a named tuple")
        return cls(*(decode(v, tensors) for v in node["items"]))
    if "mapping" in node:
        cls = _import(node["mapping"])
        if not issubclass(cls, collections.abc.Mapping):
            raise TypeError(f"{node['mapping']} is not a Mapping type")
        out = cls()
        for k, v in node["items"]:
            out[k] = decode(v, tensors)
        return out
    if "dataclass" in node:
        cls = _import(node["dataclass"])
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{node['dataclass']} is not a dataclass")
        return cls(**{k: decode(v, tensors) for k, v in node["fields"].items()})
    raise ValueError(f"unknown skeleton node {sorted(node)}")
