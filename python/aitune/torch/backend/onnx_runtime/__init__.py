from aitune.torch.backend.onnx_runtime.onnx_runtime_backend import ONNXRuntimeBackend
from aitune.torch.backend.onnx_runtime.onnx_runtime_config import ONNXExecutionProvider, ONNXRuntimeBackendConfig

__all__ = ["ONNXExecutionProvider", "ONNXRuntimeBackend", "ONNXRuntimeBackendConfig"]
