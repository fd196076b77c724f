"""Torch-TensorRT compile settings shared by the JIT and AOT Torch-TensorRT backends
(docs/reference/api.md#backend-classes, docs/reference/backends.md#per-backend-behaviour).

``TorchTensorRTConfig`` is ``torch_tensorrt.dynamo.CompilationSettings`` when Torch-TensorRT is
installed, so ``compile_config=CompilationSettings(...)`` and ``compile_config=TorchTensorRTConfig(...)``
are the same thing. Without the library it is :class:`CompilationSettingsStandIn`, a dataclass
with the same fields and defaults, so configs can be built, described and saved on a host without
Torch-TensorRT, and loaded where it is installed; building still needs the library.

The device is never part of the settings aitune stores or describes: the tuning device is
passed at build time (docs/reference/backends.md#per-backend-behaviour "device is omitted from describe() and from
serialisation").
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import logging
import os
import tempfile
from typing import Any

import torch

from aitune.torch.backend.backend import BackendConfig, _json_value
from aitune.torch.tune_data import recorder as tune_data

logger = logging.getLogger("aitune")

PACKAGE_MISSING_REASON = "torch-tensorrt is not installed. Please install `torch-tensorrt`."
DEVICE_FIELD = "device"


def _torch_tensorrt_temp(*parts: str) -> str:
    return os.path.join(tempfile.gettempdir(), "torch_tensorrt_engine_cache", *parts)


@dataclasses.dataclass(kw_only=True)
class CompilationSettingsStandIn:
    """Used as ``TorchTensorRTConfig`` when torch_tensorrt is not importable: the fields and
    defaults of Torch-TensorRT 2.11's ``CompilationSettings`` (the conformance tier in
    tests/conformance checks them against the real class), so a config written without the library
    is one the library accepts. Like the real class it refuses unknown keywords (TypeError).
    Torch-TensorRT's own types are held by name: ``engine_capability="STANDARD"``; the default
    precision is ``torch.float32`` (Torch-TensorRT's ``dtype.f32``); ``device`` is never stored."""

    enabled_precisions: set = dataclasses.field(default_factory=lambda: {torch.float32})
    workspace_size: int = 0
    min_block_size: int = 5
    torch_executed_ops: set = dataclasses.field(default_factory=set)
    pass_through_build_failures: bool = False
    max_aux_streams: int | None = None
    version_compatible: bool = False
    optimization_level: int | None = None
    use_python_runtime: bool | None = False
    truncate_double: bool = False
    use_fast_partitioner: bool = True
    enable_experimental_decompositions: bool = False
    device: Any = None
    require_full_compilation: bool = False
    disable_tf32: bool = False
    assume_dynamic_shape_support: bool = False
    sparse_weights: bool = False
    engine_capability: str = "STANDARD"
    num_avg_timing_iters: int = 1
    dla_sram_size: int = 1048576
    dla_local_dram_size: int = 1073741824
    dla_global_dram_size: int = 536870912
    dryrun: bool | str = False
    hardware_compatible: bool = False
    timing_cache_path: str = dataclasses.field(default_factory=lambda: _torch_tensorrt_temp("timing_cache.bin"))
    lazy_engine_init: bool = False
    cache_built_engines: bool = False
    reuse_cached_engines: bool = False
    use_explicit_typing: bool = True
    use_fp32_acc: bool = False
    refit_identical_engine_weights: bool = False
    strip_engine_weights: bool = False
    immutable_weights: bool = True
    enable_weight_streaming: bool = False
    enable_cross_compile_for_windows: bool = False
    tiling_optimization_level: str = "none"
    l2_limit_for_tiling: int = -1
    use_distributed_mode_trace: bool = False
    offload_module_to_cpu: bool = False
    enable_autocast: bool = False
    autocast_low_precision_type: Any = None
    autocast_excluded_nodes: set = dataclasses.field(default_factory=set)
    autocast_excluded_ops: set = dataclasses.field(default_factory=set)
    autocast_max_output_threshold: float = 512
    autocast_max_depth_of_reduction: int | None = None
    autocast_calibration_dataloader: Any = None
    enable_resource_partitioning: bool = False
    cpu_memory_budget: int | None = None
    dynamically_allocate_resources: bool = False
    decompose_attention: bool = False
    attn_bias_is_causal: bool = True


def import_torch_tensorrt() -> Any | None:
    """The torch_tensorrt module, or None when it cannot be imported (any import failure:
    a wheel built for another torch fails with more than ImportError)."""
    try:
        return importlib.import_module("torch_tensorrt")
    except Exception:  # noqa: BLE001 - "not usable" is all the caller needs to know
        return None


def resolve_compilation_settings_class() -> type:
    """``torch_tensorrt.dynamo.CompilationSettings`` when importable, else the stand-in."""
    trt = import_torch_tensorrt()
    settings = getattr(getattr(trt, "dynamo", None), "CompilationSettings", None) if trt is not None else None
    return settings if isinstance(settings, type) else CompilationSettingsStandIn


TorchTensorRTConfig = resolve_compilation_settings_class()


def torch_tensorrt_availability() -> tuple[bool, str]:
    if import_torch_tensorrt() is None:
        return False, PACKAGE_MISSING_REASON
    return True, ""


# -- settings <-> plain values ----------------------------------------------------------------
def settings_values(settings: Any) -> dict[str, Any]:
    """All settings as keyword arguments, without the device (shallow: values are not copied)."""
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    elif isinstance(settings, dict):
        values = dict(settings)
    else:
        raise TypeError(
            f"compile_config must be a TorchTensorRTConfig (torch_tensorrt.dynamo.CompilationSettings), got "
            f"{type(settings).__name__}"
        )
    values.pop(DEVICE_FIELD, None)
    return values


def settings_overrides(settings: Any) -> dict[str, Any]:
    """The settings that differ from a default-constructed instance of the same class, without
    the device: what describe() and the saved config show."""
    values = settings_values(settings)
    try:
        defaults = settings_values(type(settings)())
    except Exception:  # noqa: BLE001 - a class that cannot be default-constructed: keep everything
        return values
    return {name: value for name, value in values.items() if name not in defaults or defaults[name] != value}


_OPS_PREFIX = "torch.ops."
_OP_TYPES = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


def _setting_json(name: str, value: Any) -> Any:
    """A setting as JSON. Operators (`torch_executed_ops={torch.ops.aten.add.Tensor}`, the form the
    guide documents) are saved by name, "torch.ops.aten.add.Tensor", and sets are sorted by their
    JSON text, so values of mixed types sort too."""
    if isinstance(value, _OP_TYPES):
        return f"{_OPS_PREFIX}{value}"
    if isinstance(value, (set, frozenset, list, tuple)):
        items = [_setting_json(name, item) for item in value]
        return (
            sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
            if isinstance(value, (set, frozenset))
            else items
        )
    if callable(value) and not isinstance(value, (type, enum.Enum)):
        raise ValueError(
            f"compile_config.{name}: cannot save {value!r}; name operators as torch.ops overloads "
            '(torch.ops.aten.add.Tensor) or their names ("torch.ops.aten.add.Tensor")'
        )
    return _json_value(value)


def settings_to_dict(settings: Any) -> dict[str, Any]:
    return {name: _setting_json(name, value) for name, value in sorted(settings_overrides(settings).items())}


def _operator(name: str) -> Any:
    """torch.ops.<namespace>.<op>[.<overload>] from its saved name (untrusted: only identifiers,
    and it must resolve to an operator)."""
    parts = name[len(_OPS_PREFIX) :].split(".")
    if not 2 <= len(parts) <= 3 or not all(part.isidentifier() and not part.startswith("_") for part in parts):
        raise ValueError(f"{name!r} is not an operator name (torch.ops.<namespace>.<op>[.<overload>])")
    target: Any = torch.ops
    try:
        for part in parts:
            target = getattr(target, part)
    except (AttributeError, RuntimeError) as e:
        raise ValueError(f"operator {name!r} does not exist here: {e}") from None
    if not isinstance(target, _OP_TYPES):
        raise ValueError(f"{name!r} is not an operator")
    return target


def _decode(value: Any, default: Any) -> Any:
    """A JSON value back to the type of the field's default (sets, dtypes, enums)."""
    if isinstance(value, str) and value.startswith(_OPS_PREFIX):
        return _operator(value)
    if (
        isinstance(value, str)
        and value.startswith("torch.")
        and isinstance(getattr(torch, value[6:], None), torch.dtype)
    ):
        return getattr(torch, value[6:])
    if isinstance(value, list):
        items = [
            _decode(
                v, next(iter(default), None) if isinstance(default, (set, frozenset, list, tuple)) and default else None
            )
            for v in value
        ]
        return (
            set(items)
            if isinstance(default, (set, frozenset))
            else tuple(items)
            if isinstance(default, tuple)
            else items
        )
    if isinstance(value, str) and isinstance(default, enum.Enum):
        return type(default)[value]
    return value


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def settings_from_dict(data: dict[str, Any] | None, settings_class: type | None = None) -> Any:
    """Inverse of settings_to_dict (restores sets of dtypes and enum members by the defaults' types).
    A saved config is untrusted input: a setting the class does not have (written for another
    Torch-TensorRT version, or by hand) is refused naming it and the settings there are, instead
    of surfacing as the class's own TypeError."""
    cls = settings_class or TorchTensorRTConfig
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"saved compile_config must be an object of Torch-TensorRT settings, got {data!r}")
    if dataclasses.is_dataclass(cls):
        known = {f.name for f in dataclasses.fields(cls)} - {DEVICE_FIELD}  # the device is never saved
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"saved compile_config has setting(s) {unknown} that {_class_name(cls)} does not have "
                f"(written for another Torch-TensorRT version?); its settings are: {sorted(known)}"
            )
    try:
        defaults = settings_values(cls())
    except Exception:  # noqa: BLE001
        defaults = {}
    try:
        return cls(**{name: _decode(value, defaults.get(name)) for name, value in data.items()})
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"saved compile_config {data!r} is not valid for {_class_name(cls)}: {e}") from e


