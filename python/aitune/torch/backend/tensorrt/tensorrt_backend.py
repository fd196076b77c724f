"""AITune's import path for the TensorRT backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.backend import TensorRTBackend
from aitune.torch.backend.tensorrt.config import ProfileMode, TensorRTBackendConfig

__all__ = ["ProfileMode", "TensorRTBackend", "TensorRTBackendConfig"]
