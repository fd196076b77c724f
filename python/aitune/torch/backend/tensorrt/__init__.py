"""The TensorRT backend group (SPEC §1.2, §5)."""

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
