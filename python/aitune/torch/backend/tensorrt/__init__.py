"""The TensorRT backend group (docs/reference/api.md#backend-classes, docs/reference/tensorrt.md)."""

from aitune.torch.backend.tensorrt.backend import TensorRTBackend
from aitune.torch.backend.tensorrt.config import (
    ONNXAutoCastConfig,
    ONNXQuantizationConfig,
    ProfileMode,
    TensorRTBackendConfig,
    TensorRTProfile,
    TorchQuantizationConfig,
)

__all__ = [
    "ONNXAutoCastConfig",
    "ONNXQuantizationConfig",
    "ProfileMode",
    "TensorRTBackend",
    "TensorRTBackendConfig",
    "TensorRTProfile",
    "TorchQuantizationConfig",
]
