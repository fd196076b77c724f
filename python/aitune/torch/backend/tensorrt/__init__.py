"""The TensorRT backend group (docs/reference/api.md#backend-classes, docs/reference/tensorrt.md)."""

from aitune.torch.backend.tensorrt.tensorrt_backend import TensorRTBackend
from aitune.torch.backend.tensorrt.tensorrt_config import (
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
