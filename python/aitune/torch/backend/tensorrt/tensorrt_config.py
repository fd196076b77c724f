"""TensorRTBackendConfig and its parts (docs/reference/tensorrt.md): profile modes, custom profiles and the
quantization configs. Everything validates at construction without importing tensorrt or
ModelOpt, so a config can be written on a host that has neither."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any, Union

from aitune.torch.backend.backend import BackendConfig, ServingOptions

AUTOCAST_PRECISIONS = ("fp16", "bf16")
ONNX_QUANT_PRECISIONS = ("int8", "int4", "fp8")
CALIBRATION_METHODS = ("max", "entropy", "awq_clip", "awq_lite", "awq_full", "rtn_dq")
TORCH_QUANT_PRESETS = (
    "FP8_DEFAULT_CFG",
    "NVFP4_DEFAULT_CFG",
    "NVFP4_FP8_MHA_CONFIG",
    "INT8_DEFAULT_CFG",
    "INT8_SMOOTHQUANT_CFG",
    "INT4_AWQ_CFG",
)
COMPATIBILITY_LEVELS = ("NONE", "AMPERE_PLUS", "SAME_COMPUTE_CAPABILITY")


class ProfileMode(enum.Enum):
    SINGLE = "single"
    SAMPLES_USED = "samples_used"


def _shape(value: Any, what: str, path: Any) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"TensorRT profile {what} for input {path!r} must be a tuple of ints, got {value!r}")
    for size in value:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(
                f"TensorRT profile {what} for input {path!r} must hold non-negative integers, got {tuple(value)!r}"
            )
    return tuple(value)


class TensorRTProfile:
    """One optimization profile: (min, opt, max) shape per input path. The path is the input's
    semantic path ("input", ("inputs", "tokens")) or its access path from the log table
    ('inputs["tokens"]')."""

    def __init__(self) -> None:
        self.inputs: dict[Any, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}

    def add_input_shape(self, path: Any, min_shape: Any, opt_shape: Any, max_shape: Any) -> TensorRTProfile:
        if isinstance(path, list):
            path = tuple(path)
        if not isinstance(path, (str, tuple)) or path in ("", ()):
            raise ValueError(f"TensorRT profile input path must be a non-empty string or tuple, got {path!r}")
        shapes = (
            _shape(min_shape, "min_shape", path),
            _shape(opt_shape, "opt_shape", path),
            _shape(max_shape, "max_shape", path),
        )
        if len({len(s) for s in shapes}) != 1:
            raise ValueError(
                f"TensorRT profile shapes for input {path!r} must have one rank, got min={shapes[0]}, "
                f"opt={shapes[1]}, max={shapes[2]}"
            )
        self.inputs[path] = shapes
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [
                [list(p) if isinstance(p, tuple) else p, *(list(s) for s in shapes)]
                for p, shapes in self.inputs.items()
            ]
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TensorRTProfile:
        profile = cls()
        for path, low, opt, high in data["inputs"]:
            profile.add_input_shape(tuple(path) if isinstance(path, list) else path, low, opt, high)
        return profile

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorRTProfile) and self.inputs == other.inputs

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{p!r}: min={list(s[0])}, opt={list(s[1])}, max={list(s[2])}" for p, s in self.inputs.items()
        )
        return f"TensorRTProfile({parts})"


@dataclasses.dataclass
class ONNXAutoCastConfig:
    """FP16/BF16 mixed precision of the exported ONNX through ModelOpt autocast."""

    precision: str = "fp16"
    keep_io_types: bool = True

    def __post_init__(self) -> None:
        if self.precision not in AUTOCAST_PRECISIONS:
            raise ValueError(
                f"Unsupported autocast precision {self.precision!r}; expected one of {list(AUTOCAST_PRECISIONS)}"
            )


@dataclasses.dataclass
class ONNXQuantizationConfig:
    """ModelOpt ONNX post-training quantization of the exported ONNX."""

    precision: str
    calibration_method: str | None = None
    use_model_opt_post_processing: bool = False

    def __post_init__(self) -> None:
        if self.precision not in ONNX_QUANT_PRECISIONS:
            raise ValueError(f"Unsupported precision {self.precision!r}; expected one of {list(ONNX_QUANT_PRECISIONS)}")
        if self.calibration_method is not None and self.calibration_method not in CALIBRATION_METHODS:
            raise ValueError(
                f"Unsupported calibration_method {self.calibration_method!r}; expected one of "
                f"{list(CALIBRATION_METHODS)} or None"
            )


@dataclasses.dataclass
class TorchQuantizationConfig:
    """ModelOpt PyTorch PTQ preset applied to a deep copy of the module before export."""

    quantization_config: str = "FP8_DEFAULT_CFG"
    device: str = "cuda"

    def __post_init__(self) -> None:
        if self.quantization_config not in TORCH_QUANT_PRESETS:
            raise ValueError(
                f"Unsupported quantization_config {self.quantization_config!r}; expected one of "
                f"{list(TORCH_QUANT_PRESETS)}"
            )


QuantizationConfig = Union[ONNXAutoCastConfig, ONNXQuantizationConfig, TorchQuantizationConfig]
_QUANT_CLASSES = {c.__name__: c for c in (ONNXAutoCastConfig, ONNXQuantizationConfig, TorchQuantizationConfig)}


def _compatibility_name(value: Any) -> str | None:
    """A trt.HardwareCompatibilityLevel member (or its name), stored by name."""
    if value is None:
        return None
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if name is None:  # pybind11 enums: str(member) is "HardwareCompatibilityLevel.AMPERE_PLUS"
        name = str(value).rsplit(".", 1)[-1]
    if name not in COMPATIBILITY_LEVELS:
        raise ValueError(
            "compatibility_level must be a trt.HardwareCompatibilityLevel member or one of "
            f"{list(COMPATIBILITY_LEVELS)}, "
            f"got {value!r}"
        )
    return name


@dataclasses.dataclass
class TensorRTBackendConfig(BackendConfig, ServingOptions):
    """ONNX export + TensorRT engine (docs/reference/tensorrt.md)."""

    use_dynamo: bool = True
    workspace_size: int | None = None
    opset_version: int | None = None
    optimization_level: int | None = None
    compatibility_level: Any = None
    timing_cache: Path | None = None
    profiles: ProfileMode | list[TensorRTProfile] = ProfileMode.SINGLE
    device: str = "cuda"
    quantization_config: QuantizationConfig | None = None
    enable_tf32: bool = True
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        if self.workspace_size is not None and (
            isinstance(self.workspace_size, bool)
            or not isinstance(self.workspace_size, int)
            or self.workspace_size <= 0
        ):
            raise ValueError(f"workspace_size must be a positive number of bytes or None, got {self.workspace_size!r}")
        if self.optimization_level is not None and (
            isinstance(self.optimization_level, bool)
            or not isinstance(self.optimization_level, int)
            or not 0 <= self.optimization_level <= 5
        ):
            raise ValueError(f"optimization_level must be an integer between 0 and 5, got {self.optimization_level!r}")
        self.compatibility_level = _compatibility_name(self.compatibility_level)
        if self.timing_cache is not None:
            self.timing_cache = Path(self.timing_cache)
        if isinstance(self.profiles, str) and self.profiles in ProfileMode.__members__:
            self.profiles = ProfileMode[self.profiles]  # the serialised form
        if isinstance(self.profiles, (list, tuple)):
            self.profiles = [TensorRTProfile.from_dict(p) if isinstance(p, dict) else p for p in self.profiles]
            if not self.profiles or not all(isinstance(p, TensorRTProfile) for p in self.profiles):
                raise ValueError(
                    f"profiles must be a ProfileMode or a non-empty list of TensorRTProfile, got {self.profiles!r}"
                )
        elif not isinstance(self.profiles, ProfileMode):
            raise ValueError(f"profiles must be a ProfileMode or a list of TensorRTProfile, got {self.profiles!r}")
        if isinstance(self.quantization_config, dict):
            data = dict(self.quantization_config)
            self.quantization_config = _QUANT_CLASSES[data.pop("type")](**data)
        quant_types = tuple(_QUANT_CLASSES.values())
        if self.quantization_config is not None and not isinstance(self.quantization_config, quant_types):
            raise ValueError(
                "quantization_config must be ONNXAutoCastConfig, ONNXQuantizationConfig, TorchQuantizationConfig or "
                f"None, got {self.quantization_config!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if isinstance(self.profiles, list):
            data["profiles"] = [p.to_dict() for p in self.profiles]
        if self.quantization_config is not None:
            data["quantization_config"] = {
                "type": type(self.quantization_config).__name__,
                **dataclasses.asdict(self.quantization_config),
            }
        return data
