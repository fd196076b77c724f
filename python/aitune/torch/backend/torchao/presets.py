"""AITune's six TorchAO presets and what each needs (docs/reference/backends.md#torchao-torchaobackend).

A preset is a name until the build: constructing a config never imports torchao (importing it
takes seconds), so `TorchAOBackendConfig(quantization="fp8wo")` works on any host and the torchao
object is made by `make()` when the backend is built. A custom `quantization_config` is judged
by its class name through the same table of requirements.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

QUANTIZATION_PRESETS = ("int8wo", "int8dq", "fp8wo", "fp8dq", "mxfp8dq", "nvfp4dq")
DEFAULT_QUANTIZATION = "fp8wo"

# Block sizes of the microscaling formats: a quantized weight's last dimension (and for NVFP4 also
# the one before it) must be a multiple of them (torchao's MX/NVFP4 tensors refuse other shapes).
MXFP8DQ_BLOCK_SIZE_DIVISIBILITY = 32
NVFP4DQ_BLOCK_SIZE_DIVISIBILITY = 16


@dataclasses.dataclass(frozen=True)
class Needs:
    """What a quantization scheme needs from the device and the model."""

    precision_class: str  # "int8", or "fp8" (the loose class: fp8, MX, NVFP4, int4)
    min_capability: tuple[int, int] | None = None  # on CUDA; None: any GPU
    runs_on_cpu: bool = True
    bf16_weights: bool = False
    # (last dim, second-to-last dim) multiples a quantized weight must have; 1 = any
    weight_multiple: tuple[int, int] = (1, 1)


_INT8 = Needs("int8")
# Weight-only fp8 stores fp8 and computes in the activation dtype: torchao runs it on any device.
_FP8_WEIGHT_ONLY = Needs("fp8")
_FP8_DYNAMIC = Needs("fp8", min_capability=(8, 9), runs_on_cpu=False)
_MXFP8 = Needs(
    "fp8",
    min_capability=(10, 0),
    runs_on_cpu=False,
    bf16_weights=True,
    weight_multiple=(MXFP8DQ_BLOCK_SIZE_DIVISIBILITY, 1),
)
_NVFP4 = Needs(
    "fp8",
    min_capability=(10, 0),
    runs_on_cpu=False,
    bf16_weights=True,
    weight_multiple=(NVFP4DQ_BLOCK_SIZE_DIVISIBILITY, NVFP4DQ_BLOCK_SIZE_DIVISIBILITY),
)
_LOOSE = Needs("fp8")

PRESET_NEEDS: dict[str, Needs] = {
    "int8wo": _INT8,
    "int8dq": _INT8,
    "fp8wo": _FP8_WEIGHT_ONLY,
    "fp8dq": _FP8_DYNAMIC,
    "mxfp8dq": _MXFP8,
    "nvfp4dq": _NVFP4,
}

# A custom quantization_config by its torchao class name; any other class gets the loose fp8 class
# and no device requirement beyond what torchao itself checks.
CONFIG_CLASS_NEEDS: dict[str, Needs] = {
    "Int8WeightOnlyConfig": _INT8,
    "Int8DynamicActivationInt8WeightConfig": _INT8,
    "Int8StaticActivationInt8WeightConfig": _INT8,
    "Float8WeightOnlyConfig": _FP8_WEIGHT_ONLY,
    "Float8DynamicActivationFloat8WeightConfig": _FP8_DYNAMIC,
    "Float8StaticActivationFloat8WeightConfig": _FP8_DYNAMIC,
    "MXDynamicActivationMXWeightConfig": _MXFP8,
    "NVFP4DynamicActivationNVFP4WeightConfig": _NVFP4,
}

ARCHITECTURES = {(8, 9): "Ada Lovelace or Hopper", (10, 0): "Blackwell"}


def needs_of(quantization: str | None, quantization_config: Any) -> Needs:
    if quantization is not None:
        return PRESET_NEEDS[quantization]
    return CONFIG_CLASS_NEEDS.get(type(quantization_config).__name__, _LOOSE)


# The int8 presets ask for version 2 of torchao's int8 configs (its Int8Tensor): torchao 0.17 still
# defaults to version 1, which it deprecates (a warning per quantized layer), and 0.18 defaults to 2.
def _int8wo() -> Any:
    from torchao.quantization import Int8WeightOnlyConfig

    return Int8WeightOnlyConfig(version=2)


def _int8dq() -> Any:
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig

    return Int8DynamicActivationInt8WeightConfig(version=2)


def _fp8wo() -> Any:
    from torchao.quantization import Float8WeightOnlyConfig

    return Float8WeightOnlyConfig()


def _fp8dq() -> Any:
    # One scale per tensor for activations and weights, as AITune's preset.
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerTensor

    return Float8DynamicActivationFloat8WeightConfig(granularity=PerTensor())


def _mxfp8dq() -> Any:
    from torchao.prototype.mx_formats.inference_workflow import MXDynamicActivationMXWeightConfig
    from torchao.quantization.quantize_.common import KernelPreference

    return MXDynamicActivationMXWeightConfig(
        activation_dtype=torch.float8_e4m3fn,
        weight_dtype=torch.float8_e4m3fn,
        kernel_preference=KernelPreference.AUTO,
    )


def _nvfp4dq() -> Any:
    from torchao.prototype.mx_formats.inference_workflow import NVFP4DynamicActivationNVFP4WeightConfig

    return NVFP4DynamicActivationNVFP4WeightConfig(use_dynamic_per_tensor_scale=True, use_triton_kernel=True)


_MAKERS: dict[str, Callable[[], Any]] = {
    "int8wo": _int8wo,
    "int8dq": _int8dq,
    "fp8wo": _fp8wo,
    "fp8dq": _fp8dq,
    "mxfp8dq": _mxfp8dq,
    "nvfp4dq": _nvfp4dq,
}


def make_preset(quantization: str) -> Any:
    """The torchao config object of a preset (imports torchao)."""
    return _MAKERS[quantization]()


def device_refusal(what: str, needs: Needs, device: torch.device) -> str | None:
    """Why `what` (a preset name or a config class) cannot run on `device`, or None."""
    if device.type == "cpu":
        if needs.runs_on_cpu:
            return None
        return f"{what} needs a CUDA GPU{_capability_text(needs.min_capability)}; the tuning device is cpu"
    if device.type != "cuda" or needs.min_capability is None:
        return None
    if not torch.cuda.is_available():
        return f"{what} needs a CUDA GPU{_capability_text(needs.min_capability)}; CUDA is not available"
    index = device.index if device.index is not None else torch.cuda.current_device()
    capability = tuple(torch.cuda.get_device_capability(index))
    if capability >= needs.min_capability:
        return None
    major, minor = capability
    return (
        f"{what} needs an NVIDIA GPU{_capability_text(needs.min_capability)}; cuda:{index} "
        f"({torch.cuda.get_device_name(index)}) has compute capability {major}.{minor} (sm_{major}{minor})"
    )


def _capability_text(capability: tuple[int, int] | None) -> str:
    if capability is None:
        return ""
    major, minor = capability
    arch = ARCHITECTURES.get(capability)
    return f" of compute capability {major}.{minor} (sm_{major}{minor}{', ' + arch if arch else ''}) or newer"
