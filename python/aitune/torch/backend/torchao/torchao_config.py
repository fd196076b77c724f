from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import marshal
import re
import sys
from typing import Any, Callable

import torch

from aitune.torch.backend.backend import BackendConfig, ServingOptions
from aitune.torch.backend.torchao import ao_config_json
from aitune.torch.backend.torchao.presets import QUANTIZATION_PRESETS, Needs, make_preset, needs_of
from aitune.torch.backend.torchao.quantized_state import SelectedModules

VALID_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Modes in which Inductor captures CUDA graphs itself (torch._inductor.list_mode_options).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
SAVED_STATE_KEY = "saved_quantization"  # the quantized-weights record a checkpoint's config carries
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMPILE_OPTIONS = ("fullgraph", "dynamic", "mode")


@dataclasses.dataclass
class TorchAOBackendConfig(BackendConfig, ServingOptions):
    """torchao quantization, then torch.compile (docs/reference/backends.md#torchao-torchaobackend).

    Args:
        fullgraph: torch.compile(fullgraph=...): graph breaks become errors.
        dynamic: torch.compile(dynamic=...); None means True when the graph has a batch or dim axis.
        mode: torch.compile mode: "default", "reduce-overhead", "max-autotune" (AITune's default) or
            "max-autotune-no-cudagraphs".
        quantization: a preset: "int8wo", "int8dq", "fp8wo", "fp8dq", "mxfp8dq" or "nvfp4dq".
        quantization_config: a torchao `AOBaseConfig` instead of a preset (exactly one of the two).
        filter_fn: `(module, fqn) -> bool`, the modules to quantize (torchao's default: every Linear).
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner);
            needs a mode that does not capture graphs itself ("default" or "max-autotune-no-cudagraphs").

    A preset stays a name until the build (constructing a config never imports torchao);
    `resolved_quantization_config()` gives the torchao object. A config read from a checkpoint
    also carries `expected_quantized_state`, the digest its build must reproduce.
    """

    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str | None = "max-autotune"
    quantization: str | None = None
    quantization_config: Any = None
    filter_fn: Callable[[torch.nn.Module, str], bool] | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        self.expected_quantized_state: dict[str, Any] | None = None
        if self.quantization is not None and self.quantization_config is not None:
            raise ValueError("Only one of quantization or quantization_config should be provided.")
        if self.quantization is None and self.quantization_config is None:
            raise ValueError("Either quantization or quantization_config should be provided.")
        if self.quantization is not None and self.quantization not in QUANTIZATION_PRESETS:
            raise ValueError(
                f"Invalid quantization: {self.quantization!r}. Must be one of: {', '.join(QUANTIZATION_PRESETS)} "
                "(or pass a torchao config as quantization_config)."
            )
        if self.quantization_config is not None and not _is_ao_config(self.quantization_config):
            if isinstance(self.quantization_config, (bytes, bytearray)):
                raise TypeError(
                    "quantization_config is pickled bytes (AITune's checkpoint form); aitune loads no pickle: pass "
                    "the torchao config object or a preset name"
                )
            raise TypeError(
                "quantization_config must be a torchao AOBaseConfig (e.g. torchao.quantization.Int8WeightOnlyConfig()), "
                f"got {type(self.quantization_config).__name__}"
            )
        if self.mode is not None and self.mode not in VALID_MODES:
            raise ValueError(f"Invalid mode: {self.mode!r}. Valid modes are: {', '.join(map(repr, VALID_MODES))}.")
        for name in ("fullgraph", "use_cuda_graphs"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.dynamic is not None and not isinstance(self.dynamic, bool):
            raise ValueError(f"dynamic must be True, False or None, got {self.dynamic!r}")
        if self.filter_fn is not None and not callable(self.filter_fn):
            raise TypeError(f"filter_fn must be a callable (module, fqn) -> bool or None, got {self.filter_fn!r}")
        if self.use_cuda_graphs and self.mode in CUDA_GRAPH_MODES:
            raise ValueError(
                f"use_cuda_graphs=True cannot be combined with mode={self.mode!r}: that mode captures CUDA graphs "
                "itself. Use mode='max-autotune-no-cudagraphs' or 'default', or set use_cuda_graphs=False."
            )

    # -- what it is --------------------------------------------------------------------------
    @property
    def scheme(self) -> str:
        """The preset name, or the torchao config's class name."""
        return self.quantization or type(self.quantization_config).__name__

    @property
    def needs(self) -> Needs:
        return needs_of(self.quantization, self.quantization_config)

    def resolved_quantization_config(self) -> Any:
        """The torchao config object the build applies (imports torchao for a preset)."""
        return self.quantization_config if self.quantization_config is not None else make_preset(self.quantization)

    # -- identity ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON values only (never pickle): the torchao config as typed nodes (ao_config_json.py),
        filter_fn as the selected module names when it is a SelectedModules, else a description
        that from_dict refuses."""
        return {
            "fullgraph": self.fullgraph,
            "dynamic": self.dynamic,
            "mode": self.mode,
            "quantization": self.quantization,
            "quantization_config": _encode_quantization_config(self.quantization_config),
            "filter_fn": _filter_to_json(self.filter_fn),
            "use_cuda_graphs": self.use_cuda_graphs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TorchAOBackendConfig:
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__}.from_dict takes a dict, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known - {SAVED_STATE_KEY})
        if unknown:
            raise ValueError(f"{cls.__name__} has no field(s) {unknown}; expected some of {sorted(known)}")
        values = {k: v for k, v in data.items() if k != SAVED_STATE_KEY}
        values["quantization_config"] = _decode_quantization_config(values.get("quantization_config"))
        values["filter_fn"] = _filter_from_json(values.get("filter_fn"))
        config = cls(**values)
        if data.get(SAVED_STATE_KEY) is not None:
            config.expected_quantized_state = _check_saved_state(data[SAVED_STATE_KEY])
        return config

    def key(self) -> str:
        identity = self.to_dict()
        identity["filter_fn"] = _filter_identity(self.filter_fn)
        return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()

    def describe(self) -> str:
        """AITune's form: the changed torch.compile options, then the quantization, comma-joined:
        `mode=default,quantization=int8wo`, `quantization_config=Int8WeightOnlyConfig(group_size=32)`."""
        parts = [f"{name}={getattr(self, name)}" for name in _COMPILE_OPTIONS if getattr(self, name) != _DEFAULTS[name]]
        if self.quantization_config is None:
            parts.append(f"quantization={self.quantization}")
        else:
            parts.append(f"quantization_config={describe_ao_config(self.quantization_config)}")
        if self.filter_fn is not None:
            parts.append(f"filter_fn={_callable_name(self.filter_fn)}")
        if self.use_cuda_graphs:
            parts.append("use_cuda_graphs=True")
        return ",".join(parts)


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TorchAOBackendConfig)}


def _is_ao_config(value: Any) -> bool:
    module = sys.modules.get("torchao.core.config")  # an AOBaseConfig exists only once torchao is imported
    return module is not None and isinstance(value, module.AOBaseConfig)


def _encode_quantization_config(config: Any) -> Any:
    if config is None:
        return None
    try:
        return ao_config_json.encode(config)
    except ao_config_json.NotSerializable as e:
        # Kept for keys and telemetry; from_dict (and so ait.load) refuses it with this reason.
        return {"not_saveable": str(e), "repr": repr(config)[:500]}


def _decode_quantization_config(node: Any) -> Any:
    if node is None:
        return None
    if isinstance(node, (bytes, bytearray)):
        raise ValueError(
            "saved quantization_config is pickled bytes (AITune's checkpoint form); aitune loads no pickle: re-tune "
            "the model with aitune and save it again"
        )
    if isinstance(node, dict) and "not_saveable" in node:
        raise ValueError(f"saved quantization_config could not be saved: {node['not_saveable']}")
    return ao_config_json.decode_config(node)


def _filter_to_json(fn: Any) -> Any:
    if fn is None:
        return None
    if isinstance(fn, SelectedModules):
        return {"modules": list(fn.names)}
    return {"function": _callable_name(fn)}


def _filter_from_json(node: Any) -> Any:
    if node is None:
        return None
    if isinstance(node, dict) and set(node) == {"modules"} and isinstance(node["modules"], list):
        return SelectedModules(node["modules"])
    if isinstance(node, dict) and "function" in node:
        raise ValueError(
            f"saved filter_fn was the Python function {node['function']!r}, which a saved config cannot hold (no "
            "pickle); the config of a built TorchAOBackend holds the names of the modules it selected instead"
        )
    raise ValueError(f"saved filter_fn must be null or {{'modules': [names]}}, got {node!r}"[:300])


def _check_saved_state(record: Any) -> dict[str, Any]:
    ok = (
        isinstance(record, dict)
        and isinstance(record.get("sha256"), str)
        and _SHA256.fullmatch(record["sha256"]) is not None
        and all(isinstance(record.get(k), (str, type(None))) for k in ("torchao", "device", "scheme"))
        and all(isinstance(record.get(k), int) and not isinstance(record.get(k), bool) for k in ("modules", "bytes"))
    )
    if not ok:
        raise ValueError(
            f"saved {SAVED_STATE_KEY} must be {{sha256: 64 hex digits, modules: int, bytes: int, torchao, device, "
            f"scheme: str or null}}, got {record!r}"[:400]
        )
    return dict(record)


def _callable_name(fn: Any) -> str:
    if isinstance(fn, SelectedModules):
        return repr(fn)
    target = getattr(fn, "func", fn)  # functools.partial
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__qualname__)}"


def _filter_identity(fn: Any) -> Any:
    """A filter function's identity for key(): its name and a hash of its code and closure, so
    two different lambdas do not share a build folder (AITune hashes its dill payload)."""
    if fn is None or isinstance(fn, SelectedModules):
        return _filter_to_json(fn)
    target = getattr(fn, "func", fn)
    code = getattr(target, "__code__", None)
    digest = hashlib.sha256(marshal.dumps(code) if code is not None else repr(type(target)).encode())
    for cell in getattr(target, "__closure__", None) or ():
        try:
            digest.update(repr(cell.cell_contents).encode())
        except ValueError:  # an empty cell
            pass
    return {"function": _callable_name(fn), "code_sha256": digest.hexdigest()}


def describe_ao_config(config: Any) -> str:
    """`ClassName(field=value,...)` with the fields that differ from the class's defaults."""
    cls = type(config)
    if not dataclasses.is_dataclass(config):
        return repr(config)
    try:
        default = cls()
    except Exception:  # noqa: BLE001 - a class with required fields: show them all
        default = None
    changed = []
    for f in dataclasses.fields(config):
        if not f.init:
            continue
        value = getattr(config, f.name)
        if default is not None and _equal(getattr(default, f.name), value):
            continue
        changed.append(f"{f.name}={_render(value)}")
    return f"{cls.__name__}({','.join(changed)})"


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values count as changed
        return False


def _render(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, list):
        return "[" + ",".join(_render(v) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return describe_ao_config(value)
    return str(value)
