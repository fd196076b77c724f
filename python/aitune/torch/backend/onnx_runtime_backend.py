"""AITune 0.6 import path, re-exporting aitune's objects (tests/compat/aitune_paths.py; docs/guide.md)."""

from aitune.torch.backend.onnx_runtime import ONNXExecutionProvider, ONNXRuntimeBackend, ONNXRuntimeBackendConfig

__all__ = ["ONNXExecutionProvider", "ONNXRuntimeBackend", "ONNXRuntimeBackendConfig"]