def _reduced_precision(dtypes: Any) -> str | None:
    """ "fp16"/"bf16" for torch dtypes, Torch-TensorRT dtypes (`dtype.f16`) or their names."""
    names = {str(p).rsplit(".", 1)[-1].lower() for p in dtypes if p is not None}
    if names & {"float16", "half", "f16"}:
        return "fp16"
    if names & {"bfloat16", "bf16"}:
        return "bf16"
    return None


def settings_precision_class(settings: Any) -> str | None:
    """ "fp16"/"bf16" when the settings let TensorRT run reduced-precision kernels, so the engine is
    validated with that class's tolerances; None otherwise. Two ways (docs/guide.md): autocast
    (`enable_autocast` with `autocast_low_precision_type`, what Torch-TensorRT 2.11 recommends), and
    the deprecated weak typing (`enabled_precisions` with `use_explicit_typing=False`)."""
    values = settings_values(settings)
    if values.get("enable_autocast", False):
        return _reduced_precision([values.get("autocast_low_precision_type")])
    if values.get("use_explicit_typing", True):
        return None
    return _reduced_precision(values.get("enabled_precisions") or ())


class CompileConfigMixin:
    """For backend configs with a ``compile_config`` field: it is saved as its non-default
    settings (no device), restored into ``TorchTensorRTConfig``, and described compactly."""

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: settings_to_dict(self.compile_config)
            if f.name == "compile_config"  # type: ignore
            else _json_value(getattr(self, f.name))
            for f in dataclasses.fields(self)
        }  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendConfig:
        data = dict(data)
        try:
            settings = settings_from_dict(data.pop("compile_config", None))
        except ValueError as e:
            raise ValueError(f"{cls.__name__}: {e}") from e
        config = super().from_dict(data)  # type: ignore[misc]
        config.compile_config = settings
        return config

    def describe(self) -> str:
        parts = []
        overrides = settings_overrides(self.compile_config)  # type: ignore[attr-defined]
        if overrides:
            parts.append(
                "compile_config="
                + type(self.compile_config).__name__
                + "("
                + ", ".join(  # type: ignore
                    f"{name}={value!r}" for name, value in sorted(overrides.items())
                )
                + ")"
            )
        default = type(self)()
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == "compile_config":
                continue
            value = getattr(self, f.name)
            if getattr(default, f.name) != value:
                parts.append(f"{f.name}={value!r}")
        return ", ".join(parts)


