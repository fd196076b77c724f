"""AITune's import path for the ONNX Runtime backend (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.onnx_runtime import ONNXExecutionProvider, ONNXRuntimeBackend, ONNXRuntimeBackendConfig

__all__ = ["ONNXExecutionProvider", "ONNXRuntimeBackend", "ONNXRuntimeBackendConfig"]
