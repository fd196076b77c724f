"""AITune's import path for ModelOpt ONNX quantization settings (docs/guide.md, "Coming from AITune")."""

from aitune.torch.backend.tensorrt.config import ONNXQuantizationConfig

__all__ = ["ONNXQuantizationConfig"]
