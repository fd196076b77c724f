from aitune.torch.backend.torch_tensorrt_jit.torch_tensorrt_jit_backend import TorchTensorRTJitBackend
from aitune.torch.backend.torch_tensorrt_jit.torch_tensorrt_jit_config import TorchTensorRTJitBackendConfig

__all__ = ["TorchTensorRTJitBackend", "TorchTensorRTJitBackendConfig"]
