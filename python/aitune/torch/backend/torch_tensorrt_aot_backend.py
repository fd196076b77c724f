"""AITune's import path for the Torch-TensorRT AOT backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.torch_tensorrt_aot import TorchTensorRTAotBackend, TorchTensorRTAotBackendConfig
from aitune.torch.backend.common.torch_tensorrt_config import TorchTensorRTConfig

__all__ = ["TorchTensorRTAotBackend", "TorchTensorRTAotBackendConfig", "TorchTensorRTConfig"]
