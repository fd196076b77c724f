"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.backend.common.torch_tensorrt_config import TorchTensorRTConfig
from aitune.torch.backend.torch_tensorrt_jit import TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig

__all__ = ["TorchTensorRTConfig", "TorchTensorRTJitBackend", "TorchTensorRTJitBackendConfig"]
