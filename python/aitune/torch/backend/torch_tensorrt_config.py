"""Torch-TensorRT compile settings shared by the JIT and AOT Torch-TensorRT backends (SPEC §1.2, §4.2).

``TorchTensorRTConfig`` is ``torch_tensorrt.dynamo.CompilationSettings`` when Torch-TensorRT is
installed, so ``compile_config=CompilationSettings(...)`` and ``compile_config=TorchTensorRTConfig(...)``
are the same thing. Without the library it is :class:`CompilationSettingsStandIn`, a dataclass
that accepts the common keywords (and any other keyword, kept in ``extra``), so configs can be
built, described and saved on a host without Torch-TensorRT; building still needs the library.

The device is never part of the settings aitune stores or describes: the tuning device is
passed at build time (SPEC §4.2 "device is omitted from describe() and from serialisation").
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from typing import Any

import torch

from aitune.torch.backend.backend import BackendConfig, _json_value

PACKAGE_MISSING_REASON = "torch-tensorrt is not installed. Please install `torch-tensorrt`."
DEVICE_FIELD = "device"


@dataclasses.dataclass
class CompilationSettingsStandIn:
    """Used as ``TorchTensorRTConfig`` when torch_tensorrt is not importable. Field names and
    defaults follow Torch-TensorRT's CompilationSettings for the options the guide documents;
    any other keyword is kept in ``extra`` and passed through to Torch-TensorRT unchanged."""

    workspace_size: int = 0
    enabled_precisions: set = dataclasses.field(default_factory=lambda: {torch.float32})
    use_explicit_typing: bool = True
    min_block_size: int = 5
    optimization_level: int | None = None
    truncate_double: bool = False
    require_full_compilation: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __init__(self, **kwargs: Any) -> None:
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            setattr(self, f.name, kwargs.pop(f.name) if f.name in kwargs else default)
        self.extra = dict(kwargs.pop("extra", None) or {})
        self.extra.update(kwargs)  # options this stand-in does not name go to Torch-TensorRT as given

    def options(self) -> dict[str, Any]:
        """The settings as Torch-TensorRT keyword arguments (``extra`` flattened in)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        values.update(self.extra)
        return values


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
    if hasattr(settings, "options") and callable(settings.options):
        values = settings.options()
    elif dataclasses.is_dataclass(settings):
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


def settings_to_dict(settings: Any) -> dict[str, Any]:
    return {name: _json_value(value) for name, value in sorted(settings_overrides(settings).items())}


def _decode(value: Any, default: Any) -> Any:
    """A JSON value back to the type of the field's default (sets, dtypes, enums)."""
    if isinstance(value, str) and value.startswith("torch.") and isinstance(getattr(torch, value[6:], None),
                                                                           torch.dtype):
        return getattr(torch, value[6:])
    if isinstance(value, list):
        items = [_decode(v, next(iter(default), None) if isinstance(default, (set, frozenset, list, tuple)) and default
                         else None) for v in value]
        return set(items) if isinstance(default, (set, frozenset)) else tuple(items) if isinstance(default, tuple) \
            else items
    if isinstance(value, str) and isinstance(default, enum.Enum):
        return type(default)[value]
    return value


def settings_from_dict(data: dict[str, Any] | None, settings_class: type | None = None) -> Any:
    """Inverse of settings_to_dict (restores sets of dtypes and enum members by the defaults' types)."""
    cls = settings_class or TorchTensorRTConfig
    data = dict(data or {})
    try:
        defaults = settings_values(cls())
    except Exception:  # noqa: BLE001
        defaults = {}
    return cls(**{name: _decode(value, defaults.get(name)) for name, value in data.items()})


def settings_precision_class(settings: Any) -> str | None:
    """"fp16"/"bf16" when the settings let TensorRT pick reduced-precision kernels (legacy weak
    typing: enabled_precisions with use_explicit_typing=False); None otherwise."""
    values = settings_values(settings)
    if values.get("use_explicit_typing", True):
        return None
    names = {str(p).rsplit(".", 1)[-1].lower() for p in values.get("enabled_precisions") or ()}
    if names & {"float16", "half", "f16"}:
        return "fp16"
    if names & {"bfloat16", "bf16"}:
        return "bf16"
    return None


class CompileConfigMixin:
    """For backend configs with a ``compile_config`` field: it is saved as its non-default
    settings (no device), restored into ``TorchTensorRTConfig``, and described compactly."""

    def to_dict(self) -> dict[str, Any]:
        data = BackendConfig.to_dict(self)  # type: ignore[arg-type]
        data["compile_config"] = settings_to_dict(self.compile_config)  # type: ignore[attr-defined]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendConfig:
        data = dict(data)
        settings = settings_from_dict(data.pop("compile_config", None))
        config = super().from_dict(data)  # type: ignore[misc]
        config.compile_config = settings
        return config

    def describe(self) -> str:
        parts = []
        overrides = settings_overrides(self.compile_config)  # type: ignore[attr-defined]
        if overrides:
            parts.append("compile_config=" + type(self.compile_config).__name__ + "(" + ", ".join(  # type: ignore
                f"{name}={value!r}" for name, value in sorted(overrides.items())) + ")")
        default = type(self)()
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == "compile_config":
                continue
            value = getattr(self, f.name)
            if getattr(default, f.name) != value:
                parts.append(f"{f.name}={value!r}")
        return ", ".join(parts)


def default_compile_config() -> Any:
    return TorchTensorRTConfig()
