from aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_backend import TorchTensorRTAotBackend
from aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_config import TorchTensorRTAotBackendConfig

__all__ = ["TorchTensorRTAotBackend", "TorchTensorRTAotBackendConfig"]