def default_compile_config() -> TorchTensorRTConfig:
    return TorchTensorRTConfig()


# -- engines or fallbacks -----------------------------------------------------------------------
# The modules Torch-TensorRT 2.11 puts into a compiled graph for each TensorRT engine
# (torch_tensorrt.dynamo.runtime, C++ and Python runtime); the conformance tier checks the names.
ENGINE_MODULE_CLASSES = frozenset({"TorchTensorRTModule", "PythonTorchTensorRTModule"})
# The children of a partitioned graph that Torch-TensorRT leaves to PyTorch.
PYTORCH_PART_PREFIX = "_run_on_gpu"


def tensorrt_engine_count(compiled: Any) -> int:
    """The TensorRT engine modules in what dynamo.compile or the "torch_tensorrt" torch.compile backend
    returned; 0 for a graph that runs entirely in PyTorch (the backend returns the graph itself
    when an engine build fails and pass_through_build_failures is False)."""
    if not isinstance(compiled, torch.nn.Module):
        return 0
    return sum(
        1
        for module in compiled.modules()
        if type(module).__name__ in ENGINE_MODULE_CLASSES and type(module).__module__.startswith("torch_tensorrt")
    )


def pytorch_part_count(compiled: Any) -> int:
    if not isinstance(compiled, torch.nn.Module):
        return 0
    return sum(1 for name, _ in compiled.named_children() if name.startswith(PYTORCH_PART_PREFIX))


