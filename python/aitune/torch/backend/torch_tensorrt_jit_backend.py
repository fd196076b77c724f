"""AITune's import path for the Torch-TensorRT JIT backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.common.torch_tensorrt_config import TorchTensorRTConfig
from aitune.torch.backend.torch_tensorrt_jit import TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig

__all__ = ["TorchTensorRTConfig", "TorchTensorRTJitBackend", "TorchTensorRTJitBackendConfig"]
