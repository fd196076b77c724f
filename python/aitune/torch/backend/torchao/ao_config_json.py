"""A torchao quantization config as JSON, without pickle (docs/reference/backends.md#torchao-torchaobackend).

AITune pickles `quantization_config` with dill; aitune writes it as typed JSON nodes and reads it
back by looking each class name up among the config, granularity, layout and enum classes of a
fixed list of torchao modules. The file only picks a name from that table: nothing is imported
because a file named it, the top level must be an `AOBaseConfig`, and every field must be one the
class declares. A value that is not data (a function, a module, a tensor) cannot be saved and
says so.

Nodes: JSON scalars and lists as themselves; `{"dtype": "float8_e4m3fn"}`;
`{"enum": "MappingType", "member": "SYMMETRIC"}`; `{"tuple": [...]}`; `{"dict": {...}}`;
`{"type": "PerRow", "fields": {"dim": -1}}` for dataclasses and named tuples.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
from typing import Any

import torch

from aitune.exceptions import BackendUnavailableError

# The torchao namespaces whose classes a saved config may name (imported on first decode only).
_CLASS_MODULES = (
    "torchao.quantization",
    "torchao.quantization.granularity",
    "torchao.quantization.quant_primitives",
    "torchao.quantization.quantize_.common",
    "torchao.quantization.quantize_.workflows",
    "torchao.dtypes",
    "torchao.float8.inference",
    "torchao.prototype.mx_formats",
    "torchao.prototype.mx_formats.inference_workflow",
)
_MAX_DEPTH = 16
_registry: dict[str, type | None] | None = None
_MISSING = object()


class NotSerializable(ValueError):
    """A config value that JSON cannot hold without pickle."""


def _is_named_tuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _from_torchao(cls: type) -> bool:
    return (cls.__module__ or "").split(".")[0] == "torchao"


def encode(value: Any, where: str = "quantization_config", depth: int = 0) -> Any:
    """`value` as JSON nodes; NotSerializable names the first value that is not data."""
    if depth > _MAX_DEPTH:
        raise NotSerializable(f"{where} nests deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotSerializable(f"{where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    cls = type(value)
    if isinstance(value, enum.Enum) and _from_torchao(cls):
        return {"enum": cls.__name__, "member": value.name}
    if isinstance(value, list):
        return [encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if _is_named_tuple(cls) and _from_torchao(cls):
        fields = {name: encode(getattr(value, name), f"{where}.{name}", depth + 1) for name in cls._fields}
        return {"type": cls.__name__, "fields": fields}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise NotSerializable(f"{where} is a dict with keys that are not strings")
        return {"dict": {k: encode(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and _from_torchao(cls):
        fields = {
            f.name: encode(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
            for f in dataclasses.fields(value)
            if f.init
        }
        return {"type": cls.__name__, "fields": fields}
    raise NotSerializable(
        f"{where} is a {cls.__module__}.{cls.__qualname__}, which cannot be saved without pickle (only numbers, "
        "strings, lists, dicts, torch dtypes and torchao's config, granularity, layout and enum classes can)"
    )


def _classes() -> dict[str, type | None]:
    """Class name -> class over _CLASS_MODULES (None for a name two different classes share)."""
    global _registry
    if _registry is not None:
        return _registry
    try:
        importlib.import_module("torchao")
    except ImportError as e:
        raise BackendUnavailableError(
            f"torchao is not installed. Please install `torchao` (pip install 'aitune[torchao]'): a saved "
            f"TorchAOBackend quantization_config needs it ({e})"
        ) from e
    found: dict[str, type | None] = {}
    for module_name in _CLASS_MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - a namespace this torchao lacks (prototype) adds no names
            continue
        for name, cls in vars(module).items():
            if not isinstance(cls, type) or not _from_torchao(cls):
                continue
            if not (issubclass(cls, enum.Enum) or dataclasses.is_dataclass(cls) or _is_named_tuple(cls)):
                continue
            if name in found and found[name] is not cls:
                found[name] = None
            else:
                found[name] = cls
    _registry = found
    return found


def _lookup(name: Any, where: str) -> type:
    if not isinstance(name, str):
        raise ValueError(f"saved quantization_config: {where} names a class by {name!r}; expected a string")
    cls = _classes().get(name, _MISSING)
    if cls is _MISSING:
        raise ValueError(
            f"saved quantization_config: {where} names {name!r}, which is not a torchao config, granularity, layout "
            "or enum class of the installed torchao (saved with another torchao version?)"
        )
    if cls is None:
        raise ValueError(f"saved quantization_config: {where} names {name!r}, which torchao defines more than once")
    return cls


def decode(node: Any, where: str = "quantization_config", depth: int = 0) -> Any:
    """The inverse of encode(); ValueError for anything encode() does not write."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"saved quantization_config: {where} nests deeper than {_MAX_DEPTH} levels")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise ValueError(f"saved quantization_config: {where} is a {type(node).__name__}; expected a JSON node")
    keys = set(node)
    if keys == {"dtype"}:
        dtype = getattr(torch, str(node["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"saved quantization_config: {where} names dtype {node['dtype']!r}, which torch lacks")
        return dtype
    if keys == {"enum", "member"}:
        cls = _lookup(node["enum"], where)
        if not issubclass(cls, enum.Enum) or node["member"] not in cls.__members__:
            raise ValueError(
                f"saved quantization_config: {where}: {node['enum']}.{node['member']} is not an enum member"
            )
        return cls[node["member"]]
    if keys == {"tuple"} and isinstance(node["tuple"], list):
        return tuple(decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node["tuple"]))
    if keys == {"dict"} and isinstance(node["dict"], dict):
        return {k: decode(v, f"{where}[{k!r}]", depth + 1) for k, v in node["dict"].items()}
    if keys == {"type", "fields"} and isinstance(node["fields"], dict):
        return _construct(node["type"], node["fields"], where, depth)
    raise ValueError(f"saved quantization_config: {where} is an unknown node with keys {sorted(keys)}")


def _construct(name: Any, fields: dict[str, Any], where: str, depth: int) -> Any:
    cls = _lookup(name, where)
    if issubclass(cls, enum.Enum):
        raise ValueError(f"saved quantization_config: {where} constructs enum {name!r}; expected a member node")
    allowed = list(cls._fields) if _is_named_tuple(cls) else [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise ValueError(
            f"saved quantization_config: {where} gives {name} the field(s) {unknown}, which this torchao's {name} does "
            f"not have (saved with another torchao version?); it has {allowed}"
        )
    values = {k: decode(v, f"{where}.{k}", depth + 1) for k, v in fields.items()}
    try:
        return cls(**values)
    except Exception as e:  # noqa: BLE001 - the class's own validation, reported with the place
        raise ValueError(f"saved quantization_config: {where}: {name}(...) refused the saved fields: {e}") from e


def decode_config(node: Any) -> Any:
    """A whole saved quantization_config: must decode to a torchao AOBaseConfig."""
    config = decode(node)
    from torchao.core.config import AOBaseConfig

    if not isinstance(config, AOBaseConfig):
        raise ValueError(
            f"saved quantization_config is a {type(config).__name__}; expected a torchao AOBaseConfig subclass"
        )
    return config