@dataclasses.dataclass
class EngineCoverage:
    """What Torch-TensorRT made of the graphs it compiled: `graphs` compiled (torch.compile: one per
    Dynamo graph), `engines` TensorRT engines in them, `pytorch_graphs` of them without any engine
    and `pytorch_parts` partitions left to PyTorch inside graphs that have engines."""

    graphs: int = 0
    engines: int = 0
    pytorch_graphs: int = 0
    pytorch_parts: int = 0

    def add(self, compiled: Any) -> None:
        engines = tensorrt_engine_count(compiled)
        self.graphs += 1
        self.engines += engines
        self.pytorch_graphs += engines == 0
        self.pytorch_parts += pytorch_part_count(compiled) if engines else 0

    def check(self, backend: str, graph: str) -> None:
        """Reports the coverage to telemetry; a build with no engine at all is refused (it would be
        measured as TensorRT while it runs PyTorch), a partial one is logged."""
        tune_data.record_step(
            "torch_tensorrt_engines",
            0.0,
            engines=self.engines,
            graphs=self.graphs,
            pytorch_graphs=self.pytorch_graphs,
            pytorch_parts=self.pytorch_parts,
        )
        if self.graphs and not self.engines:
            raise RuntimeError(
                f"{backend} built no TensorRT engine for graph '{graph}': all {self.graphs} graph(s) Torch-TensorRT "
                "compiled run in PyTorch (an engine build that fails falls back to PyTorch when "
                "pass_through_build_failures=False; min_block_size and torch_executed_ops can leave TensorRT "
                "nothing); expected at least one TensorRT engine, got 0. Set "
                "compile_config.pass_through_build_failures=True to see why the build failed"
            )
        if self.pytorch_graphs or self.pytorch_parts:
            logger.warning(
                "%s (graph '%s'): Torch-TensorRT built %d TensorRT engine(s); %d of %d compiled graph(s) and %d "
                "partition(s) run in PyTorch (failed engine builds fall back to PyTorch when "
                "pass_through_build_failures=False)",
                backend,
                graph,
                self.engines,
                self.pytorch_graphs,
                self.graphs,
                self.pytorch_parts,
            )
